"""The partition side of transactions, below the wire: the LSO of a leader, markers appended
as a coordinator, a follower that replays the leader's log knowing the open and the aborted
transactions (so it can lead), and a restart without a snapshot that rebuilds both, the
``.txnindex`` included."""

from __future__ import annotations

import os
import uuid
from contextlib import contextmanager

import pytest

from odradek.protocol.generated.error_codes import ErrorCode
from odradek.records.builder import BatchBuilder, BatchSpec
from odradek.replication.produce_validation import ProduceError
from odradek.replication.producer_snapshot import PRODUCER_SNAPSHOT
from odradek.replication.replica_manager import ReplicaManager
from odradek.records.reader import iter_batches
from odradek.replication import transactions
from odradek.replication.transactions import (
    aborted_transactions, fetched_aborted_transactions, fetched_upper_bound, write_marker,
)
from odradek.storage.clock import FakeClock
from odradek.storage.config import LogConfig
from odradek.storage.log_manager import LogManager
from tests.storage.helpers import T0, append, open_log

TOPIC_ID = uuid.uuid4()
CONFIG = LogConfig(segment_bytes=500)


def _replicas(path, broker_id: int) -> ReplicaManager:
    clock = FakeClock(T0)
    manager = LogManager([str(path)], CONFIG, clock)
    manager.startup()
    return ReplicaManager(broker_id, manager, clock)


def txn_batch(pid: int, seq: int, count: int = 2, transactional: bool = True) -> memoryview:
    builder = BatchBuilder(BatchSpec(producer_id=pid, producer_epoch=0, base_sequence=seq,
                                     is_transactional=transactional))
    for i in range(count):
        builder.append(T0, b"k", b"p%d-%d" % (pid, seq + i))
    return memoryview(bytearray(builder.build()))


def _log_bytes(part) -> bytes:
    region = part.log.read(part.log_start_offset, 1 << 24)
    return bytes(region.read()) if len(region) else b""


def _story(rm, part) -> None:
    """pid 1: 0-1, aborted at 4; pid 2: 2-3, committed at 5; pid 3: 6-7, left open."""
    rm.append(part, txn_batch(1, 0))
    rm.append(part, txn_batch(2, 0))
    write_marker(part, 1, 0, 0, False, T0)
    write_marker(part, 2, 0, 0, True, T0)
    rm.append(part, txn_batch(3, 0))


@pytest.fixture
def leader(tmp_path):
    rm = _replicas(tmp_path / "leader", 1)
    part = rm.make_leader("t", 0, TOPIC_ID, (1,), (1,), 0, CONFIG)
    yield rm, part
    rm.log_manager.shutdown()


def test_the_lso_and_aborted_transactions_of_a_leader(leader):
    rm, part = leader
    _story(rm, part)
    assert (part.high_watermark, part.last_stable_offset()) == (8, 6)
    assert [(t.producer_id, t.first_offset, t.last_offset) for t in aborted_transactions(part.log, 0, 6)] == [
        (1, 0, 4)]
    assert aborted_transactions(part.log, 5, 6) == []
    with pytest.raises(ProduceError) as e:
        rm.append(part, txn_batch(3, 2, transactional=False))
    assert e.value.error == ErrorCode.INVALID_TXN_STATE


def test_a_follower_replaying_the_log_knows_open_and_aborted_transactions(leader, tmp_path):
    rm, part = leader
    _story(rm, part)
    frm = _replicas(tmp_path / "follower", 2)
    try:
        follower = frm.hosted_partition("t", 0, TOPIC_ID, CONFIG)
        follower.leader_id, follower.leader_epoch = 1, 0
        follower.append_records_as_follower(memoryview(_log_bytes(part)))
        follower.update_follower_high_watermark(part.high_watermark)
        assert dict(follower.producer_state.ongoing_transactions()) == {3: 6}
        assert follower.last_stable_offset() == 6
        assert [(t.producer_id, t.first_offset) for t in aborted_transactions(follower.log, 0, 6)] == [(1, 0)]
        # Made leader, it ends the open transaction like the old leader would have.
        frm.make_leader("t", 0, TOPIC_ID, (2,), (2,), 1, CONFIG)
        write_marker(follower, 3, 0, 0, False, T0)
        assert follower.last_stable_offset() == 9
        assert [t.producer_id for t in aborted_transactions(follower.log, 0, 9)] == [1, 3]
    finally:
        frm.log_manager.shutdown()


