"""Real clients against a test cluster: topic admin, a verifying idempotent producer, readers.

``VerifyingProducer`` is confluent-kafka (librdkafka) with ``enable.idempotence`` and
``acks=all``, producing numbered values (``b"<partition>:<seq>"``, seq counting up from 0 per
partition) from a background thread at a modest rate. Every delivery report is kept: the
acknowledged ones as ``(offset, seq)`` per partition, the failed ones with their error.
``verify(bootstrap)`` then reads every partition from the start with a plain consumer and
asserts Kafka's guarantee for an idempotent acks=all producer: each acknowledged record is
present exactly once, at the offset it was acknowledged with, and every partition's values
(acknowledged or not) appear in strictly increasing sequence: no duplicate, no reordering.

``metadata_from(node)`` asks one particular broker (not "any broker", as client libraries do)
for Metadata, so a test can check what each broker tells clients.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections import defaultdict

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from odradek.protocol import codec
from tests.server.wire import WireClient

ADMIN_TIMEOUT_S = 30


def admin(bootstrap: str) -> AdminClient:
    return AdminClient({"bootstrap.servers": bootstrap, "socket.timeout.ms": 10000})


def create_topic(bootstrap: str, name: str, partitions: int, replication_factor: int,
                 config: dict[str, str] | None = None) -> None:
    """CreateTopics through confluent-kafka's AdminClient; raises the topic's error. (For a
    replica assignment use another client: confluent-kafka 2.16 refuses one.)"""
    topic = NewTopic(name, partitions, replication_factor, config=config or {})
    client = admin(bootstrap)  # referenced until the result: its futures fail once it is collected
    for future in client.create_topics([topic], operation_timeout=ADMIN_TIMEOUT_S).values():
        future.result(ADMIN_TIMEOUT_S + 5)


def delete_topic(bootstrap: str, name: str) -> None:
    client = admin(bootstrap)
    for future in client.delete_topics([name], operation_timeout=ADMIN_TIMEOUT_S).values():
        future.result(ADMIN_TIMEOUT_S + 5)


def metadata_from(bootstrap: str, topics: list[str] | None = None, version: int = 9):
    """One broker's MetadataResponse (``topics=None``: all topics), decoded."""
    m = codec.module("MetadataRequest")
    wanted = None if topics is None else [m.MetadataRequestTopic(name=t) for t in topics]
    client = WireClient(bootstrap, timeout=10)
    try:
        _, body = client.request("Metadata", version, m.MESSAGE(topics=wanted, allow_auto_topic_creation=False))
        return body
    finally:
        client.close()


