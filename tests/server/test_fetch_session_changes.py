"""Incremental fetch sessions that read only what changed (``server/fetch_session_changes.py``):
a fetch with nothing new answers no partition, a waiting one is woken by an append to one of
its partitions, by a high watermark move and by a leadership change; a follower's quiet
partitions keep it caught up (``ReplicaManager.follower_fetched_unchanged``); and, under
hypothesis, every incremental answer carries what a full rescan with Kafka's rules
(``CachedPartition.maybeUpdateResponseData``) says it must."""

from __future__ import annotations

import threading
import uuid

from hypothesis import HealthCheck, example, given, settings, strategies as st

from odradek.protocol import codec
from odradek.protocol.generated.error_codes import ErrorCode
from odradek.records.reader import iter_batches
from odradek.replication.replica_manager import ReplicaManager
from odradek.server.fetch_session_changes import SessionChanges
from odradek.storage.clock import FakeClock
from odradek.storage.config import LogConfig
from odradek.storage.log_manager import LogManager
from tests.server.clients import unique_topic
from tests.server.test_bad_input import create_topic
from tests.server.test_fetch_replica_path import _replicated, leader, wire  # noqa: F401 (fixtures)
from tests.server.wire import WireClient, produce_body, simple_batch
from tests.storage.helpers import T0, make_batch

F = codec.module("FetchRequest")
WAIT_MS = 8000  # a waiting fetch not woken answers empty after this: the test then fails on content


def _fetch(c: WireClient, session_id: int, epoch: int, parts=(), forgotten=(), *, wait_ms: int = 0,
           min_bytes: int = 0, replica: int = -1, leader_epoch: int = -1):
    """``parts``: (topic, partition, fetch offset); ``forgotten``: (topic, [partitions])."""
    topics = {}
    for t, p, off in parts:
        ft = topics.setdefault(t, F.FetchTopic(topic=t, topic_id=uuid.UUID(int=0), partitions=[]))
        ft.partitions.append(F.FetchPartition(partition=p, fetch_offset=off, partition_max_bytes=1 << 20,
                                              current_leader_epoch=leader_epoch, log_start_offset=0))
    gone = [F.ForgottenTopic(topic=t, topic_id=uuid.UUID(int=0), partitions=ps) for t, ps in forgotten]
    body = F.MESSAGE(replica_id=replica, max_wait_ms=wait_ms, min_bytes=min_bytes, max_bytes=1 << 20,
                     session_id=session_id, session_epoch=epoch, topics=list(topics.values()),
                     forgotten_topics_data=gone)
    return c.request("Fetch", 12, body)[1]


def _answered(resp) -> dict:
    """(topic, partition) -> (error, high watermark, log start offset, values)."""
    return {(t.topic, p.partition_index):
            (p.error_code, p.high_watermark, p.log_start_offset,
             [r.value for b in iter_batches(p.records or b"") for r in b.records()])
            for t in resp.responses for p in t.partitions}


def _produce(c: WireClient, topic: str, partition: int, *values: bytes, acks: int = 1) -> None:
    _, resp = c.request("Produce", 9, produce_body(topic, partition, simple_batch(list(values)), acks=acks))
    assert resp.responses[0].partition_responses[0].error_code == ErrorCode.NONE


def _in_thread(bootstrap: str, call):
    """Run ``call(client)`` on a connection of its own; the result is in ``out`` once joined."""
    out = {}

    def run():
        c = WireClient(bootstrap, timeout=30)
        try:
            out["resp"] = call(c)
        finally:
            c.close()
    thread = threading.Thread(target=run)
    thread.start()
    return thread, out


def _sessions_waiting(leader, count: int = 1) -> None:
    """Wait until ``count`` fetch sessions have a fetch waiting on them."""
    def waiting():
        cache = leader.broker.fetch_sessions
        return sum(1 for s in cache.sessions.values()
                   if s.changes is not None and s.changes._waiter is not None) >= count
    from tests.server.clients import wait_until
    wait_until(lambda: leader.call(waiting), timeout=10)


