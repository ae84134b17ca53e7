"""ZooKeeperStore against a real ZooKeeper server: the shared contract plus session loss.

Needs Debian's ``zookeeper`` package (scripts/setup.sh installs it). Without it the tests are
skipped on a developer's machine, with the reason, and fail under CI (``CI=true``), so a
missing install step cannot turn them into silent no-ops there.
"""

from __future__ import annotations

import pytest
from kazoo.client import KazooClient
from kazoo.exceptions import ConnectionLoss, NodeExistsError, SessionExpiredError, UnimplementedError

from odradek.metadata import errors, zookeeper_bulk_reads, zookeeper_multi_read, zookeeper_store
from odradek.metadata.errors import StoreUnavailableError
from odradek.metadata.zookeeper_store import ZooKeeperStore
from tests.metadata.store_contract import Recorder, StoreContract, wait_for


class TestZooKeeperStore(StoreContract):
    @pytest.fixture
    def open_store(self, zookeeper, chroot):
        opened: list[ZooKeeperStore] = []

        def open_store() -> ZooKeeperStore:
            opened.append(ZooKeeperStore(zookeeper.hosts, chroot))
            return opened[-1]

        yield open_store
        for store in opened:
            store.close()


def _expire_session(hosts: str, store: ZooKeeperStore) -> None:
    """Expire the store's session (see `expire_client_session`)."""
    expire_client_session(hosts, store._client)


def expire_client_session(hosts: str, client: KazooClient) -> None:
    """Expire a kazoo client's session the way ZooKeeper's own tests do: a second client joins
    it with the same id and password, then closes it."""
    session_id, password = client.client_id
    intruder = KazooClient(hosts=hosts, client_id=(session_id, password))
    intruder.start(timeout=10)
    intruder.stop()
    intruder.close()


def test_after_session_expiry_watches_and_listeners_recover(zookeeper, chroot):
    with ZooKeeperStore(zookeeper.hosts, chroot) as store:
        store.create("/brokers")
        store.create("/brokers/1", ephemeral=True)
        renewed = Recorder()
        store.add_session_listener(lambda: renewed("/session"))
        seen = Recorder()
        store.watch_children("/brokers", seen)
        _expire_session(zookeeper.hosts, store)
        wait_for(lambda: renewed.count() >= 1, "the new session")
        assert store.exists("/brokers/1") is None
        before = seen.count()
        store.create("/brokers/1", ephemeral=True)
        wait_for(lambda: seen.count() > before, "the watch after the new session")


def test_session_lost_listener_runs_before_the_new_session_fires_watches(zookeeper, chroot):
    """A controller must resign before it handles anything the new session's watches report:
    the lost listener is called first, then the watches, then the session listeners."""
    with ZooKeeperStore(zookeeper.hosts, chroot) as store:
        store.create("/brokers")
        order: list[str] = []
        store.add_session_lost_listener(lambda: order.append("lost"))
        store.add_session_listener(lambda: order.append("new session"))
        store.watch_children("/brokers", lambda _: order.append("watch"))
        order.clear()  # the watch's first run, if any
        _expire_session(zookeeper.hosts, store)
        wait_for(lambda: "new session" in order, "the new session")
        assert order[0] == "lost", order
        assert order.index("lost") < order.index("watch") < order.index("new session"), order


def _failing_get_children(store: ZooKeeperStore, failures: int) -> list[int]:
    """Make the store's next ``failures`` children reads fail as in a session being replaced;
    returns the running count of the failures raised."""
    real, raised = store._client.get_children, [0]

    def get_children(*args, **kwargs):
        if raised[0] < failures:
            raised[0] += 1
            raise SessionExpiredError()
        return real(*args, **kwargs)

    store._client.get_children = get_children
    return raised


def test_a_watch_asked_for_during_a_session_loss_is_set_by_a_retry(zookeeper, chroot):
    with ZooKeeperStore(zookeeper.hosts, chroot) as store:
        store.create("/brokers")
        raised = _failing_get_children(store, 2)
        seen = Recorder()
        store.watch_children("/brokers", seen)
        assert raised[0] == 2
        store.create("/brokers/1", ephemeral=True)
        wait_for(lambda: seen.count() >= 1, "the watch set by the retry")


def test_a_watch_that_cannot_be_set_yet_is_set_on_the_new_session(zookeeper, chroot):
    with ZooKeeperStore(zookeeper.hosts, chroot) as store:
        store.create("/brokers")
        raised = _failing_get_children(store, 10**6)
        seen = Recorder()
        handle = store.watch_children("/brokers", seen)  # no error: kept for the reconnection
        assert raised[0] >= 2 and not handle.cancelled
        store._client.get_children = type(store._client).get_children.__get__(store._client)
        renewed = Recorder()
        store.add_session_listener(lambda: renewed("/session"))
        _expire_session(zookeeper.hosts, store)
        wait_for(lambda: renewed.count() >= 1, "the new session")
        before = seen.count()  # the reconnection ran the callback once already
        assert before >= 1
        store.create("/brokers/1", ephemeral=True)
        wait_for(lambda: seen.count() > before, "the watch set on the new session")


