"""``Partition.append_records_as_follower``: the leader's batches copied verbatim, with their
leader epochs and their producers, and refused when damaged or out of order."""

import uuid

import pytest

from odradek.records import batch as rb
from odradek.records.errors import CorruptRecordError
from odradek.replication.produce_validation import ProduceError
from odradek.replication.replica_manager import ReplicaManager
from odradek.storage.clock import FakeClock
from odradek.storage.config import LogConfig
from odradek.storage.errors import InvalidAppendOffsetError
from odradek.storage.log_manager import LogManager
from tests.storage.helpers import T0, make_batch

TOPIC_ID = uuid.uuid4()


def _replicas(path, broker_id: int) -> ReplicaManager:
    clock = FakeClock(T0)
    manager = LogManager([str(path)], LogConfig(), clock)
    manager.startup()
    return ReplicaManager(broker_id, manager, clock)


def _log_bytes(part) -> bytes:
    region = part.log.read(part.log_start_offset, 1 << 24)
    return bytes(region.read()) if len(region) else b""


def _produce(replicas, part, count: int, **kw):
    return replicas.append(part, memoryview(bytearray(make_batch(0, count, **kw))))


@pytest.fixture
def pair(tmp_path):
    """A leader (broker 1) with records in epochs 0 and 3, some of an idempotent producer, and a
    follower (broker 2) hosting the same partition, empty."""
    leader_rm = _replicas(tmp_path / "leader", 1)
    leader = leader_rm.make_leader("t", 0, TOPIC_ID, (1, 2), (1,), 0, LogConfig())
    _produce(leader_rm, leader, 3)
    _produce(leader_rm, leader, 2, producer_id=7, base_sequence=0)
    leader_rm.make_leader("t", 0, TOPIC_ID, (1, 2), (1,), 3, LogConfig())
    _produce(leader_rm, leader, 4, producer_id=7, base_sequence=2)
    follower_rm = _replicas(tmp_path / "follower", 2)
    follower = follower_rm.hosted_partition("t", 0, TOPIC_ID, LogConfig())
    follower.leader_id, follower.leader_epoch = 1, 3
    yield leader_rm, leader, follower_rm, follower
    leader_rm.log_manager.shutdown()
    follower_rm.log_manager.shutdown()


def test_leader_batches_are_appended_verbatim_with_epochs_and_producers(pair):
    _, leader, _, follower = pair
    data = _log_bytes(leader)
    info = follower.append_records_as_follower(memoryview(data))
    assert (info.first_offset, info.last_offset) == (0, 8)
    assert follower.log_end_offset == leader.log_end_offset == 9
    assert _log_bytes(follower) == data  # byte for byte: offsets, epochs, CRCs are the leader's
    assert follower.log.leader_epoch_cache.entries == leader.log.leader_epoch_cache.entries == ((0, 0), (3, 5))
    entry = follower.producer_state.entries()[7]
    assert (entry.last_seq, entry.last_offset) == (5, 8)
    assert follower.high_watermark == 0  # the leader tells it; the append alone does not move it


def test_a_follower_that_becomes_leader_refuses_the_old_leaders_duplicates(pair):
    """Idempotence survives failover: the producer state came with the batches."""
    leader_rm, leader, follower_rm, follower = pair
    follower.append_records_as_follower(memoryview(_log_bytes(leader)))
    follower_rm.make_leader("t", 0, TOPIC_ID, (1, 2), (2,), 4, LogConfig())
    retry = _produce(follower_rm, follower, 4, producer_id=7, base_sequence=2)
    assert (retry.base_offset, retry.last_offset) == (5, 8)  # the duplicate's first offsets
    assert follower.log_end_offset == 9
    with pytest.raises(ProduceError):  # a gap in the sequence
        _produce(follower_rm, follower, 1, producer_id=7, base_sequence=9)


def test_follower_high_watermark_is_the_leaders_within_its_own_log(pair):
    _, leader, _, follower = pair
    data = _log_bytes(leader)
    first_batch = rb.batch_size_at(data, 0)
    follower.append_records_as_follower(memoryview(data)[:first_batch])
    assert follower.update_follower_high_watermark(9) == 3  # its own log ends at 3
    follower.append_records_as_follower(memoryview(data)[first_batch:])
    assert follower.update_follower_high_watermark(9) == 9
    assert follower.update_follower_high_watermark(6) == 6  # a new leader's may be lower


def test_a_cut_last_batch_waits_for_the_next_fetch(pair):
    _, leader, _, follower = pair
    data = _log_bytes(leader)
    info = follower.append_records_as_follower(memoryview(data)[:-5])
    assert info.last_offset == 4 and follower.log_end_offset == 5
    assert follower.append_records_as_follower(memoryview(data)[:20]) is None  # no whole batch
    assert follower.log_end_offset == 5


def test_a_damaged_batch_is_refused_and_nothing_is_appended(pair):
    _, leader, _, follower = pair
    data = bytearray(_log_bytes(leader))
    data[-1] ^= 0xFF  # inside the last batch's records: its CRC no longer matches
    with pytest.raises(CorruptRecordError):
        follower.append_records_as_follower(memoryview(data))
    assert follower.log_end_offset == 0 and len(follower.producer_state) == 0
    assert follower.log.leader_epoch_cache.entries == ()


def test_batches_below_the_log_end_are_refused(pair):
    _, leader, _, follower = pair
    data = _log_bytes(leader)
    follower.append_records_as_follower(memoryview(data))
    with pytest.raises(InvalidAppendOffsetError):
        follower.append_records_as_follower(memoryview(data))
    assert follower.log_end_offset == 9 and _log_bytes(follower) == data


def test_offsets_may_jump_forward_as_in_a_compacted_log(pair):
    _, _, _, follower = pair
    first, later = bytearray(make_batch(0, 2)), bytearray(make_batch(10, 2))
    for batch in (first, later):
        rb.set_partition_leader_epoch(batch, 0, 3)  # outside the CRC
    follower.append_records_as_follower(memoryview(bytes(first) + bytes(later)))
    assert follower.log_end_offset == 12
    assert follower.log.leader_epoch_cache.entries == ((3, 0),)
