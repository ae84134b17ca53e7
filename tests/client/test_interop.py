"""odradek's client next to kafka-python and confluent-kafka (librdkafka) on one broker:
the same keys land in the same partitions, and each reads what the others wrote (keys,
values, headers, timestamps, offsets). Consumers use no group: kafka-python with
``group_id=None``, confluent-kafka with ``assign()``."""

from __future__ import annotations

import time

from confluent_kafka import OFFSET_BEGINNING
from confluent_kafka import Consumer as ConfluentConsumer
from confluent_kafka import Producer as ConfluentProducer
from confluent_kafka import TopicPartition as ConfluentTopicPartition
from kafka import KafkaConsumer, KafkaProducer
from kafka import TopicPartition as KafkaTopicPartition

from odradek.client import AsyncProducer
from odradek.client.partitioner import key_partition
from tests.client.helpers import create_topic, read_all, run

PARTITIONS = 8
T0 = 1_700_000_000_000


def sample(n: int, null_header: bytes | None = None):
    """``(key, value, headers, timestamp)`` rows: binary, empty and null values, repeated
    header keys, null header values (kafka-python cannot send those: pass ``b""``)."""
    rows = []
    for i in range(n):
        value = [b"value-%d" % i, b"", bytes(range(256)), None][i % 4] if i % 5 else b"v%d" % i
        headers = (("seq", b"%d" % i), ("dup", b"1"), ("dup", null_header)) if i % 2 else ()
        rows.append((b"key-%d" % i, value, headers, T0 + i))
    return rows


def odradek_produce(bootstrap: str, topic: str, rows, **config) -> list:
    async def main():
        async with AsyncProducer(bootstrap, **config) as producer:
            futures = [producer.send(topic, v, key=k, headers=h, timestamp=ts) for k, v, h, ts in rows]
            await producer.flush()
            return [f.result().partition for f in futures]

    return run(main())


def confluent_produce(bootstrap: str, topic: str, rows) -> list:
    producer = ConfluentProducer({"bootstrap.servers": bootstrap, "partitioner": "murmur2_random",
                                  "linger.ms": 5, "compression.type": "lz4"})
    placed = [None] * len(rows)

    def delivered(index):
        def callback(err, msg):
            assert err is None, err
            placed[index] = msg.partition()
        return callback

    for i, (k, v, h, ts) in enumerate(rows):
        producer.produce(topic, value=v, key=k, headers=list(h), timestamp=ts, on_delivery=delivered(i))
    assert producer.flush(30) == 0
    return placed


def kafka_python_produce(bootstrap: str, topic: str, rows) -> list:
    producer = KafkaProducer(bootstrap_servers=bootstrap, linger_ms=5, compression_type="gzip")
    try:
        futures = [producer.send(topic, value=v, key=k, headers=list(h), timestamp_ms=ts) for k, v, h, ts in rows]
        producer.flush(30)
        return [f.get(30).partition for f in futures]
    finally:
        producer.close(5)


def kafka_python_read(bootstrap: str, topic: str, count: int) -> dict:
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id=None, enable_auto_commit=False)
    try:
        tps = [KafkaTopicPartition(topic, p) for p in range(PARTITIONS)]
        consumer.assign(tps)
        consumer.seek_to_beginning(*tps)
        return _collect(count, lambda: [
            (m.partition, m.offset, m.key, m.value, tuple(m.headers), m.timestamp)
            for batch in consumer.poll(timeout_ms=200).values() for m in batch])
    finally:
        consumer.close()


def confluent_read(bootstrap: str, topic: str, count: int) -> dict:
    consumer = ConfluentConsumer({"bootstrap.servers": bootstrap, "group.id": "unused-" + topic,
                                  "enable.auto.commit": False})
    try:
        consumer.assign([ConfluentTopicPartition(topic, p, OFFSET_BEGINNING) for p in range(PARTITIONS)])

        def batch():
            out = []
            for m in consumer.consume(num_messages=1000, timeout=0.2):
                if m.error() is None:
                    out.append((m.partition(), m.offset(), m.key(), m.value(), tuple(m.headers() or ()),
                                m.timestamp()[1]))
            return out

        return _collect(count, batch)
    finally:
        consumer.close()


def _collect(count: int, read_some) -> dict:
    """``{(partition, offset): (key, value, headers, timestamp)}`` once ``count`` are read."""
    out = {}
    deadline = time.monotonic() + 30
    while len(out) < count and time.monotonic() < deadline:
        for partition, offset, *rest in read_some():
            out[(partition, offset)] = tuple(rest)
    assert len(out) == count, f"read {len(out)} of {count}"
    return out


def odradek_read(bootstrap: str, topic: str, count: int) -> dict:
    records = run(read_all(bootstrap, topic, count, partitions=PARTITIONS))
    return {(p, r.offset): (r.key, r.value, r.headers, r.timestamp) for p, rs in records.items() for r in rs}


def expected_placement(rows, placed) -> dict:
    """What each partition should hold, in order, given where each row was placed."""
    out = {}
    next_offset = {}
    for (k, v, h, ts), p in zip(rows, placed):
        offset = next_offset.get(p, 0)
        next_offset[p] = offset + 1
        out[(p, offset)] = (k, v, h, ts)
    return out


def test_keys_land_where_the_java_partitioner_puts_them(broker, topic_name):
    run(create_topic(broker.bootstrap, topic_name, PARTITIONS))
    rows = [(b"k%d-%s" % (i, b"x" * (i % 9)), b"v", (), T0) for i in range(300)] + [(b"", b"v", (), T0)]
    java = [key_partition(k, PARTITIONS) for k, *_ in rows]
    assert odradek_produce(broker.bootstrap, topic_name, rows) == java
    assert confluent_produce(broker.bootstrap, topic_name, rows) == java
    assert kafka_python_produce(broker.bootstrap, topic_name, rows) == java
    assert len(set(java)) == PARTITIONS


def test_kafka_python_and_confluent_read_what_odradek_wrote(broker, topic_name):
    run(create_topic(broker.bootstrap, topic_name, PARTITIONS))
    rows = sample(200)
    placed = odradek_produce(broker.bootstrap, topic_name, rows[:100])
    placed += odradek_produce(broker.bootstrap, topic_name, rows[100:], compression_type="zstd")
    want = expected_placement(rows, placed)
    assert kafka_python_read(broker.bootstrap, topic_name, 200) == want
    assert confluent_read(broker.bootstrap, topic_name, 200) == want


def test_odradek_reads_what_kafka_python_and_confluent_wrote(broker, topic_name):
    run(create_topic(broker.bootstrap, topic_name, PARTITIONS))
    rows = sample(120, null_header=b"")
    placed = confluent_produce(broker.bootstrap, topic_name, rows[:60])
    placed += kafka_python_produce(broker.bootstrap, topic_name, rows[60:])
    assert odradek_read(broker.bootstrap, topic_name, 120) == expected_placement(rows, placed)
