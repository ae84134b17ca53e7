"""Produced batches refused as Kafka's LogValidator refuses them, on both produce paths.

Each bad batch (``tests/records/bad_batches.py``: valid CRC, only the checked thing wrong) is
sent in raw Produce frames beside a good batch for another partition of the same request.
The bad partition gets its error (and KIP-467 record errors from v8), nothing of it is
stored, the good one is appended, and consumers keep reading. "fast" topics keep batches as
produced (the produce fast path takes them, ``records/_log_validator.c``); "generic" ones
set ``flush.messages``, which sends every request down the generic path; "recompressing" ones
rewrite batches into lz4 there, after the records were checked.
"""

from __future__ import annotations

import threading

import pytest
from confluent_kafka import Producer
from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.errors import InvalidRecordError as KafkaPythonInvalidRecord

from odradek.protocol import codec
from odradek.protocol.generated.error_codes import ErrorCode
from odradek.records.builder import BatchBuilder, BatchSpec
from odradek.records.reader import iter_batches
from odradek.replication.partition import Partition
from tests.records import bad_batches as bad
from tests.server.clients import unique_topic
from tests.server.group_clients import create_topic
from tests.server.wire import WireClient, fetch_body
from tests.server.wire_fixtures import module_broker, wire_client  # noqa: F401 (the fixtures)

PATHS = {"fast": {}, "generic": {"flush.messages": 10**9}, "recompressing": {"compression.type": "lz4"}}
CASES = {
    # case: (batch, error, record errors' batch indexes)
    "garbage-gzip": (bad.garbage_gzip, ErrorCode.CORRUPT_MESSAGE, []),
    "garbage-snappy": (bad.garbage_snappy, ErrorCode.CORRUPT_MESSAGE, []),
    "codec-7": (bad.codec_7, ErrorCode.UNSUPPORTED_COMPRESSION_TYPE, []),
    "broken-framing": (bad.broken_framing, ErrorCode.INVALID_RECORD, [1]),
    "count-mismatch": (bad.count_mismatch, ErrorCode.INVALID_RECORD, []),
    "offset-delta": (bad.wrong_offset_delta, ErrorCode.INVALID_RECORD, [1]),
    # max.message.bytes 100000 below: records may decompress to 3.2 MB at most.
    "gzip-bomb": (lambda: bad.gzip_bomb(8 << 20), ErrorCode.INVALID_RECORD, []),
}


def _topic(broker, path: str, **configs) -> str:
    name = unique_topic(f"validation-{path}")
    create_topic(broker.bootstrap, name, 2, **PATHS[path], **configs)
    return name


def _body(topic: str, parts: dict[int, bytes], acks: int = 1):
    m = codec.module("ProduceRequest")
    return m.MESSAGE(acks=acks, timeout_ms=5000, topic_data=[m.TopicProduceData(
        name=topic, partition_data=[m.PartitionProduceData(index=p, records=r) for p, r in parts.items()])])


def _produce(wire: WireClient, topic: str, parts: dict[int, bytes], version: int = 9) -> dict:
    _, response = wire.request("Produce", version, _body(topic, parts))
    return {p.index: p for t in response.responses for p in t.partition_responses}


def _stored(wire: WireClient, topic: str, partition: int) -> list:
    """The batches a consumer fetching from offset 0 gets, decoded (each record checked)."""
    _, response = wire.request("Fetch", 11, fetch_body(topic, partition, 0))
    data = response.responses[0].partitions[0]
    assert data.error_code == 0
    return [(b.base_offset, b.records()) for b in iter_batches(data.records or b"")]


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("case", CASES)
def test_refused_alone_and_nothing_stored(broker, wire, path, case):
    make, error, record_indexes = CASES[case]
    topic = _topic(broker, path, **{"max.message.bytes": 100000})
    got = _produce(wire, topic, {0: make(), 1: bad.good(3)})
    assert (got[0].error_code, got[0].base_offset) == (error, -1), got[0]
    assert got[0].error_message
    assert [e.batch_index for e in got[0].record_errors] == record_indexes
    assert (got[1].error_code, got[1].base_offset) == (0, 0)
    assert _stored(wire, topic, 0) == []
    assert [len(records) for _, records in _stored(wire, topic, 1)] == [3]
    # The partition takes good batches after the bad one.
    assert _produce(wire, topic, {0: bad.good(2)})[0].base_offset == 0


