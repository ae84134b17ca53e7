"""``ReplicaManager``'s acks=all waits: over when the high watermark passes the append, or when
the leadership is lost, which is not "replicated" (the producer must hear
NOT_LEADER_OR_FOLLOWER, never NONE)."""

import asyncio
import uuid

from odradek.protocol.generated.error_codes import ErrorCode
from odradek.replication.replica_manager import ReplicaManager
from odradek.storage.clock import FakeClock
from odradek.storage.config import LogConfig
from odradek.storage.log_manager import LogManager
from tests.storage.helpers import T0, make_batch


def test_a_lost_leadership_ends_the_wait_but_is_not_replicated(tmp_path):
    clock = FakeClock(T0)
    manager = LogManager([str(tmp_path)], LogConfig(), clock)
    manager.startup()
    rm = ReplicaManager(1, manager, clock)
    part = rm.make_leader("t", 0, uuid.uuid4(), (1, 2), (1, 2), 0, LogConfig())
    last = rm.append(part, memoryview(bytearray(make_batch(0, 2)))).last_offset
    waits = [("t", 0, last, None)]
    assert rm.replication_error("t", 0, last) is None
    assert not rm.all_replicated(waits) and not rm.replication_over(waits)

    async def wait_then_resign():
        waiting = asyncio.ensure_future(rm.wait_for_replication(waits, 5.0))
        await asyncio.sleep(0)
        part.leader_id = 2  # became a follower
        rm.notify(part.key)
        return await waiting
    assert asyncio.run(wait_then_resign()) is True
    assert rm.replication_error("t", 0, last) == ErrorCode.NOT_LEADER_OR_FOLLOWER
    assert rm.replication_over(waits) and not rm.all_replicated(waits)

    part.leader_id = 1
    part.update_follower_fetch_state(2, last + 1, 0, T0)
    assert rm.replication_error("t", 0, last) == ErrorCode.NONE and rm.all_replicated(waits)
    manager.shutdown()
