"""``ReplicaManager.truncate_to`` rebuilds the producer state from a snapshot and the log
(``replication/producer_state_reload.py``), as Kafka's ``UnifiedLog.truncateTo`` does: a
deposed leader that cuts its tail keeps the open transactions, epochs and sequences of what
stays, and no snapshot file above the cut survives to be loaded by a later start."""

from __future__ import annotations

import os
import uuid

import pytest

from odradek.coordinator.producer_state import ProducerStateManager
from odradek.protocol.generated.error_codes import ErrorCode
from odradek.records.builder import BatchBuilder, BatchSpec
from odradek.replication.produce_validation import ProduceError
from odradek.replication.producer_snapshot import PRODUCER_SNAPSHOT
from odradek.replication.replica_manager import ReplicaManager
from odradek.replication.transactions import write_marker
from odradek.storage.clock import FakeClock
from odradek.storage.config import LogConfig
from odradek.storage.log_manager import LogManager
from tests.storage.helpers import T0

TOPIC_ID = uuid.uuid4()
CONFIG = LogConfig(segment_bytes=1000)  # several segments: the replay crosses segments


def _replicas(path) -> ReplicaManager:
    clock = FakeClock(T0)
    manager = LogManager([str(path)], CONFIG, clock)
    manager.startup()
    return ReplicaManager(1, manager, clock)


def _batch(pid: int, seq: int, epoch: int = 0, transactional: bool = False) -> memoryview:
    builder = BatchBuilder(BatchSpec(producer_id=pid, producer_epoch=epoch, base_sequence=seq,
                                     is_transactional=transactional))
    builder.append(T0, b"k", b"p%d-%d" % (pid, seq))
    return memoryview(bytearray(builder.build()))


def _produce(rm, part, pid: int, seq: int, epoch: int = 0, transactional: bool = False):
    return rm.append(part, _batch(pid, seq, epoch, transactional))


@pytest.fixture
def leader(tmp_path):
    rm = _replicas(tmp_path / "b")
    part = rm.make_leader("t", 0, TOPIC_ID, (1,), (1,), 0, CONFIG)
    yield rm, part
    rm.log_manager.shutdown()


def _snapshot_path(part) -> str:
    return os.path.join(part.log.directory, PRODUCER_SNAPSHOT)


def _write_snapshot(part) -> None:
    with open(_snapshot_path(part), "wb") as f:
        f.write(part.producer_state.snapshot())


def test_an_open_transaction_keeps_the_last_stable_offset_after_its_tail_is_cut(leader):
    rm, part = leader
    for seq in range(6):  # one transaction, offsets 0-5
        _produce(rm, part, 1, seq, transactional=True)
    assert (part.high_watermark, part.last_stable_offset()) == (6, 0)
    rm.make_follower("t", 0, TOPIC_ID, (1, 2), (1, 2), 2, 1, CONFIG)
    assert rm.truncate_to(part, 1)
    assert part.log_end_offset == 1
    assert dict(part.producer_state.ongoing_transactions()) == {1: 0}
    assert part.last_stable_offset() == 0  # read_committed consumers still stop at 0
    assert part.producer_state.cached_first_unstable_offset == 0  # the cleaner's bound too
    rm.make_leader("t", 0, TOPIC_ID, (1,), (1,), 3, CONFIG)
    with pytest.raises(ProduceError) as e:
        _produce(rm, part, 1, 1)
    assert e.value.error == ErrorCode.INVALID_TXN_STATE
    write_marker(part, 1, 0, 0, True, T0)
    assert part.last_stable_offset() == part.high_watermark == 2


