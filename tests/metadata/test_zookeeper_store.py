"""ZooKeeperStore against a real ZooKeeper server: the shared contract plus session loss.

Needs Debian's ``zookeeper`` package (scripts/setup.sh installs it). Without it the tests are
skipped on a developer's machine, with the reason, and fail under CI (``CI=true``), so a
missing install step cannot turn them into silent no-ops there.
"""

from __future__ import annotations

import pytest
from kazoo.client import KazooClient

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
    """Expire the store's session the way ZooKeeper's own tests do: a second client joins
    it with the same id and password, then closes it."""
    session_id, password = store._client.client_id
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


def test_unreachable_server_is_store_unavailable():
    with pytest.raises(StoreUnavailableError):
        ZooKeeperStore("127.0.0.1:1", connect_timeout=0.5)


def test_chroot_keeps_stores_apart(zookeeper, chroot):
    with ZooKeeperStore(zookeeper.hosts, chroot) as rooted, ZooKeeperStore(zookeeper.hosts) as top:
        rooted.create("/inside", b"x")
        assert top.get(f"{chroot}/inside") == (b"x", 0)
        assert rooted.children("/") == ["inside"]
