"""A KIP-848 consumer group (``group.protocol=consumer``) survives the kill -9 of its coordinator.

The coordinator of a group is the leader of its ``__consumer_offsets`` partition (one partition
here, three replicas). A consumer group's state is itself records in that partition (Kafka's
``ConsumerGroupMemberMetadata``, ``ConsumerGroupTargetAssignment*``,
``ConsumerGroupCurrentMemberAssignment`` and ``ConsumerGroupMetadata`` keys, written by
odradek/coordinator/group/consumer/consumer_group_manager.py), so the replica that becomes
leader after the kill rebuilds the group by replaying them and goes on answering the members'
ConsumerGroupHeartbeats at the epochs they hold.

Three confluent-kafka consumers (librdkafka, ``group.protocol=consumer``, manual synchronous
commits after each batch) consume a 6-partition topic (RF 3) while an idempotent acks=all
producer writes to it; the broker that is the group's coordinator is killed. The group must
come through with:

- the same members at the same member epochs and with the same partitions as before the kill
  (read with ConsumerGroupDescribe from the old, then the new coordinator), none of them told
  that it lost its partitions (librdkafka's ``on_lost``);
- no partition owned by two members at once (from every member's ``on_assign``/``on_revoke``);
- every acknowledged record consumed (none skipped), and the offsets committed before the kill
  still there after it, then committed up to the end of each partition.
"""

from __future__ import annotations

import threading
import time
from collections import defaultdict

import pytest
from confluent_kafka import Consumer, ConsumerGroupTopicPartitions, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient as ConfluentAdmin

from odradek.client.sync_admin import AdminClient
from tests.server.cluster.cluster_clients import VerifyingProducer, create_topic
from tests.server.cluster.harness import SESSION_TIMEOUT_MS, wait_until

pytestmark = pytest.mark.timeout(150)

BROKERS = [1, 2, 3]
TOPIC = "events"
PARTITIONS = 6
GROUP = "kip848-failover"
OFFSETS = "__consumer_offsets"
PROPS = {
    "offsets.topic.num.partitions": "1",
    "offsets.topic.replication.factor": "3",
    # Heartbeats every 500 ms; a member is fenced only after 10 s without one, counted on the
    # new coordinator from the moment it loads the group (ConsumerGroupManager.on_loaded).
    "group.consumer.heartbeat.interval.ms": "500",
    "group.consumer.session.timeout.ms": "10000",
}


class Ownership:
    """Who owns which partition, from every member's callbacks (incremental with the consumer
    protocol); assigning a partition that another member still owns is a violation."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.owner: dict[int, str] = {}
        self.violations: list[tuple[int, str, str]] = []
        self.lost: list[tuple[str, list[int]]] = []

    def assign(self, who: str, partitions) -> None:
        with self.lock:
            for tp in partitions:
                if self.owner.get(tp.partition, who) != who:
                    self.violations.append((tp.partition, self.owner[tp.partition], who))
                self.owner[tp.partition] = who

    def revoke(self, who: str, partitions, lost: bool = False) -> None:
        with self.lock:
            if lost:
                self.lost.append((who, sorted(tp.partition for tp in partitions)))
            for tp in partitions:
                if self.owner.get(tp.partition) == who:
                    del self.owner[tp.partition]


class Member(threading.Thread):
    """A consumer in a thread of its own: consumes a batch, records ``(partition, offset,
    value)`` of each record, then commits its positions synchronously. A commit refused while
    the coordinator moves is counted and tried again on the next round."""

    def __init__(self, bootstrap: str, name: str, ownership: Ownership) -> None:
        super().__init__(name=name, daemon=True)
        self.config = {"bootstrap.servers": bootstrap, "group.id": GROUP, "group.protocol": "consumer",
                       "auto.offset.reset": "earliest", "enable.auto.commit": False, "log_level": 0,
                       "topic.metadata.refresh.interval.ms": 1000}
        self.ownership = ownership
        self.seen: list[tuple[int, int, bytes]] = []
        self.assignment: list[int] = []
        self.member_id: str | None = None
        self.commit_errors: list[str] = []
        self.stopping = threading.Event()
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            consumer = Consumer(self.config)
            who = self.name
            consumer.subscribe([TOPIC], on_assign=lambda _, ps: self.ownership.assign(who, ps),
                               on_revoke=lambda _, ps: self.ownership.revoke(who, ps),
                               on_lost=lambda _, ps: self.ownership.revoke(who, ps, lost=True))
            pending = False  # positions not yet committed
            while not self.stopping.is_set():
                batch = [m for m in consumer.consume(50, 0.2) if m.error() is None]
                self.seen += [(m.partition(), m.offset(), m.value()) for m in batch]
                if batch or pending:
                    try:
                        consumer.commit(asynchronous=False)
                        pending = False
                    except KafkaException as e:
                        self.commit_errors.append(str(e))
                        pending = True
                self.assignment = sorted(tp.partition for tp in consumer.assignment())
                self.member_id = consumer.memberid()
            consumer.close()
        except BaseException as e:  # noqa: BLE001 - reported by stop()
            self.error = e

    def stop(self) -> None:
        self.stopping.set()
        self.join(30)
        assert not self.is_alive(), f"{self.name} did not stop"
        assert self.error is None, self.error


def balanced(members: list[Member]) -> bool:
    owned = sorted(p for m in members for p in m.assignment)
    return owned == list(range(PARTITIONS)) and all(len(m.assignment) == PARTITIONS // len(members) for m in members)


def group_view(bootstrap: str) -> tuple[int, dict[str, tuple[int, tuple[int, ...]]]] | None:
    """``(group epoch, {member id: (member epoch, partitions)})`` from ConsumerGroupDescribe,
    or None while no coordinator answers for the group."""
    admin = AdminClient(bootstrap, request_timeout_ms=5000)
    try:
        description = admin.describe_consumer_groups([GROUP])[GROUP]
    except Exception:  # noqa: BLE001 - the coordinator is moving; asked again
        return None
    finally:
        admin.close()
    if description is None:
        return None
    return description.group_epoch, {m.member_id: (m.member_epoch, tuple(sorted(tp.partition for tp in m.assignment)))
                                     for m in description.members}


def committed(bootstrap: str) -> dict[int, int]:
    admin = ConfluentAdmin({"bootstrap.servers": bootstrap, "log_level": 0})
    request = ConsumerGroupTopicPartitions(GROUP, [TopicPartition(TOPIC, p) for p in range(PARTITIONS)])
    result = admin.list_consumer_group_offsets([request])[GROUP].result(15)
    return {tp.partition: tp.offset for tp in result.topic_partitions}


def coordinator_of(bootstrap: str) -> int:
    admin = ConfluentAdmin({"bootstrap.servers": bootstrap, "log_level": 0})
    return admin.describe_consumer_groups([GROUP])[GROUP].result(15).coordinator.id


def stable_view(bootstrap: str, members: list[Member]):
    """The group's view once every member is at the group epoch with its share of partitions,
    and the consumers' own member ids and assignments agree with it."""
    view = group_view(bootstrap)
    if view is None:
        return None
    epoch, by_member = view
    mine = {m.member_id: tuple(m.assignment) for m in members}
    if set(by_member) != set(mine) or any(e != epoch for e, _ in by_member.values()):
        return None
    if any(parts != mine[mid] for mid, (_, parts) in by_member.items()):
        return None
    return view