@contextmanager
def _story_restarted(tmp_path, while_stopped=lambda directory: None):
    """A leader that lived ``_story``, stopped cleanly, then (after ``while_stopped`` of its
    partition's directory) started and made leader again at epoch 1: yields that partition."""
    rm = _replicas(tmp_path / "b", 1)
    part = rm.make_leader("t", 0, TOPIC_ID, (1,), (1,), 0, CONFIG)
    _story(rm, part)
    directory = part.log.directory
    rm.shutdown()
    rm.log_manager.shutdown()
    while_stopped(directory)
    rm = _replicas(tmp_path / "b", 1)
    try:
        yield rm.make_leader("t", 0, TOPIC_ID, (1,), (1,), 1, CONFIG)
    finally:
        rm.log_manager.shutdown()


def test_restart_without_a_snapshot_rebuilds_state_and_index(tmp_path):
    def lose_snapshot_and_index(directory) -> None:
        os.unlink(os.path.join(directory, PRODUCER_SNAPSHOT))
        for name in os.listdir(directory):
            if name.endswith(".txnindex"):
                os.unlink(os.path.join(directory, name))

    with _story_restarted(tmp_path, lose_snapshot_and_index) as part:
        assert dict(part.producer_state.ongoing_transactions()) == {3: 6}
        assert part.last_stable_offset() == 6
        assert [(t.producer_id, t.first_offset, t.last_stable_offset) for t in aborted_transactions(part.log, 0, 6)] == [
            (1, 0, 2)]


def test_a_snapshot_carries_the_open_transaction_across_a_clean_restart(tmp_path):
    with _story_restarted(tmp_path) as part:
        assert part.producer_state.map_end_offset == part.log_end_offset  # nothing replayed
        assert part.last_stable_offset() == 6
        assert part.producer_state.check_marker(1, 0, -1).error == ErrorCode.TRANSACTION_COORDINATOR_FENCED


@pytest.mark.parametrize("max_bytes", [1, 300, 1000, 1 << 20])
def test_fetched_upper_bound_is_the_offset_after_the_last_batch_read(tmp_path, max_bytes):
    log = open_log(tmp_path, LogConfig(index_interval_bytes=100, segment_bytes=1 << 20))
    for _ in range(20):
        append(log, 3)
    region = log.read(7, max_bytes)
    walked = [b.next_offset for b in iter_batches(region.read())]
    assert fetched_upper_bound(log, region, 10**6) == walked[-1]
    assert fetched_upper_bound(log, region, 10) == min(walked[-1], 10)
    log.close()


@pytest.mark.parametrize("fetch_offset,max_bytes", [(0, 1), (0, 1 << 20), (2, 1), (5, 1 << 20), (6, 1 << 20)])
def test_fetched_aborted_transactions_are_those_up_to_the_fetched_bound(leader, fetch_offset, max_bytes):
    rm, part = leader
    _story(rm, part)
    limit = part.last_stable_offset()
    region = part.log.read(fetch_offset, max_bytes, max_offset=limit, min_one=True)
    expected = aborted_transactions(part.log, fetch_offset, fetched_upper_bound(part.log, region, limit))
    assert fetched_aborted_transactions(part.log, fetch_offset, region, limit) == expected


def test_a_log_without_aborted_transactions_is_answered_without_walking_the_region(tmp_path, monkeypatch):
    # read_committed fetches of a non-transactional topic: no pread and walk of batch headers
    log = open_log(tmp_path, LogConfig(index_interval_bytes=100, segment_bytes=1 << 20))
    for _ in range(5):
        append(log, 3)
    region = log.read(0, 1 << 20)

    def walked(*args):
        raise AssertionError("the region's batch headers were walked")

    monkeypatch.setattr(transactions, "fetched_upper_bound", walked)
    assert fetched_aborted_transactions(log, 0, region, 15) == []
    log.close()