def interrupt_creates(store: ZooKeeperStore, *steps) -> list:
    """Run each of ``steps`` in place of one of the store's next creates, in order, then let
    creates through. A step is called with kazoo's real ``create`` and its arguments, so it can
    fail as a lost connection or session would, before or after applying the create. Returns
    the list of steps not used yet."""
    real, left = store._client.create, list(steps)

    def create(*args, **kwargs):
        if left:
            return left.pop(0)(real, *args, **kwargs)
        return real(*args, **kwargs)

    store._client.create = create
    return left


def lost(real, *args, **kwargs):
    raise ConnectionLoss()


def expired(real, *args, **kwargs):
    raise SessionExpiredError()


def applied_then_lost(real, *args, **kwargs):
    real(*args, **kwargs)
    raise ConnectionLoss()


def phantom_exists(real, *args, **kwargs):
    raise NodeExistsError()  # a znode that is gone by the time it is read


def test_a_checked_create_is_retried_until_it_gets_through(zookeeper, chroot):
    with ZooKeeperStore(zookeeper.hosts, chroot) as store:
        store.create("/ids")
        left = interrupt_creates(store, lost, expired, phantom_exists)
        created = store.create_checked_ephemeral("/ids/1", b"me")
        assert left == []
        assert created == store.creation_id("/ids/1")
        data, stat = store._client.get("/ids/1")
        assert data == b"me" and stat.ephemeralOwner == store._client.client_id[0]


def test_a_create_whose_answer_was_lost_but_that_was_applied_succeeds(zookeeper, chroot):
    with ZooKeeperStore(zookeeper.hosts, chroot) as store:
        left = interrupt_creates(store, applied_then_lost, applied_then_lost)
        created = store.create_checked_ephemeral("/1", b"me")
        store.ensure_path("/cluster/id", b"x")
        assert left == []
        assert created == store.creation_id("/1")
        assert store.get("/cluster/id") == (b"x", 0)


def test_a_checked_create_refuses_another_sessions_ephemeral(zookeeper, chroot):
    with ZooKeeperStore(zookeeper.hosts, chroot) as other, \
            ZooKeeperStore(zookeeper.hosts, chroot) as store:
        other.create("/1", b"other", ephemeral=True)
        with pytest.raises(errors.NodeExistsError):
            store.create_checked_ephemeral("/1", b"me")
        assert other.get("/1") == (b"other", 0)


def test_a_checked_create_replaces_an_ephemeral_left_by_its_own_ended_session(zookeeper, chroot):
    """ZooKeeper may keep an expired session's ephemeral (ZOOKEEPER-2985): the store deletes
    one held by a session of its own that has ended and creates it again (Kafka's KAFKA-7165
    workaround). Here the left-behind znode is another client's, taken for an ended session."""
    with ZooKeeperStore(zookeeper.hosts, chroot) as old, ZooKeeperStore(zookeeper.hosts, chroot) as store:
        old.create("/1", b"before", ephemeral=True)
        store._past_sessions.add(old._client.client_id[0])
        created = store.create_checked_ephemeral("/1", b"me")
        data, stat = store._client.get("/1")
        assert data == b"me" and stat.ephemeralOwner == store._client.client_id[0] and stat.czxid == created


def test_a_store_remembers_its_ended_sessions(zookeeper, chroot):
    with ZooKeeperStore(zookeeper.hosts, chroot) as store:
        first = store._client.client_id[0]
        renewed = Recorder()
        store.add_session_listener(lambda: renewed("/session"))
        _expire_session(zookeeper.hosts, store)
        wait_for(lambda: renewed.count() >= 1, "the new session")
        assert first in store._past_sessions and store._client.client_id[0] not in store._past_sessions


def test_a_write_that_never_gets_through_is_store_unavailable(zookeeper, chroot, monkeypatch):
    monkeypatch.setattr(zookeeper_store, "_WRITE_ATTEMPTS", 3)
    with ZooKeeperStore(zookeeper.hosts, chroot) as store:
        left = interrupt_creates(store, *[lost] * 4)
        with pytest.raises(StoreUnavailableError):
            store.ensure_path("/a")
        assert len(left) == 1 and store.exists("/a") is None


def test_unreachable_server_is_store_unavailable():
    with pytest.raises(StoreUnavailableError):
        ZooKeeperStore("127.0.0.1:1", connect_timeout=0.5)


def test_chroot_keeps_stores_apart(zookeeper, chroot):
    with ZooKeeperStore(zookeeper.hosts, chroot) as rooted, ZooKeeperStore(zookeeper.hosts) as top:
        rooted.create("/inside", b"x")
        assert top.get(f"{chroot}/inside") == (b"x", 0)
        assert rooted.children("/") == ["inside"]


