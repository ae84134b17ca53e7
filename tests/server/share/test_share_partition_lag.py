"""What a share-partition writes for DescribeShareGroupOffsets (KIP-1226): the start offset as it
stands once the write commits, and the delivery complete count, through the InMemoryPersister's
share coordinator shard (``SharePartition.persisted_view``)."""

from __future__ import annotations

import asyncio

from odradek.coordinator.group.timer_queue import TimerQueue
from odradek.coordinator.share.memory_persister import InMemoryPersister
from odradek.protocol.generated.error_codes import ErrorCode
from odradek.server.share import share_partition_io as io
from odradek.server.share.record_state import AcknowledgeType
from odradek.server.share.share_partition import SharePartition
from odradek.server.share.share_types import SharePartitionConfig
from odradek.storage.clock import FakeClock
from tests.server.share.harness import TOPIC_ID, ack, log

ACCEPT, RELEASE, REJECT = int(AcknowledgeType.ACCEPT), int(AcknowledgeType.RELEASE), int(AcknowledgeType.REJECT)


def run(coro):
    return asyncio.run(coro)


def loaded(persister: InMemoryPersister) -> SharePartition:
    run(persister.initialize_state("g", TOPIC_ID, 0, 1, 0))
    sp = SharePartition("g", TOPIC_ID, 0, leader_epoch=0, config=SharePartitionConfig(),
                        clock=FakeClock(), timers=TimerQueue())
    assert run(io.initialize(sp, persister, log_start_offset=0, high_watermark=10)) is ErrorCode.NONE
    return sp


def summary(persister):
    s = run(persister.read_summary("g", TOPIC_ID, 0, -1))
    return s.start_offset, s.delivery_complete_count


def test_initialized_state_has_delivery_complete_count_zero():
    persister = InMemoryPersister()
    loaded(persister)
    assert summary(persister) == (0, 0)


def test_accepting_the_first_records_persists_the_moved_start_offset():
    persister = InMemoryPersister()
    sp = loaded(persister)
    sp.acquire("m", log(0, 2), 10)
    assert run(io.acknowledge(sp, persister, "m", [ack(0, 2, ACCEPT)])) is ErrorCode.NONE
    assert sp.start_offset == 3
    assert summary(persister) == (3, 0)  # high watermark 3 - 3 - 0: lag 0


def test_terminal_records_behind_an_open_one_count_as_delivery_complete():
    persister = InMemoryPersister()
    sp = loaded(persister)
    sp.acquire("m", log(0, 5), 10)
    assert run(io.acknowledge(sp, persister, "m", [ack(1, 2, ACCEPT), ack(4, 4, REJECT)])) is ErrorCode.NONE
    assert summary(persister) == (0, 3)  # 0 still acquired: 1, 2 and 4 are done
    assert run(io.acknowledge(sp, persister, "m", [ack(0, 0, ACCEPT), ack(3, 3, RELEASE)])) is ErrorCode.NONE
    assert summary(persister) == (3, 1)  # 3 available again; 4 done beyond it


def test_a_failed_write_leaves_the_persisted_state():
    persister = InMemoryPersister()
    sp = loaded(persister)
    sp.acquire("m", log(0, 2), 10)
    persister.fail_next("write_state", ErrorCode.COORDINATOR_NOT_AVAILABLE)
    assert run(io.acknowledge(sp, persister, "m", [ack(0, 2, ACCEPT)])) is ErrorCode.COORDINATOR_NOT_AVAILABLE
    assert sp.start_offset == 0 and summary(persister) == (0, 0)
