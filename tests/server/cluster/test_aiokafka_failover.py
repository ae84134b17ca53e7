"""aiokafka on a replicated cluster: acks=all sends go on through a leader's kill -9, and a
consumer group reads every acknowledged record, once the new leader serves the partition.

aiokafka (pure Python, asyncio) retries NOT_LEADER_OR_FOLLOWER and connection errors after
refreshing its metadata, as the Java client does; what it sees of the failover is Kafka's.
"""

from __future__ import annotations

import asyncio

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer

from tests.server.cluster.cluster_clients import create_topic

pytestmark = pytest.mark.timeout(150)

BROKERS = [1, 2, 3]
TOPIC = "clicks"


async def _produce(bootstrap: str, values: list[bytes]) -> list[int]:
    """Send ``values`` to partition 0, one at a time (acks=all, idempotent); their offsets."""
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, acks="all", enable_idempotence=True,
                                request_timeout_ms=30000, retry_backoff_ms=100)
    await producer.start()
    try:
        offsets = []
        for value in values:
            meta = await producer.send_and_wait(TOPIC, value, partition=0)
            offsets.append(meta.offset)
        return offsets
    finally:
        await producer.stop()


async def _consume_all(bootstrap: str, count: int) -> list[bytes]:
    consumer = AIOKafkaConsumer(TOPIC, bootstrap_servers=bootstrap, group_id="aio-readers",
                                auto_offset_reset="earliest", enable_auto_commit=False)
    await consumer.start()
    try:
        values: list[bytes] = []
        async with asyncio.timeout(60):
            while len(values) < count:
                batch = await consumer.getmany(timeout_ms=1000)
                for records in batch.values():
                    values += [r.value for r in records]
        return values
    finally:
        await consumer.stop()


def test_acks_all_sends_and_a_group_read_survive_a_leader_kill(make_cluster):
    cluster = make_cluster({"offsets.topic.num.partitions": "1", "offsets.topic.replication.factor": "3"}).start(BROKERS)
    create_topic(cluster.bootstrap, TOPIC, 1, 3, {"min.insync.replicas": "2"})
    cluster.wait_topic_ready(TOPIC, 1)
    before = [b"before-%d" % i for i in range(50)]
    after = [b"after-%d" % i for i in range(50)]
    assert asyncio.run(_produce(cluster.bootstrap, before)) == list(range(50))

    leader = cluster.leader(TOPIC, 0)
    cluster[leader].kill()
    cluster.wait_for_leader(TOPIC, 0, other_than=leader)
    survivors = ",".join(cluster[b].bootstrap for b in BROKERS if b != leader)
    assert asyncio.run(_produce(survivors, after)) == list(range(50, 100))

    assert asyncio.run(_consume_all(survivors, 100)) == before + after
    cluster.restart(leader)
    cluster.wait_for_isr(TOPIC, 0, BROKERS)
    cluster.wait_replicas_identical(TOPIC, 0)