def test_bulk_reads_go_out_pipelined_and_reread_what_a_lost_connection_failed(
    zookeeper, chroot, monkeypatch
):
    """`get_many` without multiRead (a server before 3.6, or a multiRead that failed) sends its
    reads before waiting for any (in windows), and a read answered with a lost connection is
    read again with the blocking, retried read."""
    monkeypatch.setattr(zookeeper_bulk_reads, "BULK_READ_WINDOW", 4)
    with ZooKeeperStore(zookeeper.hosts, chroot) as store:
        store._multi_read = False
        store.create("/bulk")
        for i in range(10):
            store.create(f"/bulk/{i}", str(i).encode())
        client = store._client
        real_async, sent = client.get_async, []

        def get_async(path, *args, **kwargs):
            sent.append(path)
            result = real_async(path, *args, **kwargs)
            if sent.count("/bulk/5") == 1 and path == "/bulk/5":  # once: a connection loss
                failed = client.handler.async_result()
                failed.set_exception(ConnectionLoss())
                return failed
            return result

        client.get_async = get_async
        paths = [f"/bulk/{i}" for i in range(10)] + ["/bulk/none"]
        assert store.get_many(paths) == [(str(i).encode(), 0) for i in range(10)] + [None]
        # windows of 4 sent before any answer is awaited; the lost read again after its window
        assert sent == paths[:8] + ["/bulk/5"] + paths[8:]
        assert store.children_many(["/bulk", "/none"]) == [[str(i) for i in range(10)], None]


def test_cancelling_a_watch_does_not_scan_the_others(zookeeper, chroot, monkeypatch):
    """A broker holds a watch per partition state and cancels 10,000 when 100 topics of 100
    partitions are deleted: each cancel finds its watch directly, never comparing it with the
    others held (a list's ``remove`` did: quadratic in the watches)."""
    from odradek.metadata.zookeeper_watch import Rewatch

    with ZooKeeperStore(zookeeper.hosts, chroot) as store:
        handles = store.watch_data_many([(f"/w{i}", lambda _: None) for i in range(20)])
        compared = []
        monkeypatch.setattr(Rewatch, "__eq__", lambda self, other: compared.append(1) or self is other)
        for handle in reversed(handles):
            handle.cancel()
        assert compared == []
        assert not store._watches


def _bulk(store, n: int = 10) -> list[str]:
    store.create("/bulk")
    for i in range(n):
        store.create(f"/bulk/{i}", str(i).encode())
    for _ in range(i):
        store.set(f"/bulk/{i}", str(i).encode())  # the last one at version n - 1
    return [f"/bulk/{i}" for i in range(n)] + ["/bulk/none"]


def _recording_calls(client) -> list:
    real_call, calls = client._call, []

    def call(request, result):
        calls.append(request)
        return real_call(request, result)

    client._call = call
    return calls


def test_bulk_reads_are_multi_reads_of_a_batch_each(zookeeper, chroot, monkeypatch):
    """`get_many` asks ZooKeeper for `zookeeper_multi_read.BATCH` znodes a request (multiRead),
    under the store's chroot, each answered on its own: data and version, None where absent."""
    monkeypatch.setattr(zookeeper_multi_read, "BATCH", 4)
    with ZooKeeperStore(zookeeper.hosts, chroot) as store:
        paths = _bulk(store)
        calls = _recording_calls(store._client)
        expected = [(str(i).encode(), 0) for i in range(9)] + [(b"9", 9), None]
        assert store.get_many(paths) == expected
        assert [type(c).__name__ for c in calls] == ["MultiRead"] * 3
        assert [len(c.paths) for c in calls] == [4, 4, 3]
        assert calls[0].paths[0] == f"{chroot}/bulk/0"


def test_a_multi_read_that_fails_falls_back_to_single_reads(zookeeper, chroot):
    """A multiRead lost with the connection is read again request by request; a server that
    does not implement multiRead (before 3.6) is not asked again."""
    with ZooKeeperStore(zookeeper.hosts, chroot) as store:
        paths = _bulk(store)
        expected = [(str(i).encode(), 0) for i in range(9)] + [(b"9", 9), None]
        client = store._client
        real_call = client._call
        failures = [ConnectionLoss(), UnimplementedError()]

        def call(request, result):
            if type(request).__name__ == "MultiRead" and failures:
                result.set_exception(failures.pop(0))
                return True
            return real_call(request, result)

        client._call = call
        assert store.get_many(paths) == expected  # after a lost connection
        assert store._multi_read
        assert store.get_many(paths) == expected  # after UNIMPLEMENTED
        assert not store._multi_read
        calls = _recording_calls(client)
        assert store.get_many(paths) == expected
        assert "MultiRead" not in {type(c).__name__ for c in calls}


def test_a_path_a_multi_read_failed_is_read_again_alone(zookeeper, chroot, monkeypatch):
    """One operation of a multiRead failing otherwise than with NONODE is read again with the
    blocking, retried read, which decides."""
    with ZooKeeperStore(zookeeper.hosts, chroot) as store:
        paths = _bulk(store, 3)
        real = zookeeper_multi_read.read_many

        def one_failed(client, asked):
            found = real(client, asked)
            found[1] = ConnectionLoss()
            return found

        monkeypatch.setattr(zookeeper_multi_read, "read_many", one_failed)
        assert store.get_many(paths) == [(b"0", 0), (b"1", 0), (b"2", 2), None]