def test_record_errors_only_from_v8(broker, wire):
    topic = _topic(broker, "fast")
    for version, expected in ((7, []), (8, [1])):
        got = _produce(wire, topic, {0: bad.broken_framing()}, version)[0]
        assert got.error_code == ErrorCode.INVALID_RECORD
        assert [e.batch_index for e in got.record_errors] == expected


@pytest.mark.parametrize("path", PATHS)
def test_consumers_read_past_every_refused_batch(broker, wire, path):
    topic = _topic(broker, path, **{"max.message.bytes": 100000})
    sent = 0
    for make, _, _ in CASES.values():
        _produce(wire, topic, {0: make()})
        assert _produce(wire, topic, {0: bad.good(2)})[0].error_code == 0
        sent += 2
    consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap, auto_offset_reset="earliest",
                             consumer_timeout_ms=5000, enable_auto_commit=False)
    try:
        consumer.assign([TopicPartition(topic, 0)])
        values = [r.value for r in consumer]
    finally:
        consumer.close()
    assert values == [b"value0", b"value1"] * (sent // 2)


def test_large_records_are_checked_off_the_event_loop_in_order(broker, wire, monkeypatch):
    """Records beyond what the loop decompresses (2 MiB) are checked on a worker thread; an
    append pipelined behind on the same partition keeps its place."""
    threads = []
    original = Partition.check_records_off_loop

    def spy(self, records):
        threads.append(threading.current_thread().name)
        return original(self, records)

    monkeypatch.setattr(Partition, "check_records_off_loop", spy)
    topic = _topic(broker, "fast", **{"max.message.bytes": 100000})
    builder = BatchBuilder(BatchSpec(compression=1))
    for i in range(250):
        builder.append(bad.NOW, b"k", bytes(10_000))  # 2.5 MB of records, ~3 KB of gzip
    large = builder.build()
    wire.send_raw(wire.frame("Produce", 9, _body(topic, {0: large})))
    wire.send_raw(wire.frame("Produce", 9, _body(topic, {0: bad.good(2)})))
    first = wire.response("Produce", 9)[1].responses[0].partition_responses[0]
    second = wire.response("Produce", 9)[1].responses[0].partition_responses[0]
    assert (first.error_code, first.base_offset, second.error_code, second.base_offset) == (0, 0, 0, 250)
    assert threads and all(name.startswith("odradek-record-check") for name in threads)
    assert [(base, len(records)) for base, records in _stored(wire, topic, 0)] == [(0, 250), (250, 2)]


# --- compacted topics need keys ------------------------------------------------------------------
@pytest.mark.parametrize("path", PATHS)
def test_compacted_topic_refuses_records_without_key_raw(broker, wire, path):
    topic = _topic(broker, path, **{"cleanup.policy": "compact"})
    got = _produce(wire, topic, {0: bad.unkeyed(4, keyed_at=(1,)), 1: bad.good(2)})
    assert (got[0].error_code, got[0].base_offset) == (ErrorCode.INVALID_RECORD, -1)
    assert [e.batch_index for e in got[0].record_errors] == [0, 2, 3]
    message = f"Compacted topic cannot accept message without key in topic partition {topic}-0."
    assert {e.batch_index_error_message for e in got[0].record_errors} == {message}
    assert got[0].error_message == message
    assert got[1].error_code == 0
    assert _stored(wire, topic, 0) == []


def test_compacted_topic_refuses_kafka_python_without_key(broker):
    topic = _topic(broker, "fast", **{"cleanup.policy": "compact"})
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap, retries=0)
    try:
        with pytest.raises(KafkaPythonInvalidRecord):
            producer.send(topic, value=b"no key", partition=0).get(20)
        assert producer.send(topic, key=b"k", value=b"keyed", partition=0).get(20).offset == 0
    finally:
        producer.close()


def test_compacted_topic_refuses_confluent_kafka_without_key(broker):
    topic = _topic(broker, "fast", **{"cleanup.policy": "compact"})
    reports = []
    producer = Producer({"bootstrap.servers": broker.bootstrap, "retries": 0})
    producer.produce(topic, value=b"no key", partition=0, on_delivery=lambda err, msg: reports.append(err))
    producer.produce(topic, key=b"k", value=b"keyed", partition=1, on_delivery=lambda err, msg: reports.append(err))
    assert producer.flush(20) == 0
    assert sorted(str(e and e.name()) for e in reports) == ["INVALID_RECORD", "None"]
