"""A consumer group's committed offsets survive the failure of its coordinator.

The coordinator of a group is the leader of its ``__consumer_offsets`` partition (one partition
here, so every group shares it; three replicas). confluent-kafka commits offsets; the
coordinator's broker is killed; the controller makes another replica leader, whose broker
loads the group from its replica of the partition and becomes the coordinator. A kafka-python
consumer of the same group then finds the committed offsets and resumes exactly there.
"""

from __future__ import annotations

import time

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient
from kafka import KafkaConsumer
from kafka import TopicPartition as KpTopicPartition

from tests.server.cluster.cluster_clients import create_topic
from tests.server.cluster.harness import SESSION_TIMEOUT_MS, wait_until

pytestmark = pytest.mark.timeout(150)

BROKERS = [1, 2, 3]
TOPIC = "orders"
GROUP = "billing"
OFFSETS = "__consumer_offsets"


def coordinator_of(bootstrap: str, group: str) -> int:
    client = AdminClient({"bootstrap.servers": bootstrap})
    [future] = client.describe_consumer_groups([group]).values()
    return future.result(15).coordinator.id


def test_committed_offsets_survive_coordinator_failover(make_cluster):
    cluster = make_cluster({"offsets.topic.num.partitions": "1", "offsets.topic.replication.factor": "3"}).start(BROKERS)
    create_topic(cluster.bootstrap, TOPIC, 2, 3)
    cluster.wait_topic_ready(TOPIC, 2)
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all"})
    for i in range(60):
        producer.produce(TOPIC, value=b"order-%d" % i, partition=i % 2)
    assert producer.flush(30) == 0

    consumer = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": GROUP, "enable.auto.commit": False,
                         "auto.offset.reset": "earliest", "session.timeout.ms": 6000})
    consumer.subscribe([TOPIC])
    seen, partitions = 0, set()
    deadline = time.monotonic() + 30
    while seen < 25 or len(partitions) < 2:
        assert time.monotonic() < deadline, f"consumed {seen} records of {TOPIC} in 30 s"
        for msg in consumer.consume(5, 1.0):
            assert msg.error() is None, msg.error()
            seen += 1
            partitions.add(msg.partition())
    consumer.commit(asynchronous=False)
    committed = {tp.partition: tp.offset for tp in consumer.committed([TopicPartition(TOPIC, 0), TopicPartition(TOPIC, 1)],
                                                                      timeout=15)}
    consumer.close()
    assert sum(committed.values()) >= 25, committed
    for i in range(60, 80):  # so both partitions have records past the committed offsets
        producer.produce(TOPIC, value=b"order-%d" % i, partition=i % 2)
    assert producer.flush(30) == 0

    cluster.wait_for_isr(OFFSETS, 0, BROKERS, timeout=30)
    coordinator = cluster.leader(OFFSETS, 0)
    assert coordinator_of(cluster.bootstrap, GROUP) == coordinator

    cluster[coordinator].kill()
    successor = cluster.wait_for_leader(OFFSETS, 0, other_than=coordinator, timeout=SESSION_TIMEOUT_MS / 1000 + 10)
    wait_until(lambda: coordinator_of(cluster.bootstrap, GROUP) == successor, 20,
               f"FindCoordinator to name broker {successor}")

    live = ",".join(cluster[b].bootstrap for b in cluster.live_ids())
    resumed = KafkaConsumer(bootstrap_servers=live, group_id=GROUP, enable_auto_commit=False,
                            auto_offset_reset="earliest", consumer_timeout_ms=1000, request_timeout_ms=15000)
    try:
        tps = [KpTopicPartition(TOPIC, p) for p in (0, 1)]

        def fetch_committed():
            offsets = {tp.partition: resumed.committed(tp) for tp in tps}
            return offsets if None not in offsets.values() else None

        got = wait_until(fetch_committed, 20, "committed offsets")
        assert got == committed
        resumed.subscribe([TOPIC])
        first: dict[int, int] = {}
        deadline = time.monotonic() + 30
        while len(first) < 2:
            assert time.monotonic() < deadline, f"resumed consumer read only partitions {first} in 30 s"
            for tp, records in resumed.poll(timeout_ms=500).items():
                first.setdefault(tp.partition, records[0].offset)
        assert first == committed, "the resumed consumer did not start at the committed offsets"
    finally:
        resumed.close()