def read_partition(bootstrap: str, topic: str, partition: int, timeout: float = 30) -> list[tuple[int, bytes]]:
    """Every record of the partition up to its high watermark, as ``(offset, value)``."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"reader-{uuid.uuid4().hex[:8]}",
                         "enable.auto.commit": False, "auto.offset.reset": "earliest",
                         "enable.partition.eof": True, "fetch.wait.max.ms": 100})
    try:
        tp = TopicPartition(topic, partition)
        _, high = consumer.get_watermark_offsets(tp, timeout=10)
        consumer.assign([TopicPartition(topic, partition, OFFSET_BEGINNING)])
        records: list[tuple[int, bytes]] = []
        deadline = time.monotonic() + timeout
        while (not records or records[-1][0] < high - 1) and high > 0:
            if time.monotonic() > deadline:
                raise AssertionError(f"read {len(records)} records of {topic}-{partition}, "
                                     f"high watermark {high}, in {timeout} s")
            for msg in consumer.consume(500, 0.5):
                if msg.error() is None:
                    records.append((msg.offset(), msg.value()))
                elif msg.error().code() != KafkaError._PARTITION_EOF:
                    raise AssertionError(f"reading {topic}-{partition}: {msg.error()}")
        return records
    finally:
        consumer.close()


class VerifyingProducer:
    """See the module docstring. Use as a context manager, or ``start()`` / ``stop()``."""

    def __init__(self, bootstrap: str, topic: str, partitions: int, rate: float = 200.0, **config) -> None:
        self.topic = topic
        self.partitions = partitions
        self.interval = 1.0 / rate
        self.producer = Producer({
            "bootstrap.servers": bootstrap,
            "enable.idempotence": True,
            "acks": "all",
            "linger.ms": 5,
            # Long enough to outlast any failover a test causes: a record fails only if the
            # cluster stays unavailable this long.
            "message.timeout.ms": 60000,
            "request.timeout.ms": 5000,
            "retry.backoff.ms": 100,
            "topic.metadata.refresh.interval.ms": 1000,
            **config,
        })
        self.sent: dict[int, int] = defaultdict(int)
        self.acked: dict[int, list[tuple[int, int]]] = defaultdict(list)
        self.failed: list[tuple[int, int, KafkaError]] = []
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    def __enter__(self) -> VerifyingProducer:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    def start(self) -> VerifyingProducer:
        self._thread = threading.Thread(target=self._run, name="verifying-producer", daemon=True)
        self._thread.start()
        return self

    def _run(self) -> None:
        next_at = time.monotonic()
        while not self._stop.is_set():
            for partition in range(self.partitions):
                self._send(partition)
            self.producer.poll(0)
            next_at += self.interval * self.partitions
            delay = next_at - time.monotonic()
            if delay > 0:
                self._stop.wait(delay)
            else:
                next_at = time.monotonic()

    def _send(self, partition: int) -> None:
        seq = self.sent[partition]

        def report(err, msg) -> None:
            with self._lock:
                if err is None:
                    self.acked[partition].append((msg.offset(), seq))
                else:
                    self.failed.append((partition, seq, err))

        while True:
            try:
                self.producer.produce(self.topic, value=f"{partition}:{seq}".encode(), partition=partition,
                                      on_delivery=report)
                break
            except BufferError:  # the local queue is full: serve callbacks and retry
                self.producer.poll(0.1)
        self.sent[partition] = seq + 1

    def acked_count(self) -> int:
        with self._lock:
            return sum(len(v) for v in self.acked.values())

    def wait_acked(self, more_than: int, timeout: float = 30) -> None:
        """Until more than ``more_than`` records are acknowledged (progress after a fault)."""
        deadline = time.monotonic() + timeout
        while self.acked_count() <= more_than:
            if time.monotonic() > deadline:
                raise AssertionError(f"no progress: {self.acked_count()} acknowledged (waited for > {more_than}) "
                                     f"in {timeout} s; failures so far: {self.failed[:5]}")
            time.sleep(0.05)

    def stop(self, flush_timeout: float = 70) -> None:
        """Stop producing and wait for every delivery report."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(10)
        remaining = self.producer.flush(flush_timeout)
        assert remaining == 0, f"{remaining} records still without a delivery report after {flush_timeout} s"

    def verify(self, bootstrap: str) -> dict[int, list[tuple[int, bytes]]]:
        """The guarantee (module docstring), partition by partition; returns what was read."""
        read = {}
        for partition in range(self.partitions):
            records = read_partition(bootstrap, self.topic, partition)
            read[partition] = records
            seqs = []
            for offset, value in records:
                p, _, seq = value.decode().partition(":")
                assert int(p) == partition, f"{self.topic}-{partition} offset {offset} holds {value!r}"
                seqs.append(int(seq))
            dupes = len(seqs) - len(set(seqs))
            assert dupes == 0, f"{self.topic}-{partition}: {dupes} duplicated records"
            out_of_order = [(a, b) for a, b in zip(seqs, seqs[1:]) if b <= a]
            assert not out_of_order, f"{self.topic}-{partition}: out of order {out_of_order[:5]}"
            by_offset = dict(records)
            for offset, seq in self.acked[partition]:
                value = by_offset.get(offset)
                assert value == f"{partition}:{seq}".encode(), (
                    f"{self.topic}-{partition}: record {seq} was acknowledged at offset {offset}, "
                    f"which holds {value!r} (read {len(records)} records)")
        return read
