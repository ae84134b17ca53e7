"""A KIP-932 share group survives the kill -9 of a partition leader that is also the share
coordinator, on a 3-broker cluster.

A share-partition's in-flight state lives on its partition's leader (``SharePartition``,
odradek/server/share/); what is acknowledged is written through the broker's Persister to the
share coordinator of the key ``"group:topic_id:partition"`` (the leader of its
``__share_group_state`` partition, odradek/coordinator/share/) before the member is answered.
When the leader dies, the new leader reads the persisted state (ReadShareGroupState at its
new leader epoch): acknowledged records stay acknowledged, records that were only acquired
are AVAILABLE again. When the share coordinator dies, the replica that takes over
``__share_group_state`` replays the ShareSnapshot/ShareUpdate records.

Layout: ``__share_group_state`` has one partition (RF 3, min ISR 2), its leader ``L`` is made
the preferred leader of ``jobs-0`` (RF 3, min.insync.replicas 2) while ``jobs-1`` is led by
another broker, so killing ``L`` at once moves the leader of ``jobs-0`` and the share
coordinator of both share-partitions (``jobs-1``'s leader stays and must write to the new
coordinator). group.share.record.lock.duration.ms is 3000.

Three confluent-kafka ``ShareConsumer``s (explicit acknowledgement: every record accepted,
then ``commit_sync``) read while an idempotent acks=all producer writes. The outcome must be:

- every record the producer had acknowledged is accepted (its acknowledgement confirmed by
  the acknowledgement commit callback) at least once, except one whose acceptance was in
  flight when the leader died: its answer is lost (a transport error), yet the leader may
  have written it to the share coordinator first, and then, as in Kafka, the record is
  ACKNOWLEDGED and never comes again; the start offsets below must pass it all the same;
- no record is delivered again once an acceptance of it was confirmed (Kafka: ACKNOWLEDGED is
  terminal); records only acquired may come again, with delivery counts that never go down
  (an acquisition is not persisted, so what the dead leader handed out comes again from the
  new one with delivery count 1, as in Kafka);
- the share group's start offsets (DescribeShareGroupOffsets at the group coordinator) reach
  the end of each partition: a share-partition writes the start offset as it stands once its
  write commits (SharePartition.persisted_view), on the new leader as on the old.

The run takes about 15 s (the ZooKeeper session of the killed broker ends after 4 s).
"""

from __future__ import annotations

import itertools
import threading
import time
import uuid

import pytest
from confluent_kafka import (
    OFFSET_BEGINNING, AcknowledgeType, Consumer, KafkaException, ShareConsumer, TopicPartition,
)
from confluent_kafka.admin import AdminClient as ConfluentAdmin
from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource, ResourceType

from odradek.client.admin_types import NewTopic
from odradek.client.sync_admin import AdminClient
from odradek.coordinator.share.share_coordinator_record import decode_record
from odradek.coordinator.share.share_partition_key import SHARE_GROUP_STATE_TOPIC, format_key
from odradek.metadata.layout import uuid_from_kafka
from odradek.protocol import codec
from tests.server.cluster.cluster_clients import VerifyingProducer
from tests.server.cluster.harness import SESSION_TIMEOUT_MS, wait_until
from tests.server.wire import WireClient

pytestmark = pytest.mark.timeout(150)

BROKERS = [1, 2, 3]
TOPIC = "jobs"
PARTITIONS = 2
GROUP = "share-failover"
PROPS = {
    "offsets.topic.num.partitions": "1",
    "offsets.topic.replication.factor": "3",
    "share.coordinator.state.topic.num.partitions": "1",
    "share.coordinator.state.topic.replication.factor": "3",
    "share.coordinator.state.topic.min.isr": "2",
    "group.share.record.lock.duration.ms": "3000",
    "group.share.heartbeat.interval.ms": "1000",
}
COORDINATOR_KEY_SHARE = 2  # FindCoordinator key type of a share-partition (KIP-932)