def test_a_producer_whose_cached_batches_were_all_cut_keeps_its_epoch_and_sequence(leader):
    rm, part = leader
    for seq in range(3):  # epoch 2, offsets 0-2: replicated
        _produce(rm, part, 7, seq, epoch=2)
    for seq in range(3, 10):  # offsets 3-9, appended alone: the cached batches are seq 5-9
        _produce(rm, part, 7, seq, epoch=2)
    rm.make_follower("t", 0, TOPIC_ID, (1, 2), (1, 2), 2, 1, CONFIG)
    assert rm.truncate_to(part, 3)
    rm.make_leader("t", 0, TOPIC_ID, (1,), (1,), 2, CONFIG)
    with pytest.raises(ProduceError) as gap:
        _produce(rm, part, 7, 5, epoch=2)
    assert gap.value.error == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
    with pytest.raises(ProduceError) as zombie:
        _produce(rm, part, 7, 3, epoch=1)
    assert zombie.value.error == ErrorCode.INVALID_PRODUCER_EPOCH
    assert _produce(rm, part, 7, 2, epoch=2).base_offset == 2  # a duplicate, its offset
    assert _produce(rm, part, 7, 3, epoch=2).base_offset == 3  # the retry of a cut batch


def test_a_snapshot_file_above_the_cut_is_deleted_and_one_below_kept(leader):
    rm, part = leader
    for seq in range(4):
        _produce(rm, part, 7, seq)
    _write_snapshot(part)  # at 4
    for seq in range(4, 8):
        _produce(rm, part, 7, seq)
    assert rm.truncate_to(part, 6)
    assert ProducerStateManager.load(open(_snapshot_path(part), "rb").read()).map_end_offset == 4
    assert rm.truncate_to(part, 3)
    assert not os.path.exists(_snapshot_path(part))
    assert part.producer_state.entry(7).last_seq == 2


def test_a_start_after_a_cut_and_regrowth_does_not_load_the_old_snapshot(tmp_path):
    rm = _replicas(tmp_path / "b")
    part = rm.make_leader("t", 0, TOPIC_ID, (1,), (1,), 0, CONFIG)
    for seq in range(6):  # producer 7, offsets 0-5
        _produce(rm, part, 7, seq)
    _write_snapshot(part)  # at 6, as a clean stop writes it
    assert rm.truncate_to(part, 2)
    rm.make_leader("t", 0, TOPIC_ID, (1,), (1,), 1, CONFIG)
    for seq in range(6):  # producer 8, offsets 2-7: the log grows past 6 again
        _produce(rm, part, 8, seq)
    rm.log_manager.shutdown()  # a crash: no new snapshot
    rm = _replicas(tmp_path / "b")
    try:
        part = rm.make_leader("t", 0, TOPIC_ID, (1,), (1,), 2, CONFIG)
        assert part.producer_state.entry(7).last_seq == 1
        assert part.producer_state.entry(8).last_seq == 5
    finally:
        rm.log_manager.shutdown()


def test_a_full_truncation_forgets_every_producer_and_the_snapshot(leader):
    rm, part = leader
    for seq in range(3):
        _produce(rm, part, 7, seq, transactional=True)
    _write_snapshot(part)
    rm.make_follower("t", 0, TOPIC_ID, (1, 2), (1, 2), 2, 1, CONFIG)
    rm.truncate_fully(part, 10)
    assert len(part.producer_state) == 0 and part.producer_state.map_end_offset == 10
    assert part.last_stable_offset() == 10
    assert not os.path.exists(_snapshot_path(part))


def test_a_start_deletes_a_snapshot_above_the_log_end(tmp_path):
    """A snapshot beyond the log a start finds (recovery cut an unflushed tail) is not loaded,
    and deleted: once the log grew past its offset again it would look valid."""
    rm = _replicas(tmp_path / "b")
    part = rm.make_leader("t", 0, TOPIC_ID, (1,), (1,), 0, CONFIG)
    for seq in range(6):
        _produce(rm, part, 7, seq)
    _write_snapshot(part)  # at 6
    rm.log_manager.truncate_to("t", 0, 2)  # the log alone, as recovery would cut it
    rm.log_manager.shutdown()
    rm = _replicas(tmp_path / "b")
    try:
        part = rm.make_leader("t", 0, TOPIC_ID, (1,), (1,), 1, CONFIG)
        assert part.producer_state.entry(7).last_seq == 1
        assert not os.path.exists(_snapshot_path(part))
    finally:
        rm.log_manager.shutdown()
