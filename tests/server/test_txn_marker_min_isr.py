"""A transaction marker is an acks=all write (``server/txn_marker_writer.py``, Kafka appending
markers with ``requiredAcks = -1``): one whose high watermark passes after the ISR shrank
below ``min.insync.replicas`` is answered NOT_ENOUGH_REPLICAS_AFTER_APPEND (which the
coordinator retries), and completes no transactional offsets; once the ISR is whole again a
retried marker is answered NONE and completes them. No sockets: the writer over a real
replica manager, followers moved by hand."""

from __future__ import annotations

import asyncio
import uuid
from types import SimpleNamespace

from odradek.coordinator.transaction.marker_write import MarkerWrite
from odradek.protocol.generated.error_codes import ErrorCode
from odradek.replication.replica_manager import ReplicaManager
from odradek.server.txn_marker_writer import write_markers
from odradek.storage.clock import FakeClock
from odradek.storage.config import LogConfig
from odradek.storage.log_manager import LogManager
from tests.storage.helpers import T0

OFFSETS = "__consumer_offsets"
LAG_MS = 1000


def make_broker(tmp_path):
    clock = FakeClock(T0)
    manager = LogManager([str(tmp_path)], LogConfig(), clock)
    manager.startup()
    min_isr = lambda topic: 2  # noqa: E731
    rm = ReplicaManager(1, manager, clock, LAG_MS, min_insync_replicas=min_isr)
    completed = []
    broker = SimpleNamespace(
        clock=clock, replica_manager=rm, topics=SimpleNamespace(min_insync_replicas=min_isr),
        leader_partition=lambda topic, index: (rm.get(topic, index), ErrorCode.NONE),
        log_storage_error=lambda e: None, log_bad_input=lambda text: None,
        group_coordinator=SimpleNamespace(complete_transaction=lambda *args: completed.append(args)))
    return broker, manager, completed


def catch_up(part, clock) -> None:
    for follower in (2, 3):
        part.update_follower_fetch_state(follower, part.log_end_offset, 0, clock.milliseconds())


def test_a_marker_replicated_to_a_shrunken_isr_is_retried(tmp_path):
    broker, manager, completed = make_broker(tmp_path)
    rm, clock = broker.replica_manager, broker.clock
    part = rm.make_leader(OFFSETS, 0, uuid.uuid4(), (1, 2, 3), (1, 2, 3), 0, LogConfig())
    catch_up(part, clock)

    async def marker_while(step) -> MarkerWrite:
        write = MarkerWrite(OFFSETS, 0, producer_id=7, producer_epoch=0, coordinator_epoch=3, commit=True)
        task = asyncio.ensure_future(write_markers(broker, [write]))
        await asyncio.sleep(0)
        assert not task.done()  # appended, waiting for the followers
        step()
        rm.notify(part.key)
        await task
        return write

    def followers_stall():  # the leader drops them after replica.lag.time.max.ms: HW jumps
        clock.advance(LAG_MS + 1)
        assert part.commit_isr(part.maybe_shrink_isr(clock.milliseconds()).isr)

    write = asyncio.run(marker_while(followers_stall))
    assert part.isr == (1,) and part.high_watermark > write.offset
    assert write.error == ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND and completed == []

    catch_up(part, clock)
    part.commit_isr((1, 2, 3))  # the followers are back in the ISR
    write = asyncio.run(marker_while(lambda: catch_up(part, clock)))
    assert write.error == ErrorCode.NONE and completed == [(0, 7, True)]
    manager.shutdown()
