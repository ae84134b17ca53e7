"""The transaction coordinator's log writes are acks=all (Kafka's ``TransactionStateManager``
appends with ``requiredAcks = -1``): refused before appending while the ``__transaction_state``
partition's ISR is short of ``min.insync.replicas``, failed when the ISR shrank below it
before the high watermark passed the record, both answered COORDINATOR_NOT_AVAILABLE (Kafka's
mapping, retriable). No sockets: the coordinator over a real replica manager, followers
moved by hand."""

from __future__ import annotations

import asyncio
import uuid
from types import SimpleNamespace

from odradek.coordinator.coordinator_runtime import CoordinatorSlot
from odradek.coordinator.transaction.transaction_config import TRANSACTION_STATE_TOPIC, TransactionConfig
from odradek.coordinator.transaction.transaction_coordinator import TransactionCoordinator
from odradek.coordinator.transaction.transaction_log import TransactionLogRecord
from odradek.protocol.generated.error_codes import ErrorCode
from odradek.replication.replica_manager import ReplicaManager
from odradek.storage.clock import FakeClock
from odradek.storage.config import LogConfig
from odradek.storage.log_manager import LogManager
from tests.storage.helpers import T0

LAG_MS = 1000


def catch_up(part, clock) -> None:
    for follower in (2, 3):
        part.update_follower_fetch_state(follower, part.log_end_offset, 0, clock.milliseconds())


def test_a_transaction_log_write_needs_min_insync_replicas_to_the_end(tmp_path):
    clock = FakeClock(T0)
    manager = LogManager([str(tmp_path)], LogConfig(), clock)
    manager.startup()
    rm = ReplicaManager(1, manager, clock, LAG_MS, min_insync_replicas=lambda topic: 2)
    part = rm.make_leader(TRANSACTION_STATE_TOPIC, 0, uuid.uuid4(), (1, 2, 3), (1, 2, 3), 0, LogConfig())
    catch_up(part, clock)
    record = TransactionLogRecord("tid", None)

    async def scenario():
        broker = SimpleNamespace(broker_id=1, clock=clock, loop=asyncio.get_running_loop(), replica_manager=rm)
        coordinator = TransactionCoordinator(broker, TransactionConfig())
        slot = CoordinatorSlot(0, 0, shard=None, loading=False)

        async def write_while(step) -> ErrorCode:
            task = asyncio.ensure_future(coordinator._write(slot, record))
            await asyncio.sleep(0)
            assert not task.done()  # appended, waiting for the followers
            step()
            rm.notify(part.key)
            return await task

        def followers_stall():  # the leader drops them after replica.lag.time.max.ms: HW jumps
            clock.advance(LAG_MS + 1)
            assert part.commit_isr(part.maybe_shrink_isr(clock.milliseconds()).isr)

        assert await write_while(followers_stall) == ErrorCode.COORDINATOR_NOT_AVAILABLE
        end = part.log_end_offset
        assert await coordinator._write(slot, record) == ErrorCode.COORDINATOR_NOT_AVAILABLE  # ISR [1]
        assert part.log_end_offset == end  # refused before appending
        catch_up(part, clock)
        part.commit_isr((1, 2, 3))
        assert await write_while(lambda: catch_up(part, clock)) == ErrorCode.NONE
        coordinator.shutdown()

    asyncio.run(scenario())
    manager.shutdown()
