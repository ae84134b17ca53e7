"""Kafka's exactly-once recipes, run by real clients, for the transaction tests.

``confluent_transform`` and ``aiokafka_transform`` are the consume-transform-produce loop of
Kafka's documentation: a consumer in a group reads ``source`` with read_committed, a
transactional producer writes each record's value upper-cased to ``sink`` and adds the
consumer's positions to the same transaction (``send_offsets_to_transaction``), then commits.
Every ``abort_every``-th transaction is aborted instead and the consumer rewinds to where the
transaction began, so the aborted output must stay invisible and the records come again.

``committed_values`` reads a topic with each client's read_committed consumer until the log
end (as ``(partition, offset, value)``); ``all_values`` reads it read_uncommitted.
"""

from __future__ import annotations

import asyncio
import time

from confluent_kafka import Consumer, Producer, TopicPartition

from tests.server.clients import DEADLINE_S, read_from_beginning

LOOP_DEADLINE_S = 60.0


def transformed(value: bytes) -> bytes:
    return value.upper()


def confluent_transform(bootstrap: str, source: str, sink: str, group: str, transactional_id: str,
                        expected: int, *, abort_every: int = 0, max_batch: int = 25) -> int:
    """Run the loop until ``expected`` records were committed; return the transactions aborted."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False,
                         "auto.offset.reset": "earliest", "isolation.level": "read_committed",
                         "session.timeout.ms": 6000})
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": transactional_id, "linger.ms": 5})
    producer.init_transactions(30)
    consumer.subscribe([source])
    done = aborted = rounds = 0
    deadline = time.monotonic() + LOOP_DEADLINE_S
    try:
        while done < expected:
            assert time.monotonic() < deadline, f"committed {done} of {expected} records"
            msgs = [m for m in consumer.consume(max_batch, 1.0) if m.error() is None]
            if not msgs:
                continue
            rounds += 1
            producer.begin_transaction()
            for m in msgs:
                producer.produce(sink, key=m.key(), value=transformed(m.value()))
            producer.send_offsets_to_transaction(consumer.position(consumer.assignment()),
                                                 consumer.consumer_group_metadata(), 30)
            if abort_every and rounds % abort_every == 0:
                # abort_transaction purges what librdkafka has not sent yet: flush first so the
                # aborted records reach the log and read_committed has something to hide
                producer.flush(30)
                producer.abort_transaction(30)
                aborted += 1
                for tp, first in _first_offsets(msgs).items():
                    consumer.seek(TopicPartition(tp[0], tp[1], first))
            else:
                producer.commit_transaction(30)
                done += len(msgs)
    finally:
        consumer.close()
    return aborted


def _first_offsets(msgs) -> dict[tuple[str, int], int]:
    first: dict[tuple[str, int], int] = {}
    for m in msgs:
        first.setdefault((m.topic(), m.partition()), m.offset())
    return first


async def aiokafka_transform(bootstrap: str, source: str, sink: str, group: str, transactional_id: str,
                             expected: int, *, abort_every: int = 0, max_batch: int = 25) -> int:
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer

    consumer = AIOKafkaConsumer(source, bootstrap_servers=bootstrap, group_id=group, enable_auto_commit=False,
                                auto_offset_reset="earliest", isolation_level="read_committed",
                                session_timeout_ms=6000, heartbeat_interval_ms=1000)
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, transactional_id=transactional_id, linger_ms=5)
    await producer.start()
    await consumer.start()
    done = aborted = rounds = 0
    deadline = time.monotonic() + LOOP_DEADLINE_S
    try:
        while done < expected:
            assert time.monotonic() < deadline, f"committed {done} of {expected} records"
            batch = await consumer.getmany(timeout_ms=1000, max_records=max_batch)
            if not batch:
                continue
            rounds += 1
            await producer.begin_transaction()
            for msgs in batch.values():
                for m in msgs:
                    await producer.send(sink, key=m.key, value=transformed(m.value))
            await producer.send_offsets_to_transaction({tp: msgs[-1].offset + 1 for tp, msgs in batch.items()}, group)
            if abort_every and rounds % abort_every == 0:
                await producer.abort_transaction()
                aborted += 1
                for tp, msgs in batch.items():
                    consumer.seek(tp, msgs[0].offset)
            else:
                await producer.commit_transaction()
                done += sum(len(msgs) for msgs in batch.values())
    finally:
        await consumer.stop()
        await producer.stop()
    return aborted


# --- readers ----------------------------------------------------------------------------------
def confluent_values(bootstrap: str, topic: str, partitions: int, isolation: str = "read_committed") -> list:
    """Every record of ``topic`` librdkafka's consumer returns, reading until each partition's
    end (for read_committed the end is the last stable offset) is reached."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "txn-readers", "enable.auto.commit": False,
                         "enable.partition.eof": True, "isolation.level": isolation})
    try:
        consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
        out, at_end = [], set()
        deadline = time.monotonic() + DEADLINE_S
        while len(at_end) < partitions:
            assert time.monotonic() < deadline, f"{topic}: only partitions {at_end} reached their end"
            for m in consumer.consume(500, 0.5):
                if m.error() is None:
                    out.append((m.partition(), m.offset(), m.value()))
                elif m.error().code() == -191:  # _PARTITION_EOF
                    at_end.add(m.partition())
        return sorted(out)
    finally:
        consumer.close()


def kafka_python_values(bootstrap: str, topic: str, partitions: int, isolation: str = "read_committed") -> list:
    return read_from_beginning(bootstrap, topic, partitions, isolation)


def aiokafka_values(bootstrap: str, topic: str, partitions: int, isolation: str = "read_committed") -> list:
    return asyncio.run(_aiokafka_values(bootstrap, topic, partitions, isolation))


async def _aiokafka_values(bootstrap: str, topic: str, partitions: int, isolation: str) -> list:
    from aiokafka import AIOKafkaConsumer, TopicPartition as AioTopicPartition

    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, group_id=None, enable_auto_commit=False,
                                auto_offset_reset="earliest", isolation_level=isolation)
    await consumer.start()
    try:
        tps = [AioTopicPartition(topic, p) for p in range(partitions)]
        consumer.assign(tps)
        await consumer.seek_to_beginning(*tps)
        ends = await consumer.end_offsets(tps)  # the LSO under read_committed
        out = []
        deadline = time.monotonic() + DEADLINE_S
        while await _behind(consumer, tps, ends):
            assert time.monotonic() < deadline, f"{topic}: did not reach {ends}"
            for msgs in (await consumer.getmany(timeout_ms=200)).values():
                out.extend((m.partition, m.offset, m.value) for m in msgs)
        return sorted(out)
    finally:
        await consumer.stop()


async def _behind(consumer, tps, ends) -> bool:
    """Whether some partition's position is still short of its end offset."""
    for tp in tps:
        if await consumer.position(tp) < ends[tp]:
            return True
    return False


READERS = {"confluent-kafka": confluent_values, "kafka-python": kafka_python_values, "aiokafka": aiokafka_values}


def values_only(records: list) -> list[bytes]:
    return sorted(value for _, _, value in records)