def test_nothing_new_answers_no_partition_and_an_append_wakes_the_waiting_fetch(leader, wire):
    topic = unique_topic("changes-append")
    create_topic(wire, topic, partitions=3)
    _produce(wire, topic, 1, b"x")
    full = _fetch(wire, 0, 0, [(topic, p, 0) for p in range(3)])
    sid = full.session_id
    assert sid != 0 and _answered(full)[(topic, 1)][3] == [b"x"]
    assert _answered(_fetch(wire, sid, 1, [(topic, 1, 1)])) == {}  # caught up: nothing to say
    assert _answered(_fetch(wire, sid, 2)) == {}
    assert _answered(_fetch(wire, sid, 3, wait_ms=200, min_bytes=1)) == {}

    thread, out = _in_thread(leader.bootstrap, lambda c: _fetch(c, sid, 4, wait_ms=WAIT_MS, min_bytes=1))
    _sessions_waiting(leader)
    _produce(wire, topic, 2, b"y", b"z")
    thread.join()
    assert _answered(out["resp"]) == {(topic, 2): (0, 2, 0, [b"y", b"z"])}
    assert _answered(_fetch(wire, sid, 5, [(topic, 2, 2)])) == {}


def test_a_high_watermark_move_wakes_the_waiting_fetch(leader, wire):
    topic = _replicated(leader, wire, (1, 2))
    full = _fetch(wire, 0, 0, [(topic, 0, 0)])
    sid = full.session_id
    _produce(wire, topic, 0, b"a", b"b")  # acks=1: above the high watermark until follower 2 fetches
    assert _answered(_fetch(wire, sid, 1)) == {}  # the append changed nothing a consumer sees

    thread, out = _in_thread(leader.bootstrap, lambda c: _fetch(c, sid, 2, wait_ms=WAIT_MS, min_bytes=1))
    _sessions_waiting(leader)
    follower = _fetch(wire, 0, -1, [(topic, 0, 2)], replica=2, leader_epoch=1)  # moves the high watermark
    assert _answered(follower)[(topic, 0)][:2] == (0, 2)
    thread.join()
    assert _answered(out["resp"]) == {(topic, 0): (0, 2, 0, [b"a", b"b"])}


def test_a_leadership_change_wakes_the_waiting_fetch(leader, wire):
    topic = _replicated(leader, wire, (1, 2))
    sid = _fetch(wire, 0, 0, [(topic, 0, 0)], leader_epoch=1).session_id
    thread, out = _in_thread(leader.bootstrap, lambda c: _fetch(c, sid, 1, wait_ms=WAIT_MS, min_bytes=1))
    _sessions_waiting(leader)

    def resign():
        rm = leader.broker.replica_manager
        part = rm.get(topic, 0)
        rm.make_follower(topic, 0, part.topic_id, (1, 2), (1, 2), 2, 2, part.log.config)
    leader.call(resign)
    thread.join()
    # epoch 2 now: the consumer's epoch 1 is fenced (a consumer may read a follower: KIP-392)
    assert _answered(out["resp"])[(topic, 0)][0] == ErrorCode.FENCED_LEADER_EPOCH


def test_a_follower_session_answers_only_what_changed(leader, wire):
    topic = _replicated(leader, wire, (1, 2))
    _produce(wire, topic, 0, b"a")
    full = _fetch(wire, 0, 0, [(topic, 0, 0)], replica=2, leader_epoch=1)
    sid = full.session_id
    assert _answered(full)[(topic, 0)][3] == [b"a"]
    assert _answered(_fetch(wire, sid, 1, [(topic, 0, 1)], replica=2, leader_epoch=1)) == {
        (topic, 0): (0, 1, 0, [])}  # the high watermark this fetch moved
    assert _answered(_fetch(wire, sid, 2, replica=2)) == {}
    thread, out = _in_thread(leader.bootstrap, lambda c: _fetch(c, sid, 3, wait_ms=WAIT_MS, min_bytes=1, replica=2))
    _sessions_waiting(leader)
    _produce(wire, topic, 0, b"b")
    thread.join()
    assert _answered(out["resp"]) == {(topic, 0): (0, 1, 0, [b"b"])}


# --- a follower's quiet partitions ------------------------------------------------------------------


def test_a_quiet_partition_keeps_its_follower_caught_up(tmp_path):
    """An append after a quiet spell longer than replica.lag.time.max.ms: the follower fetched
    all along through its session (without the partition being read), so the ISR check must
    not drop it before its next fetch comes."""
    clock = FakeClock(T0)
    manager = LogManager([str(tmp_path)], LogConfig(), clock)
    manager.startup()
    rm = ReplicaManager(1, manager, clock, replica_lag_time_max_ms=10_000)
    part = rm.make_leader("t", 0, uuid.uuid4(), (1, 2), (1, 2), 0, LogConfig())
    rm.append(part, memoryview(bytearray(make_batch(0, 2))))
    part.update_follower_fetch_state(2, 2, 0, clock.milliseconds())  # caught up, at the log end
    changes = SessionChanges(rm, lambda key: key, replica_id=2)
    changes.add(("t", 0), pending=False)
    for _ in range(30):  # a follower fetching every second, the partition never read
        clock.advance(1000)
        assert changes.take(clock.milliseconds()) == []
    rm.append(part, memoryview(bytearray(make_batch(2, 1))))  # notify: pending again
    assert changes.take_more() == [("t", 0)]
    assert part.maybe_shrink_isr(clock.milliseconds()) is None
    assert rm.maybe_shrink_isrs(clock.milliseconds()) == []
    clock.advance(11_000)  # and now truly silent: it goes
    assert part.maybe_shrink_isr(clock.milliseconds()) is not None
    changes.close()
    assert rm._watchers == {}
    manager.shutdown()