class Journal:
    """Every delivery and every confirmed acceptance, in one order (``seq``)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.seq = itertools.count()
        self.deliveries: list[tuple[int, int, int, int, str]] = []  # (seq, partition, offset, count, member)
        self.accepted: dict[tuple[int, int], int] = {}  # (partition, offset) -> seq of first confirmation
        self.failed_acks: list[str] = []
        self.unconfirmed: set[tuple[int, int]] = set()  # (partition, offset) of acceptances with no answer

    def delivered(self, member: str, m) -> None:
        with self.lock:
            self.deliveries.append((next(self.seq), m.partition(), m.offset(), m.delivery_count(), member))

    def committed(self, offsets, exception) -> None:
        """The acknowledgement commit callback: ``{TopicPartition: {offsets}}``, error or None."""
        with self.lock:
            if exception is not None:
                self.failed_acks.append(f"{exception}: {sorted((tp.partition, len(o)) for tp, o in offsets.items())}")
                self.unconfirmed.update((tp.partition, offset) for tp, acked in offsets.items() for offset in acked)
                return
            now = next(self.seq)
            for tp, acked in offsets.items():
                for offset in acked:
                    self.accepted.setdefault((tp.partition, offset), now)


class Member(threading.Thread):
    """A share consumer in its own thread: polls, accepts each record, commits synchronously."""

    def __init__(self, bootstrap: str, name: str, journal: Journal) -> None:
        super().__init__(name=name, daemon=True)
        self.config = {"bootstrap.servers": bootstrap, "group.id": GROUP, "share.acknowledgement.mode": "explicit",
                       "log_level": 0, "topic.metadata.refresh.interval.ms": 1000}
        self.journal = journal
        self.stopping = threading.Event()
        self.errors: list[str] = []
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            consumer = ShareConsumer(self.config)
            consumer.set_acknowledgement_commit_callback(self.journal.committed)
            consumer.subscribe([TOPIC])
            while not self.stopping.is_set():
                got = 0
                for m in consumer.poll(0.2):
                    if m.error() is not None:
                        self.errors.append(str(m.error()))
                        continue
                    self.journal.delivered(self.name, m)
                    consumer.acknowledge(m, AcknowledgeType.ACCEPT)
                    got += 1
                if got:
                    time.sleep(0.05)  # the work: records stay acquired meanwhile
                    try:
                        consumer.commit_sync(10)
                    except KafkaException as e:  # the leader moved: the records come again
                        self.errors.append(str(e))
            consumer.close()
        except BaseException as e:  # noqa: BLE001 - reported by stop()
            self.error = e

    def stop(self) -> None:
        self.stopping.set()
        self.join(30)
        assert not self.is_alive(), f"{self.name} did not stop"
        assert self.error is None, self.error


def find_coordinator(bootstrap: str, key: str, key_type: int) -> int | None:
    """FindCoordinator v4 for one key, asked of the first broker of ``bootstrap``: the node id,
    or None on an error."""
    m = codec.module("FindCoordinatorRequest")
    client = WireClient(bootstrap.split(",")[0], timeout=10)
    try:
        _, body = client.request("FindCoordinator", 4, m.MESSAGE(key_type=key_type, coordinator_keys=[key]))
    finally:
        client.close()
    (c,) = body.coordinators
    return c.node_id if c.error_code == 0 else None


def start_offsets(bootstraps: dict[int, str]) -> dict[int, int] | None:
    """The share group's start offset per partition (DescribeShareGroupOffsets v1 at the group
    coordinator), or None while no coordinator answers."""
    any_broker = next(iter(bootstraps.values()))
    try:
        node = find_coordinator(any_broker, GROUP, 0)
        if node not in bootstraps:
            return None
        m = codec.module("DescribeShareGroupOffsetsRequest")
        client = WireClient(bootstraps[node], timeout=10)
        try:
            _, body = client.request("DescribeShareGroupOffsets", 1, m.MESSAGE(groups=[
                m.DescribeShareGroupOffsetsRequestGroup(group_id=GROUP, topics=[
                    m.DescribeShareGroupOffsetsRequestTopic(topic_name=TOPIC, partitions=list(range(PARTITIONS)))])]))
        finally:
            client.close()
    except OSError:  # a connection to the killed broker or one moving its coordinators
        return None
    (group,) = body.groups
    if group.error_code != 0:
        return None
    return {p.partition_index: p.start_offset for t in group.topics for p in t.partitions if p.error_code == 0}


def missing(journal: Journal, acked: set[tuple[int, int]], members: list[Member]) -> str:
    """What a failure message says of the records never accepted."""
    with journal.lock:
        lost = sorted(acked - set(journal.accepted))
        delivered = {(p, o): (count, who) for _, p, o, count, who in journal.deliveries}
        failed = list(journal.failed_acks)
    return (f"{len(lost)} never accepted, first {[(k, delivered.get(k)) for k in lost[:10]]}, "
            f"last {lost[-3:]}; failed acknowledgements {failed[:5]}; "
            f"member errors {[m.errors[:3] for m in members]}")


def reached(seen: list, starts: dict[int, int] | None, ends: dict[int, int]) -> bool:
    seen.append(starts)
    return starts == ends


def state_records(bootstraps: dict[int, str]) -> str:
    """The ``__share_group_state`` records, decoded, for a failure message."""
    reader = Consumer({"bootstrap.servers": ",".join(bootstraps.values()), "group.id": f"r-{uuid.uuid4().hex[:6]}",
                       "enable.auto.commit": False, "log_level": 0})
    reader.assign([TopicPartition(SHARE_GROUP_STATE_TOPIC, 0, OFFSET_BEGINNING)])
    out = []
    try:
        for m in reader.consume(1000, 5):
            if m.error() is None:
                r = decode_record(m.key(), m.value())
                v = r.value
                batches = [(b.first_offset, b.last_offset, b.delivery_state, b.delivery_count)
                           for b in v.state_batches] if v is not None else None
                out.append((m.offset(), r.partition, type(v).__name__[5:9], getattr(v, "leader_epoch", None),
                            getattr(v, "start_offset", None), batches))
    finally:
        reader.close()
    return f"state records: {out}"


def set_earliest(bootstrap: str) -> None:
    """share.auto.offset.reset=earliest for the group (a GROUP config, KIP-932)."""
    admin = ConfluentAdmin({"bootstrap.servers": bootstrap, "log_level": 0})
    entry = ConfigEntry("share.auto.offset.reset", "earliest", incremental_operation=AlterConfigOpType.SET)
    resource = ConfigResource(ResourceType.GROUP, GROUP, incremental_configs=[entry])
    for future in admin.incremental_alter_configs([resource]).values():
        future.result(15)


def test_share_group_survives_leader_and_share_coordinator_kill(make_cluster):
    cluster = make_cluster(PROPS).start(BROKERS)
    # Any key makes the state topic (one partition: every key's coordinator is its leader).
    wait_until(lambda: find_coordinator(cluster.bootstrap, format_key(GROUP, uuid.uuid4(), 0), COORDINATOR_KEY_SHARE),
               30, "a share coordinator")
    cluster.wait_for_isr(SHARE_GROUP_STATE_TOPIC, 0, BROKERS)
    victim = cluster.leader(SHARE_GROUP_STATE_TOPIC, 0)
    others = [b for b in BROKERS if b != victim]
    admin = AdminClient(cluster.bootstrap)
    try:
        admin.create_topics([NewTopic(TOPIC, replica_assignment={0: [victim, *others], 1: [*others, victim]},
                                      configs={"min.insync.replicas": "2"})])
    finally:
        admin.close()
    cluster.wait_topic_ready(TOPIC, PARTITIONS)
    for p in range(PARTITIONS):
        cluster.wait_for_isr(TOPIC, p, BROKERS)
    assert [cluster.leader(TOPIC, p) for p in range(PARTITIONS)] == [victim, others[0]]
    set_earliest(cluster.bootstrap)
    topic_id = uuid_from_kafka(cluster.topic_id(TOPIC))

    journal = Journal()
    members = [Member(cluster.bootstrap, f"m{i}", journal) for i in range(3)]
    producer = VerifyingProducer(cluster.bootstrap, TOPIC, PARTITIONS, rate=100).start()
    try:
        for m in members:
            m.start()
        wait_until(lambda: {p for p, _ in journal.accepted} == set(range(PARTITIONS)) and len(journal.accepted) > 100,
                   40, "records of both partitions accepted")
        for p in range(PARTITIONS):
            assert find_coordinator(cluster.bootstrap, format_key(GROUP, topic_id, p), COORDINATOR_KEY_SHARE) == victim
        acked_at_kill = producer.acked_count()
        cluster[victim].kill()
        cluster.wait_for_leader(TOPIC, 0, other_than=victim, timeout=SESSION_TIMEOUT_MS / 1000 + 15)
        cluster.wait_for_leader(SHARE_GROUP_STATE_TOPIC, 0, other_than=victim, timeout=SESSION_TIMEOUT_MS / 1000 + 15)
        producer.wait_acked(acked_at_kill + 200)
    finally:
        producer.stop()
    live = {b: cluster[b].bootstrap for b in cluster.live_ids()}
    try:
        assert producer.failed == []
        acked = {(p, o) for p, v in producer.acked.items() for o, _ in v}
        ends = {p: max(o for _, o in producer.acked[p]) + 1 for p in range(PARTITIONS)}
        try:
            wait_until(lambda: acked - journal.unconfirmed <= set(journal.accepted), 40,
                       "every produced record accepted", interval=0.5)
        except AssertionError as e:
            raise AssertionError(f"{e}; {missing(journal, acked, members)}") from None
        seen: list = []
        try:
            wait_until(lambda: reached(seen, start_offsets(live), ends), 30,
                       f"the share group's start offsets at the end {ends}", interval=0.5)
        except AssertionError as e:
            raise AssertionError(f"{e}; last described: {seen[-1] if seen else None}; "
                                 f"{state_records(live)}") from None
    finally:
        for m in members:
            m.stop()

    with journal.lock:
        deliveries, accepted = list(journal.deliveries), dict(journal.accepted)
    again = [(p, o, count, who) for seq, p, o, count, who in deliveries
             if (p, o) in accepted and seq > accepted[(p, o)]]
    assert again == [], f"records delivered again after their acceptance was confirmed: {again[:10]}"
    counts: dict[tuple[int, int], list[int]] = {}
    for _, p, o, count, _ in deliveries:
        counts.setdefault((p, o), []).append(count)
    lowered = {k: v for k, v in counts.items() if v != sorted(v) or v[0] < 1}
    assert lowered == {}, f"delivery counts went down: {dict(itertools.islice(lowered.items(), 10))}"
