"""SharePartitionManager without sockets: share-partitions initialized from the Persister, a
closed session releases what its member acquired, lock expiry through the shared TimerQueue
makes records acquirable again (delivery count 2), acknowledgements written before answered,
and share-partitions dropped when leadership moves."""

from __future__ import annotations

import asyncio
import uuid
from dataclasses import dataclass

from odradek.coordinator.share.memory_persister import InMemoryPersister
from odradek.protocol.generated.error_codes import ErrorCode as E
from odradek.server.share.record_state import RecordState
from odradek.server.share.share_partition_manager import ShareManagerConfig, SharePartitionManager
from odradek.server.share.share_types import AcknowledgementBatch
from odradek.storage.clock import FakeClock
from tests.server.share.harness import log

T = uuid.UUID(int=3)
KEY = ("g", T, 0)


@dataclass
class FakePartition:
    leader_epoch: int = 0
    log_start_offset: int = 0
    high_watermark: int = 0


class FakeBroker:
    stopping = False


def manager(persister=None) -> SharePartitionManager:
    return SharePartitionManager(FakeBroker(), persister or InMemoryPersister(), FakeClock(),
                                 ShareManagerConfig(record_lock_duration_ms=1000),
                                 group_config=lambda g: {"share.auto.offset.reset": "earliest"})


async def initialized(m, persister):
    await persister.initialize_state("g", T, 0, 0, -1)
    sp, error = await m.share_partition(KEY, "q", FakePartition(high_watermark=10))
    assert error is E.NONE
    return sp


def test_closed_session_releases_and_expiry_redelivers():
    async def run():
        persister = InMemoryPersister()
        m = manager(persister)
        sp = await initialized(m, persister)
        assert sp.start_offset == 0  # earliest, from the group config
        session = m.sessions.share_fetch("g", "a", 0, [(T, 0)]).session
        assert sp.acquire("a", log(0, 9), 5)[0].last_offset == 4
        assert await m.acknowledge(KEY, "a", [AcknowledgementBatch(0, 0, (1,))]) is E.NONE
        assert await m.acknowledge(KEY, "b", [AcknowledgementBatch(1, 1, (1,))]) is E.INVALID_RECORD_STATE
        closed = m.sessions.share_fetch("g", "a", -1).closed
        assert closed is session
        await m.release_session(closed)
        assert [(lo, hi, st) for lo, hi, st, _, _ in sp.in_flight()] == [(1, 4, RecordState.AVAILABLE)]
        # b takes 1-9, its lock expires: AVAILABLE again with delivery count 2 for 1-4
        got = sp.acquire("b", log(1, 9), 100)
        assert [(a.first_offset, a.last_offset, a.delivery_count) for a in got] == [(1, 4, 2), (5, 9, 1)]
        assert m.run_timers(m.clock.milliseconds()) == 0
        m.clock.advance(1000)
        assert m.run_timers(m.clock.milliseconds()) == 2  # a's lock (nothing left) and b's
        assert all(st is RecordState.AVAILABLE for _, _, st, _, _ in sp.in_flight())
        await asyncio.sleep(0.01)  # the expiry's write
        assert persister.states[("g", T, 0)] is not None
    asyncio.run(run())


def test_leadership_change_drops_share_partitions():
    async def run():
        persister = InMemoryPersister()
        m = manager(persister)
        sp = await initialized(m, persister)
        sp.acquire("a", log(0, 3), 10)
        m.on_leadership_change([("q", 0)])
        assert m.get(KEY) is None and len(m.timers) == 0
        assert await m.acknowledge(KEY, "a", [AcknowledgementBatch(0, 0, (1,))]) is E.INVALID_RECORD_STATE
        again, _ = await m.share_partition(KEY, "q", FakePartition(leader_epoch=1, high_watermark=10))
        assert again is not sp and again.leader_epoch == 1
    asyncio.run(run())


def test_a_group_config_change_applies_to_a_loaded_share_partition():
    """share.record.lock.duration.ms changed after the share-partition was made: the next
    acquisition takes the new lock duration (Kafka reads the group config at each acquire)."""
    configs = {"share.auto.offset.reset": "earliest", "share.record.lock.duration.ms": 1000}
    m = SharePartitionManager(FakeBroker(), InMemoryPersister(), FakeClock(),
                              ShareManagerConfig(record_lock_duration_ms=1000), group_config=lambda g: configs)

    async def go():
        sp = await initialized(m, m.persister)
        configs["share.record.lock.duration.ms"] = 5000
        assert sp.config.record_lock_duration_ms == 5000
        sp.acquire("m", log(0, 0), 10)
        assert m.timers.next_deadline() == m.clock.milliseconds() + 5000

    asyncio.run(go())
