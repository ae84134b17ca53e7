"""How an acks=all wait ends (``Partition.check_enough_replicas_reach_offset``, behind
``ReplicaManager.replication_error``; Kafka's ``Partition.checkEnoughReplicasReachOffset``):
the high watermark passing the records is not enough, the ISR must still have
``min.insync.replicas`` members then, else NOT_ENOUGH_REPLICAS_AFTER_APPEND. No sockets: a
replica manager over a real log, followers moved by hand, a fake clock."""

from __future__ import annotations

import asyncio
import uuid

import pytest

from odradek.protocol.generated.error_codes import ErrorCode
from odradek.replication.produce_validation import ProduceError
from odradek.replication.replica_manager import ReplicaManager
from odradek.storage.clock import FakeClock
from odradek.storage.config import LogConfig
from odradek.storage.log_manager import LogManager
from tests.storage.helpers import T0, make_batch

LAG_MS = 1000  # replica.lag.time.max.ms


@pytest.fixture
def cluster(tmp_path):
    """``(replica manager of broker 1, its clock, min.insync.replicas by topic)``: edit the
    dict to change a topic's effective value, as a dynamic override would."""
    clock = FakeClock(T0)
    manager = LogManager([str(tmp_path)], LogConfig(), clock)
    manager.startup()
    min_isr = {"t": 2}
    rm = ReplicaManager(1, manager, clock, LAG_MS, min_insync_replicas=lambda topic: min_isr.get(topic, 1))
    yield rm, clock, min_isr
    manager.shutdown()


def lead(rm: ReplicaManager, isr=(1, 2, 3)):
    """Broker 1 leads t-0 (replicas 1, 2, 3) with ``isr``; the followers in it have fetched to
    the end (the others have not fetched: they hold nothing back)."""
    part = rm.make_leader("t", 0, uuid.uuid4(), (1, 2, 3), isr, 0, LogConfig())
    replicate(rm, part, *(r for r in isr if r != 1))
    return part


def append(rm: ReplicaManager, part) -> int:
    return rm.append(part, memoryview(bytearray(make_batch(0, 2)))).last_offset


def replicate(rm: ReplicaManager, part, *followers: int) -> None:
    for follower in followers:
        part.update_follower_fetch_state(follower, part.log_end_offset, 0, rm.clock.milliseconds())


def test_the_completion_rule(cluster):
    rm, _, min_isr = cluster
    part = lead(rm)
    last = append(rm, part)
    assert rm.replication_error("t", 0, last) is None  # still waiting: no follower has it

    replicate(rm, part, 2, 3)  # high watermark past the records, ISR 3 >= 2
    assert part.high_watermark > last
    assert rm.replication_error("t", 0, last) == ErrorCode.NONE

    part.isr = (1,)  # the ISR as the controller now holds it: 1 < 2
    assert rm.replication_error("t", 0, last) == ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND
    assert not rm.all_replicated([("t", 0, last, None)])
    assert rm.replication_over([("t", 0, last, None)])  # over (the answer is the error)

    min_isr["t"] = 1  # the topic's min.insync.replicas is read when the wait completes
    assert rm.replication_error("t", 0, last) == ErrorCode.NONE

    part.leader_id = 2  # leadership lost: whatever the high watermark says
    assert rm.replication_error("t", 0, last) == ErrorCode.NOT_LEADER_OR_FOLLOWER
    assert rm.replication_error("t", 7, last) == ErrorCode.NOT_LEADER_OR_FOLLOWER  # not hosted


def test_a_replica_being_added_counts_as_in_sync(cluster):
    """The maximal ISR (committed + a pending addition) is counted, as Kafka does: the high
    watermark waited for the replica being added, so it holds the records."""
    rm, _, _ = cluster
    part = lead(rm, isr=(1,))
    last = append(rm, part)
    assert part.high_watermark > last and rm.replication_error("t", 0, last) == (
        ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND)
    replicate(rm, part, 2)  # caught up: joins the ISR, pending until the controller holds it
    assert part.isr == (1,) and part.pending_isr is not None and 2 in part.pending_isr.added
    assert rm.replication_error("t", 0, last) == ErrorCode.NONE


def test_an_isr_shrinking_under_a_waiting_produce_fails_it(cluster):
    """The defect seen from outside: both followers stall, the leader shrinks the ISR after
    replica.lag.time.max.ms, the high watermark jumps to its log end, and the waiting acks=all
    produce must not be answered NONE."""
    rm, clock, _ = cluster
    part = lead(rm)
    last = append(rm, part)
    waits = [("t", 0, last, None)]

    async def scenario():
        waiting = asyncio.ensure_future(rm.wait_for_replication(waits, 30.0))
        await asyncio.sleep(0)
        assert not waiting.done()
        clock.advance(LAG_MS + 1)
        change = part.maybe_shrink_isr(clock.milliseconds())
        assert change is not None and change.isr == (1,)
        assert rm.replication_error("t", 0, last) is None  # a pending shrink removes nobody yet
        assert part.commit_isr(change.isr, clock.milliseconds())  # durable: the HW moves
        rm.notify(part.key)  # as the alter-partition manager does
        return await waiting

    assert asyncio.run(scenario()) is True  # the wait is over...
    assert part.high_watermark > last
    assert rm.replication_error("t", 0, last) == ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND  # ...not replicated


def test_coordinator_appends_are_acks_all(cluster):
    """A coordinator's batch is refused before appending while the ISR is short
    (NOT_ENOUGH_REPLICAS, as Kafka's appendRecordsToLeader with requiredAcks=-1)."""
    rm, _, _ = cluster
    part = lead(rm, isr=(1,))
    end = part.log_end_offset
    with pytest.raises(ProduceError) as refused:
        rm.append_as_coordinator(part, make_batch(0, 1))
    assert refused.value.error == ErrorCode.NOT_ENOUGH_REPLICAS and part.log_end_offset == end
    part.isr = (1, 2)
    last = rm.append_as_coordinator(part, make_batch(0, 1)).last_offset
    assert rm.replication_error("t", 0, last) is None
    replicate(rm, part, 2)
    assert rm.replication_error("t", 0, last) == ErrorCode.NONE