def test_consumer_group_survives_coordinator_kill(make_cluster):
    cluster = make_cluster(PROPS).start(BROKERS)
    create_topic(cluster.bootstrap, TOPIC, PARTITIONS, 3)
    cluster.wait_topic_ready(TOPIC, PARTITIONS)
    ownership = Ownership()
    members = [Member(cluster.bootstrap, f"m{i}", ownership) for i in range(3)]
    producer = VerifyingProducer(cluster.bootstrap, TOPIC, PARTITIONS, rate=120).start()
    try:
        for m in members:
            m.start()
        wait_until(lambda: balanced(members) and all(m.seen for m in members), 40, "three balanced members consuming")
        cluster.wait_for_isr(OFFSETS, 0, BROKERS)
        coordinator = cluster.leader(OFFSETS, 0)
        assert coordinator_of(cluster.bootstrap) == coordinator
        before = wait_until(lambda: stable_view(cluster.bootstrap, members), 20, "a stable group")
        committed_before = committed(cluster.bootstrap)

        acked_at_kill = producer.acked_count()
        cluster[coordinator].kill()
        successor = cluster.wait_for_leader(OFFSETS, 0, other_than=coordinator,
                                            timeout=SESSION_TIMEOUT_MS / 1000 + 15)
        live = ",".join(cluster[b].bootstrap for b in cluster.live_ids())
        wait_until(lambda: coordinator_of(live) == successor, 20, f"broker {successor} to coordinate the group")
        producer.wait_acked(acked_at_kill + 200)
        after = wait_until(lambda: stable_view(live, members), 30, "a stable group on the new coordinator")
        committed_after = committed(live)
    finally:
        producer.stop()
    try:
        acked = {p: dict(v) for p, v in producer.acked.items()}  # offset -> sequence
        assert producer.failed == []

        def consumed_all() -> bool:
            seen = {(p, o) for m in members for p, o, _ in m.seen}
            return all((p, o) in seen for p, offsets in acked.items() for o in offsets)

        wait_until(consumed_all, 40, "every acknowledged record consumed")
        ends = {p: max(offsets) + 1 for p, offsets in acked.items()}
        wait_until(lambda: committed(live) == ends, 20, f"offsets committed up to the end {ends}")
    finally:
        for m in members:
            m.stop()

    assert after == before, "the new coordinator does not know the members as they were"
    assert ownership.lost == [], "members were told they lost their partitions"
    assert ownership.violations == [], "a partition was owned by two members at once"
    for p, offset in committed_before.items():
        assert committed_after[p] >= offset, f"partition {p}: committed {offset} before the kill, " \
                                             f"{committed_after[p]} after"
    values = {(p, o): v for m in members for p, o, v in m.seen}
    for p, by_offset in acked.items():
        for offset, seq in by_offset.items():
            assert values[(p, offset)] == f"{p}:{seq}".encode()

