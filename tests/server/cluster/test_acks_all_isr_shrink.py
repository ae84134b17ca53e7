"""acks=all is never acknowledged with fewer in-sync replicas than ``min.insync.replicas``,
even when the records were appended while the ISR was whole.

Three brokers, ``min.insync.replicas=2``, ``replica.lag.time.max.ms`` short, a ZooKeeper
session long enough to outlast the pause (10 s, as in test_min_insync_replicas.py). A data
partition and the group's ``__consumer_offsets`` partition are both led by the controller:
the ISR shrinks only once the controller holds it (AlterPartition), so a paused controller
would hold the ISR as it was until its session expires. (The data partition is assigned with
the controller first, its preferred leader; the group id is picked so that its
``__consumer_offsets`` partition is one the controller leads.) Both followers are paused
(SIGSTOP) right before a record is produced and an offset committed: both are
appended with the ISR still whole and wait; the leader then shrinks the ISR to itself, the
high watermark jumps to its log end, and the waits complete. Kafka's answer
(``Partition.checkEnoughReplicasReachOffset``) is NOT_ENOUGH_REPLICAS_AFTER_APPEND for the
produce and, mapped by the group coordinator, COORDINATOR_NOT_AVAILABLE for the commit; both
retriable. Resumed, the followers catch up, the ISR grows back, the idempotent producer's retry
is acknowledged (once, at the offset its record was first appended at), a new commit succeeds,
and every replica holds the same records.
"""

from __future__ import annotations


import pytest
from confluent_kafka import KafkaError, Producer

from odradek.client import AdminClient, NewTopic
from odradek.coordinator.partitioner import partition_for
from odradek.protocol import codec
from odradek.protocol.generated.error_codes import ErrorCode
from tests.server.cluster.cluster_clients import read_partition
from tests.server.cluster.harness import wait_until
from tests.server.wire import WireClient, message

pytestmark = pytest.mark.timeout(150)

TOPIC = "guarded"
OFFSETS = "__consumer_offsets"
OFFSETS_PARTITIONS = 3  # one led by each broker (the assignment's first replicas rotate)
PROPS = {
    "zookeeper.session.timeout.ms": "10000",
    "replica.lag.time.max.ms": "1500",
    "min.insync.replicas": "2",
    "offsets.topic.num.partitions": str(OFFSETS_PARTITIONS),
    "offsets.topic.replication.factor": "3",
    "offsets.commit.timeout.ms": "20000",  # the commit's wait ends by the ISR shrinking, not by this
}


def find_coordinator(bootstrap: str, group: str) -> int:
    """``group``'s coordinator, asked of the broker at ``bootstrap`` (FindCoordinator creates
    ``__consumer_offsets`` first)."""
    client = WireClient(bootstrap, timeout=30)
    try:
        def found():
            _, answer = client.request("FindCoordinator", 3, message("FindCoordinatorRequest", key=group, key_type=0))
            return answer.node_id if answer.error_code == ErrorCode.NONE else None
        return wait_until(found, 30, f"the coordinator of {group}", interval=0.25)
    finally:
        client.close()


def group_led_by(cluster, broker: int) -> str:
    """A group id whose ``__consumer_offsets`` partition ``broker`` leads (once the topic exists)."""
    find_coordinator(cluster[broker].bootstrap, "any")
    cluster.wait_topic_ready(OFFSETS, OFFSETS_PARTITIONS)
    led = next(p for p in range(OFFSETS_PARTITIONS) if cluster.leader(OFFSETS, p) == broker)
    group = next(g for g in (f"ledger-{i}" for i in range(100)) if partition_for(g, OFFSETS_PARTITIONS) == led)
    assert find_coordinator(cluster[broker].bootstrap, group) == broker
    return group


def commit(bootstrap: str, group: str, offset: int) -> ErrorCode:
    """A simple OffsetCommit (no generation) of ``offset`` for the data partition, sent to the
    broker at ``bootstrap``; its error."""
    m = codec.module("OffsetCommitRequest")
    body = m.MESSAGE(group_id=group, generation_id_or_member_epoch=-1, member_id="", topics=[
        m.OffsetCommitRequestTopic(name=TOPIC, partitions=[
            m.OffsetCommitRequestPartition(partition_index=0, committed_offset=offset)])])
    client = WireClient(bootstrap, timeout=30)
    try:
        _, answer = client.request("OffsetCommit", 2, body)
        return answer.topics[0].partitions[0].error_code
    finally:
        client.close()


class Reports:
    """A producer's delivery reports: ``(error code or None, offset, value)``."""

    def __init__(self, bootstrap: str, **config) -> None:
        self.producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 0,
                                  "request.timeout.ms": 20000, **config})
        self.reports: list[tuple[int | None, int, bytes]] = []

    def send(self, value: bytes) -> None:
        self.producer.produce(TOPIC, value, partition=0, on_delivery=self._report)
        self.producer.poll(0)

    def _report(self, err, msg) -> None:
        self.reports.append((None if err is None else err.code(), msg.offset(), msg.value()))

    def flush(self, timeout: float) -> list[tuple[int | None, int, bytes]]:
        assert self.producer.flush(timeout) == 0, "a delivery report still missing"
        return self.reports


def test_acks_all_and_commits_fail_when_the_isr_shrinks_under_them(make_cluster):
    cluster = make_cluster(PROPS).start([1, 2, 3])
    leader = cluster.controller_id()
    followers = [b for b in (1, 2, 3) if b != leader]
    group = group_led_by(cluster, leader)
    offsets_partition = partition_for(group, OFFSETS_PARTITIONS)
    with AdminClient(cluster.bootstrap) as admin:
        admin.create_topics([NewTopic(TOPIC, replica_assignment={0: [leader, *followers]})])
    for topic, p in ((TOPIC, 0), (OFFSETS, offsets_partition)):
        cluster.wait_for_isr(topic, p, [1, 2, 3])
        assert cluster.leader(topic, p) == leader
    once = Reports(cluster.bootstrap, retries=0, **{"message.timeout.ms": 25000})
    retrying = Reports(cluster.bootstrap, **{"enable.idempotence": True, "message.timeout.ms": 60000})
    once.send(b"warm-up-once")
    retrying.send(b"warm-up-retrying")
    assert [r[0] for r in once.flush(30) + retrying.flush(30)] == [None, None]
    coordinator = cluster[leader].bootstrap
    wait_until(lambda: commit(coordinator, group, 1) == ErrorCode.NONE, 30, "a first commit")

    for follower in followers:
        cluster[follower].pause()
    once.send(b"answered-once")
    retrying.send(b"retried")
    assert commit(coordinator, group, 2) == ErrorCode.COORDINATOR_NOT_AVAILABLE
    assert once.flush(30)[-1][0] == KafkaError.NOT_ENOUGH_REPLICAS_AFTER_APPEND
    assert cluster.isr(TOPIC, 0) == [leader]
    retrying.producer.poll(1.0)
    assert retrying.reports[1:] == [], "acknowledged while the followers were stopped"

    for follower in followers:
        cluster[follower].resume()
    for topic, p in ((TOPIC, 0), (OFFSETS, offsets_partition)):
        cluster.wait_for_isr(topic, p, [1, 2, 3])
    [(error, offset, _)] = retrying.flush(60)[1:]
    assert error is None
    assert commit(coordinator, group, 3) == ErrorCode.NONE
    data = cluster.wait_replicas_identical(TOPIC, 0, [1, 2, 3])
    assert data.count(b"answered-once") == 1 and data.count(b"retried") == 1  # appended once each
    assert (offset, b"retried") in read_partition(cluster.bootstrap, TOPIC, 0)