def test_a_stopped_followers_old_session_fetch_does_not_hold_back_the_high_watermark(tmp_path):
    """Controlled shutdown of a follower: the controller takes it out of the ISR (a new leader
    epoch, the leader re-elected: ``FollowerState.reset`` says it never caught up), and it
    fetches no more. Its session stays in the cache, the partition settled in it; the epoch
    change notifies it. That notify must not credit the follower with its session's last fetch,
    which came before the reset: a follower "caught up" within replica.lag.time.max.ms holds the
    high watermark at its log end (``isr.high_watermark_bound``), so acks=all produces to the
    remaining ISR would never be answered."""
    clock = FakeClock(T0)
    manager = LogManager([str(tmp_path)], LogConfig(), clock)
    manager.startup()
    rm = ReplicaManager(1, manager, clock, replica_lag_time_max_ms=10_000)
    tid = uuid.uuid4()
    part = rm.make_leader("t", 0, tid, (1, 2, 3), (1, 2, 3), 0, LogConfig())
    rm.append(part, memoryview(bytearray(make_batch(0, 2))))
    for follower in (2, 3):
        part.update_follower_fetch_state(follower, 2, 0, clock.milliseconds())
    stopped = SessionChanges(rm, lambda key: key, replica_id=3)  # the follower shutting down
    stopped.add(("t", 0), pending=False)
    assert stopped.take(clock.milliseconds()) == []  # its last fetch: nothing new
    clock.advance(1000)
    rm.make_leader("t", 0, tid, (1, 2, 3), (1, 2), 1, LogConfig())  # out of the ISR, epoch 1
    rm.append(part, memoryview(bytearray(make_batch(2, 1))))
    clock.advance(100)
    update = part.update_follower_fetch_state(2, 3, 0, clock.milliseconds())  # the ISR has it all
    assert update.high_watermark_moved and part.high_watermark == 3
    stopped.close()
    manager.shutdown()


def test_a_high_watermark_held_by_a_follower_that_stopped_outside_the_isr_moves_when_its_time_is_up(tmp_path):
    """A follower out of the ISR that caught up in this leadership holds the high watermark at
    its log end while it counts as caught up (``isr.high_watermark_bound``). If it then stops
    (a controlled shutdown after its last fetch), its replica.lag.time.max.ms runs out with no
    fetch to notice: the ISR's sessions read nothing unchanged. The periodic ISR check
    (``maybe_shrink_isrs``) must move the high watermark then and wake the acks=all waits."""
    clock = FakeClock(T0)
    manager = LogManager([str(tmp_path)], LogConfig(), clock)
    manager.startup()
    rm = ReplicaManager(1, manager, clock, replica_lag_time_max_ms=3_000)
    tid = uuid.uuid4()
    part = rm.make_leader("t", 0, tid, (1, 2, 3), (1, 2), 0, LogConfig())
    rm.append(part, memoryview(bytearray(make_batch(0, 2))))
    part.update_follower_fetch_state(2, 2, 0, clock.milliseconds())
    part.update_follower_fetch_state(3, 2, 0, clock.milliseconds())  # caught up, not in the ISR
    assert part.pending_isr is not None
    part.abandon_isr_change()  # the controller refused it: INELIGIBLE_REPLICA, it is shutting down
    rm.append(part, memoryview(bytearray(make_batch(2, 1))))
    clock.advance(100)
    part.update_follower_fetch_state(2, 3, 0, clock.milliseconds())  # the ISR has it all
    assert part.high_watermark == 2  # follower 3, caught up a moment ago, holds it
    woken = []
    rm.watch(("t", 0), type("Watcher", (), {"partition_changed": lambda self, key: woken.append(key)})())
    clock.advance(3_500)  # follower 3 fetched no more
    assert rm.maybe_shrink_isrs(clock.milliseconds()) == []
    assert part.high_watermark == 3 and woken == [("t", 0)]
    manager.shutdown()


