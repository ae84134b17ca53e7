"""A corrupt batch header in a sealed segment: its partition answers an error, others are served.

Partition 0 of the topic spans several small segments; a batch header in its oldest (sealed)
segment is damaged on disk while the broker runs. Fetches and timestamp lookups that touch it
must answer CORRUPT_MESSAGE for partition 0 alone, keep the connection open, serve partition
1 in the same request, and log the repeated error a few times only.
"""

from __future__ import annotations

import logging
import struct
import time

import pytest

from odradek.protocol import codec
from odradek.protocol.generated.error_codes import ErrorCode
from odradek.records.reader import iter_batches
from tests.server.clients import wait_until
from tests.server.wire import WireClient, produce_body, simple_batch

TOPIC = "damaged"
BATCHES = 9  # per partition 0; ~250-byte batches in 600-byte segments: several sealed segments
T0 = 1_700_000_000_000  # batch i's records have timestamp T0 + i


def _create(client: WireClient) -> None:
    m = codec.module("CreateTopicsRequest")
    topic = m.CreatableTopic(name=TOPIC, num_partitions=2, replication_factor=1, configs=[
        m.CreatableTopicConfig(name="segment.bytes", value="600")])
    _, resp = client.request("CreateTopics", 5, m.MESSAGE(topics=[topic], timeout_ms=5000))
    assert resp.topics[0].error_code == ErrorCode.NONE, resp


def _produce(client: WireClient, partition: int, n: int) -> None:
    for i in range(n):
        values = [f"p{partition}-{i}-{j}".encode().ljust(40, b".") for j in range(4)]
        _, resp = client.request("Produce", 8, produce_body(TOPIC, partition, simple_batch(values, T0 + i)))
        assert resp.responses[0].partition_responses[0].error_code == ErrorCode.NONE


@pytest.fixture
def damaged(broker, tmp_path):
    """The broker with partition 0's oldest segment damaged (second batch's magic byte)."""
    client = WireClient(broker.bootstrap)
    _create(client)
    _produce(client, 0, BATCHES)
    _produce(client, 1, 3)
    segments = sorted((tmp_path / "data" / f"{TOPIC}-0").glob("*.log"))
    assert len(segments) >= 3, segments
    with open(segments[0], "r+b") as f:
        first_length = struct.unpack(">i", f.read(12)[8:12])[0]
        second = 12 + first_length
        f.seek(second + 16)  # magic
        f.write(b"\x07")
    yield broker, client
    client.close()


def _fetch_both(client: WireClient, version: int):
    m = codec.module("FetchRequest")
    body = m.MESSAGE(replica_id=-1, max_wait_ms=500, min_bytes=1, max_bytes=1 << 20, topics=[
        m.FetchTopic(topic=TOPIC, partitions=[
            m.FetchPartition(partition=p, fetch_offset=0, partition_max_bytes=1 << 20) for p in (0, 1)])])
    _, resp = client.request("Fetch", version, body)
    return {p.partition_index: p for p in resp.responses[0].partitions}


def _broker_lines(caplog, text: str) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.name.startswith("odradek") and text in r.getMessage()]


@pytest.mark.parametrize("version", [4, 12])
def test_fetch_answers_corrupt_message_for_the_damaged_partition_only(damaged, caplog, version):
    broker, client = damaged
    caplog.set_level(logging.WARNING)
    for _ in range(40):
        parts = _fetch_both(client, version)
        assert parts[0].error_code == ErrorCode.CORRUPT_MESSAGE
        assert parts[1].error_code == ErrorCode.NONE
        values = [r.value for b in iter_batches(parts[1].records) for r in b.records()]
        assert values[:4] == [f"p1-0-{j}".encode().ljust(40, b".") for j in range(4)]
    # 40 identical errors: the first is logged, the rest wait for the next interval.
    assert len(_broker_lines(caplog, f"{TOPIC}-0")) == 1
    assert not _broker_lines(caplog, "closing connection")


def test_timestamp_lookup_over_the_damaged_segment_answers_an_error(damaged):
    broker, client = damaged
    m = codec.module("ListOffsetsRequest")
    body = m.MESSAGE(replica_id=-1, isolation_level=0, topics=[m.ListOffsetsTopic(name=TOPIC, partitions=[
        m.ListOffsetsPartition(partition_index=p, timestamp=T0 + 1) for p in (0, 1)])])
    _, resp = client.request("ListOffsets", 7, body)
    parts = {p.partition_index: p for p in resp.topics[0].partitions}
    assert parts[0].error_code == ErrorCode.CORRUPT_MESSAGE
    assert parts[1].error_code == ErrorCode.NONE and parts[1].offset == 4
    assert not client.is_closed(timeout=0.2)


