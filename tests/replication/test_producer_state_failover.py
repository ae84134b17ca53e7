"""Producer state across a failover in which the old leader committed alone and truncated.

The broker side of a duplicate seen in a partition test: the leader, cut from the other
brokers and from ZooKeeper while clients still reached it, appended batches with itself as
the only in-sync replica, then learned that another broker led, truncated them, and later
copied the new leader's log. Whatever leads next must know every idempotent producer's
batches in its log as the old leader would have (Kafka's ``Log.truncateTo`` rebuilding the
producer state, ``appendAsFollower`` updating it): retries of batches in the log are answered
as duplicates with their offsets, and the replicas agree on the producer state (snapshot
bytes, ``coordinator/producer_snapshot.py``) once their logs agree.

Two replica managers in one process, with the roles LeaderAndIsr would give; the follower
"fetches" by appending the leader's bytes (``Partition.append_records_as_follower``) and
truncates with ``ReplicaManager.truncate_to`` where ``replication/truncation.py`` would.
"""

import uuid

import pytest

from odradek.protocol.generated.error_codes import ErrorCode
from odradek.replication.produce_validation import ProduceError
from odradek.replication.replica_manager import ReplicaManager
from odradek.storage.clock import FakeClock
from odradek.storage.config import LogConfig
from odradek.storage.log_manager import LogManager
from tests.storage.helpers import T0, make_batch

TOPIC_ID = uuid.uuid4()
REPLICAS = (1, 2)


class Replica:
    """One broker's replica of partition t-0."""

    def __init__(self, path, broker_id: int) -> None:
        clock = FakeClock(T0)
        manager = LogManager([str(path)], LogConfig(), clock)
        manager.startup()
        self.rm = ReplicaManager(broker_id, manager, clock)
        self.broker_id = broker_id
        self.part = self.rm.hosted_partition("t", 0, TOPIC_ID, LogConfig())

    def lead(self, epoch: int, isr) -> None:
        self.rm.make_leader("t", 0, TOPIC_ID, REPLICAS, isr, epoch, LogConfig())

    def follow(self, leader: "Replica", epoch: int) -> None:
        self.rm.make_follower("t", 0, TOPIC_ID, REPLICAS, REPLICAS, leader.broker_id, epoch, LogConfig())

    def produce(self, producer_id: int, seq: int, count: int = 1) -> tuple[int, int]:
        """``(base offset, last offset)`` the leader answers for the batch."""
        result = self.rm.append(self.part, memoryview(bytearray(
            make_batch(0, count, producer_id=producer_id, base_sequence=seq))))
        return result.base_offset, result.last_offset

    def fetch_from(self, leader: "Replica") -> None:
        """Copy the leader's log from this replica's log end on."""
        start = self.part.log_end_offset
        region = leader.part.log.read(start, 1 << 24)
        data = bytes(region.read()) if len(region) else b""
        if data:
            self.part.append_records_as_follower(memoryview(data))
        assert self.part.log_end_offset == leader.part.log_end_offset

    def close(self) -> None:
        self.rm.log_manager.shutdown()


@pytest.fixture
def replicas(tmp_path):
    a, b = Replica(tmp_path / "a", 1), Replica(tmp_path / "b", 2)
    a.lead(0, REPLICAS)
    b.follow(a, 0)
    yield a, b
    a.close()
    b.close()


def test_a_truncated_old_leader_that_leads_again_knows_the_new_leaders_batches(replicas):
    a, b = replicas
    for seq in (0, 2, 4):  # producer 7, batches of two records: offsets 0-1, 2-3, 4-5
        a.produce(7, seq, 2)
    b.fetch_from(a)
    a.lead(0, (1,))  # the ISR wrongly shrunk to the cut-off leader alone
    assert a.produce(7, 6, 2) == (6, 7)  # acknowledged, never replicated
    assert a.produce(7, 8, 2) == (8, 9)

    b.lead(1, (2,))
    # The producer's answer for seq 4 was lost: the new leader has it (it copied it).
    assert b.produce(7, 4, 2) == (4, 5)
    with pytest.raises(ProduceError) as gap:  # seq 6 and 8 were lost with the old leader
        b.produce(7, 10, 2)
    assert gap.value.error == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
    assert b.produce(8, 0, 2) == (6, 7)  # the producer's new id

    a.follow(b, 1)
    assert a.rm.truncate_to(a.part, 6)
    a.fetch_from(b)
    assert a.part.producer_state.snapshot() == b.part.producer_state.snapshot()

    a.lead(2, REPLICAS)
    assert a.produce(7, 4, 2) == (4, 5)  # duplicates, answered with their offsets
    assert a.produce(8, 0, 2) == (6, 7)
    assert a.part.log_end_offset == 8
    with pytest.raises(ProduceError) as stale:  # seq 6 of producer 7 is not in this log
        a.produce(7, 8, 2)
    assert stale.value.error == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER


def test_batches_resent_to_the_new_leader_are_duplicates_on_the_old_one_after_it_copies_them(replicas):
    """The old leader's whole window of a producer (its last 5 batches) is cut: the producer
    is known there as before that window (rebuilt from the log), then from the new leader's
    copies of the same batches."""
    a, b = replicas
    for seq in range(5):
        a.produce(7, seq)
    b.fetch_from(a)
    a.lead(0, (1,))
    for seq in range(5, 10):  # appended alone, their answers lost with the leadership
        a.produce(7, seq)

    b.lead(1, (2,))
    a.follow(b, 1)
    assert a.rm.truncate_to(a.part, 5)
    for seq in range(5, 10):  # the producer sends them again, to the new leader
        assert b.produce(7, seq) == (seq, seq)
    a.fetch_from(b)
    assert a.part.producer_state.snapshot() == b.part.producer_state.snapshot()

    a.lead(2, REPLICAS)
    for seq in range(5, 10):
        assert a.produce(7, seq) == (seq, seq)
    assert a.part.log_end_offset == 10
    assert a.produce(7, 10) == (10, 10)
    with pytest.raises(ProduceError) as gap:
        a.produce(7, 12)
    assert gap.value.error == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