# --- hypothesis: the changed set against a full rescan ----------------------------------------------

_OPS = st.lists(st.one_of(
    st.tuples(st.just("produce"), st.integers(0, 2), st.integers(1, 3)),
    st.tuples(st.just("advance"), st.integers(0, 2)),  # the consumer moves to the high watermark
    st.tuples(st.just("rewind"), st.integers(0, 2)),  # ... or back to the log start
    st.tuples(st.just("delete_records"), st.integers(0, 2)),
    st.tuples(st.just("forget"), st.integers(0, 2)),
    st.tuples(st.just("fetch"),),
), min_size=1, max_size=12)


class _Model:
    """Kafka's rules over a full rescan: what an incremental answer must carry."""

    def __init__(self, topic: str, offsets: dict, answered: dict):
        self.topic = topic
        self.offsets = dict(offsets)  # partition -> fetch offset, the session's partitions
        self.sent = {p: (hw, start) for (_, p), (_, hw, start, _) in answered.items()}

    def expected(self, rescan: dict) -> dict:
        out = {}
        for p in self.offsets:
            error, hw, start, values = rescan[(self.topic, p)]
            if error or values or self.sent.get(p) != (hw, start):
                out[(self.topic, p)] = rescan[(self.topic, p)]
        return out

    def sent_now(self, answered: dict) -> None:
        for (_, p), (error, hw, start, _) in answered.items():
            self.sent[p] = (-1, -1) if error else (hw, start)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ops=_OPS)
@example(ops=[("advance", 0), ("fetch",), ("delete_records", 0), ("fetch",)])  # only the log start moves
@example(ops=[("advance", 1), ("fetch",), ("produce", 1, 2), ("fetch",), ("advance", 1), ("forget", 0)])
def test_incremental_answers_match_a_full_rescan(leader, wire, ops):
    topic = unique_topic("changes-model")
    create_topic(wire, topic, partitions=3)
    _produce(wire, topic, 0, b"seed")
    offsets = {p: 0 for p in range(3)}
    full = _fetch(wire, 0, 0, [(topic, p, off) for p, off in offsets.items()])
    sid, epoch = full.session_id, 1
    model = _Model(topic, offsets, _answered(full))
    changed = {}
    for op in ops + [("fetch",)]:
        kind = op[0]
        if kind == "produce":
            _produce(wire, topic, op[1], *[b"v"] * op[2])
        elif kind in ("advance", "rewind") and op[1] in model.offsets:
            rescan = _answered(_fetch(wire, 0, -1, [(topic, op[1], 0)]))
            hw, start = rescan[(topic, op[1])][1:3]
            model.offsets[op[1]] = changed[op[1]] = hw if kind == "advance" else start
        elif kind == "delete_records":
            _delete_records(wire, topic, op[1])
        elif kind == "forget" and op[1] in model.offsets and len(model.offsets) > 1:
            del model.offsets[op[1]]
            model.sent.pop(op[1], None)
            changed.pop(op[1], None)
            epoch = _check_incremental(wire, model, sid, epoch, changed, [(topic, [op[1]])])
            changed = {}
        elif kind == "fetch":
            epoch = _check_incremental(wire, model, sid, epoch, changed, [])
            changed = {}
    _fetch(wire, sid, -1)  # close the session


def _check_incremental(wire: WireClient, model: _Model, sid: int, epoch: int, changed: dict, forgotten) -> int:
    """One incremental fetch (the ``changed`` fetch offsets, the ``forgotten`` partitions),
    checked against a sessionless rescan of the session's partitions; the next epoch."""
    topic = model.topic
    rescan = _answered(_fetch(wire, 0, -1, [(topic, p, o) for p, o in model.offsets.items()]))
    expected = model.expected(rescan)
    resp = _fetch(wire, sid, epoch, [(topic, p, o) for p, o in changed.items()], forgotten)
    assert resp.error_code == 0 and resp.session_id == sid
    assert _answered(resp) == expected
    model.sent_now(expected)
    return epoch + 1


def _delete_records(wire: WireClient, topic: str, partition: int) -> None:
    m = codec.module("DeleteRecordsRequest")
    body = m.MESSAGE(topics=[m.DeleteRecordsTopic(name=topic, partitions=[
        m.DeleteRecordsPartition(partition_index=partition, offset=-1)])], timeout_ms=5000)
    _, resp = wire.request("DeleteRecords", 2, body)
    assert resp.topics[0].partitions[0].error_code == ErrorCode.NONE
