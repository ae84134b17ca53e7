"""The async edge with odradek's InMemoryPersister: initialization, write then answer, fencing."""

from __future__ import annotations

import asyncio

import pytest

from odradek.coordinator.group.timer_queue import TimerQueue
from odradek.coordinator.share.memory_persister import InMemoryPersister
from odradek.coordinator.share.persister import PersisterStateBatch
from odradek.protocol.generated.error_codes import ErrorCode
from odradek.server.share import share_partition_io as io
from odradek.server.share.auto_offset_reset import parse_duration_ms, reset_start_offset
from odradek.server.share.record_state import RecordState, SharePartitionState
from odradek.server.share.share_partition import SharePartition
from odradek.server.share.share_types import AcquiredRecords, SharePartitionConfig
from odradek.storage.clock import FakeClock
from tests.server.share.harness import TOPIC_ID, ack, log

A, R, ACK, ARC = (RecordState.AVAILABLE, RecordState.ACQUIRED, RecordState.ACKNOWLEDGED,
                  RecordState.ARCHIVED)


def partition(leader_epoch: int = 0, reset: str = "latest") -> SharePartition:
    return SharePartition("g", TOPIC_ID, 0, leader_epoch=leader_epoch,
                          config=SharePartitionConfig(auto_offset_reset=reset),
                          clock=FakeClock(), timers=TimerQueue())


def run(coro):
    return asyncio.run(coro)


def test_initialization_from_persisted_state():
    persister = InMemoryPersister()
    run(persister.initialize_state("g", TOPIC_ID, 0, 3, 10))
    run(persister.write_state("g", TOPIC_ID, 0, 3, 0, 10, [
        PersisterStateBatch(10, 11, 2, 1), PersisterStateBatch(12, 12, 0, 2),
        PersisterStateBatch(15, 16, 4, 5), PersisterStateBatch(17, 17, 1, 1)]))
    sp = partition()
    assert run(io.initialize(sp, persister, log_start_offset=0, high_watermark=100)) is ErrorCode.NONE
    sp.check()
    assert sp.state_epoch == 3 and sp.start_offset == 12 and sp.end_offset == 17
    assert [(sp.state_at(o).state, sp.state_at(o).delivery_count) for o in range(12, 18)] == \
        [(A, 2), (A, 0), (A, 0), (ARC, 5), (ARC, 5), (A, 1)]
    # Acknowledged stay acknowledged; the rest is delivered again, counting on.
    assert sp.acquire("m", log(10, 20), 100) == [
        AcquiredRecords(12, 12, 3), AcquiredRecords(13, 14, 1), AcquiredRecords(17, 17, 2),
        AcquiredRecords(18, 20, 1)]


@pytest.mark.parametrize("reset, expected", [("latest", 40), ("earliest", 5),
                                             ("by_duration:PT1M", 33), ("by_duration:P1D", 5),
                                             ("by_duration:PT0S", 40)])
def test_auto_offset_reset_when_never_initialized(reset, expected):
    sp = partition(reset=reset)
    now = sp._clock.milliseconds()

    def lookup(ts):  # ListOffsets by timestamp: records from 5 on, 33 written a minute ago
        return None if ts >= now else 33 if ts == now - 60_000 else 5
    assert run(io.initialize(sp, InMemoryPersister(), log_start_offset=5, high_watermark=40,
                             offset_for_timestamp=lookup)) is ErrorCode.NONE
    assert sp.start_offset == expected and sp.next_fetch_offset() == expected


def test_duration_parsing():
    assert parse_duration_ms("PT1H30M") == 5_400_000
    assert parse_duration_ms("P1DT0.5S") == 86_400_500
    for bad in ("P", "PT", "1H", "P1H", "PT-1S"):
        with pytest.raises(ValueError):
            parse_duration_ms(bad)
    with pytest.raises(ValueError):
        reset_start_offset("none", log_start_offset=0, high_watermark=0, now_ms=0)