def test_kafka_python_reads_the_healthy_partition_and_reports_the_damaged_one(damaged):
    from kafka import KafkaConsumer, TopicPartition
    from kafka.errors import KafkaError

    broker, _ = damaged
    consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap, group_id=None, enable_auto_commit=False)
    errors: list[Exception] = []
    values: list[bytes] = []
    try:
        consumer.assign([TopicPartition(TOPIC, 0), TopicPartition(TOPIC, 1)])
        consumer.seek_to_beginning()
        deadline = time.monotonic() + 20
        while (len(values) < 12 or not errors) and time.monotonic() < deadline:
            try:
                for tp, items in consumer.poll(timeout_ms=200).items():
                    values.extend(m.value for m in items if tp.partition == 1)
            except KafkaError as e:
                errors.append(e)
    finally:
        consumer.close()
    assert len(values) == 12
    assert any("CorruptRecord" in type(e).__name__ for e in errors), errors


def test_confluent_kafka_reads_the_healthy_partition_and_reports_the_damaged_one(damaged):
    from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, TopicPartition

    broker, _ = damaged
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "no-group",
                         "enable.auto.commit": False, "fetch.error.backoff.ms": 50})
    values: list[bytes] = []
    errors: list = []
    try:
        consumer.assign([TopicPartition(TOPIC, p, OFFSET_BEGINNING) for p in (0, 1)])

        def progress():
            for m in consumer.consume(num_messages=100, timeout=0.2):
                if m.error() is None:
                    values.append(m.value())
                elif m.topic() == TOPIC:
                    errors.append((m.partition(), m.error()))
            return len(values) >= 12 and errors

        wait_until(progress, what="partition 1's records and partition 0's error")
    finally:
        consumer.close()
    assert {p for p, _ in errors} == {0}
    assert all(e.code() == KafkaError.INVALID_MSG for _, e in errors), errors  # Kafka's CORRUPT_MESSAGE


def test_a_crc_valid_batch_with_a_garbage_payload_answers_corrupt_message(broker, tmp_path):
    """A gzip batch whose payload is not gzip (its CRC recomputed, as a careless producer would
    send it): timestamp lookups and down-converting fetches that must open it answer
    CORRUPT_MESSAGE; a modern fetch gets the bytes as stored, as from Kafka."""
    from odradek.records import compression as codecs
    from odradek.records.batch import update_crc
    from odradek.records.builder import BatchSpec, build_batch
    from odradek.records.record import Record

    client = WireClient(broker.bootstrap)
    m = codec.module("CreateTopicsRequest")
    client.request("CreateTopics", 5, m.MESSAGE(timeout_ms=5000, topics=[
        m.CreatableTopic(name="garbled", num_partitions=1, replication_factor=1)]))
    for i in range(2):
        batch = build_batch([Record(j, T0 + i, None, b"v%d" % j) for j in range(4)],
                            BatchSpec(compression=codecs.GZIP))
        _, resp = client.request("Produce", 8, produce_body("garbled", 0, batch))
        assert resp.responses[0].partition_responses[0].error_code == ErrorCode.NONE
    [segment] = (tmp_path / "data" / "garbled-0").glob("*.log")
    data = bytearray(segment.read_bytes())
    second = 12 + struct.unpack(">i", data[8:12])[0]
    data[second + 61 :] = b"\x00" * (len(data) - second - 61)  # the second batch's gzip payload
    update_crc(data, second)
    segment.write_bytes(bytes(data))

    lo = codec.module("ListOffsetsRequest")
    lookup = lo.ListOffsetsPartition(partition_index=0, timestamp=T0 + 1)
    _, resp = client.request("ListOffsets", 7, lo.MESSAGE(replica_id=-1, isolation_level=0, topics=[
        lo.ListOffsetsTopic(name="garbled", partitions=[lookup])]))
    assert resp.topics[0].partitions[0].error_code == ErrorCode.CORRUPT_MESSAGE
    f = codec.module("FetchRequest")
    for version, expected in ((3, ErrorCode.CORRUPT_MESSAGE), (12, ErrorCode.NONE)):
        _, resp = client.request("Fetch", version, f.MESSAGE(
            replica_id=-1, max_wait_ms=0, min_bytes=0, max_bytes=1 << 20, topics=[f.FetchTopic(
                topic="garbled", partitions=[f.FetchPartition(partition=0, fetch_offset=4,
                                                              partition_max_bytes=1 << 20)])]))
        assert resp.responses[0].partitions[0].error_code == expected
    client.close()