def test_acknowledgement_answered_after_the_write_and_replayed_by_a_new_leader():
    persister = InMemoryPersister()
    sp = partition()
    run(io.initialize(sp, persister, log_start_offset=0, high_watermark=0))
    sp.acquire("m1", log(0, 9, size=5), 100)
    assert run(io.acknowledge(sp, persister, "m1", [ack(0, 2, 1), ack(3, 3, 3)])) is ErrorCode.NONE
    assert run(io.release_acquired_records(sp, persister, "m1")) is ErrorCode.NONE
    stored = next(iter(persister.states.values()))
    # The release's write carried the start offset the acknowledgement moved.
    assert stored.start_offset == 4
    assert [(b.first_offset, b.last_offset, b.delivery_state, b.delivery_count)
            for b in stored.batches] == [(4, 9, 0, 1)]
    # A new leader (epoch 1) sees the same: nothing acknowledged comes back.
    sp2 = partition(leader_epoch=1)
    run(io.initialize(sp2, persister, log_start_offset=0, high_watermark=10))
    assert sp2.start_offset == 4
    assert sp2.acquire("m2", log(0, 9), 100) == [AcquiredRecords(4, 9, 2)]


def test_failed_write_answers_the_error_and_keeps_the_records_acquired():
    persister = InMemoryPersister()
    sp = partition()
    run(io.initialize(sp, persister, log_start_offset=0, high_watermark=0))
    sp.acquire("m1", log(0, 1), 100)
    persister.fail_next("write_state", ErrorCode.COORDINATOR_NOT_AVAILABLE)
    assert run(io.acknowledge(sp, persister, "m1", [ack(0, 1, 1)])) is \
        ErrorCode.COORDINATOR_NOT_AVAILABLE
    assert sp.state_at(0).state is R and sp.state_at(0).member_id == "m1"
    assert run(io.acknowledge(sp, persister, "m1", [ack(0, 1, 1)])) is ErrorCode.NONE


def test_a_deposed_leader_is_fenced():
    persister = InMemoryPersister()
    old = partition(leader_epoch=0)
    run(io.initialize(old, persister, log_start_offset=0, high_watermark=0))
    old.acquire("m1", log(0, 1), 100)
    assert run(io.acknowledge(old, persister, "m1", [ack(0, 0, 1)])) is ErrorCode.NONE
    new = partition(leader_epoch=1)
    run(io.initialize(new, persister, log_start_offset=0, high_watermark=0))
    assert run(io.acknowledge(old, persister, "m1", [ack(1, 1, 1)])) is ErrorCode.FENCED_LEADER_EPOCH
    assert old.partition_state is SharePartitionState.FENCED
    assert old.error_code() is ErrorCode.FENCED_STATE_EPOCH
    assert old.acquire("m1", log(0, 5), 100) == []


def test_state_epoch_fencing_and_failed_reads():
    persister = InMemoryPersister()
    sp = partition()
    run(io.initialize(sp, persister, log_start_offset=0, high_watermark=0))
    sp.acquire("m1", log(0, 1), 100)
    run(persister.initialize_state("g", TOPIC_ID, 0, 5, 0))  # offsets reset by an admin
    assert run(io.acknowledge(sp, persister, "m1", [ack(0, 1, 1)])) is ErrorCode.FENCED_STATE_EPOCH
    assert sp.partition_state is SharePartitionState.FENCED
    failed = partition()
    persister.fail_next("read_state", ErrorCode.COORDINATOR_NOT_AVAILABLE)
    assert run(io.initialize(failed, persister, log_start_offset=0, high_watermark=0)) is \
        ErrorCode.COORDINATOR_NOT_AVAILABLE
    assert failed.partition_state is SharePartitionState.FAILED
    assert failed.error_code() is ErrorCode.COORDINATOR_NOT_AVAILABLE
    assert failed.acknowledge("m1", [ack(0, 0, 1)]).error is ErrorCode.COORDINATOR_NOT_AVAILABLE
