"""A batch's max timestamp is its records' (Kafka's LogValidator sets it on append), and
ListOffsets -3 (MAX_TIMESTAMP) answers the record holding it (Kafka 3.8, KAFKA-16310).

sarama 1.22 writes -1 as the max timestamp; the broker stores the largest record timestamp
instead (header and CRC patched, records verbatim), so timestamp lookups and producer
expiry see the records' times.
"""

from __future__ import annotations

import time

import pytest
from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient, OffsetSpec

from odradek.protocol import codec
from odradek.protocol.generated.error_codes import ErrorCode
from odradek.records import batch as rb
from odradek.records.builder import BatchBuilder, BatchSpec
from odradek.records.reader import iter_batches
from odradek.storage.append_info import LogAppendInfo
from tests.records import bad_batches as bad
from tests.server.clients import unique_topic
from tests.server.group_clients import create_topic
from tests.server.wire import WireClient, fetch_body, produce_body
from tests.server.wire_fixtures import module_broker, wire_client  # noqa: F401 (the fixtures)

PATHS = {"fast": {}, "generic": {"flush.messages": 10**9}}
MAX_TIMESTAMP = -3


def _list_offsets(wire: WireClient, topic: str, timestamp: int) -> tuple[int, int]:
    m = codec.module("ListOffsetsRequest")
    body = m.MESSAGE(replica_id=-1, isolation_level=0, topics=[m.ListOffsetsTopic(
        name=topic, partitions=[m.ListOffsetsPartition(partition_index=0, timestamp=timestamp)])])
    _, response = wire.request("ListOffsets", 7, body)
    p = response.topics[0].partitions[0]
    assert p.error_code == 0
    return p.timestamp, p.offset


def _stored_batches(wire: WireClient, topic: str):
    _, response = wire.request("Fetch", 11, fetch_body(topic, 0, 0))
    return list(iter_batches(response.responses[0].partitions[0].records))


@pytest.mark.parametrize("codec_id", [0, 1])
@pytest.mark.parametrize("path", PATHS)
def test_max_timestamp_minus_one_is_stored_as_the_records_largest(broker, wire, path, codec_id):
    topic = unique_topic(f"max-ts-{path}")
    create_topic(broker.bootstrap, topic, 1, **PATHS[path])
    t = int(time.time() * 1000) - 60_000
    sent = bad.max_timestamp_unset([t + 5, t + 50, t + 20], codec=codec_id)
    _, response = wire.request("Produce", 9, produce_body(topic, 0, sent))
    assert response.responses[0].partition_responses[0].error_code == 0
    (stored,) = _stored_batches(wire, topic)  # CRC checked by iter_batches
    assert stored.header.max_timestamp == t + 50
    assert bytes(stored.buffer[rb.BATCH_HEADER_SIZE:]) == sent[rb.BATCH_HEADER_SIZE:]  # records verbatim
    assert _list_offsets(wire, topic, t) == (t + 5, 0)  # a time before the first record
    assert _list_offsets(wire, topic, t + 21) == (t + 50, 1)
    assert _list_offsets(wire, topic, MAX_TIMESTAMP) == (t + 50, 1)


def test_a_correct_max_timestamp_is_left_as_sent(broker, wire):
    topic = unique_topic("max-ts-kept")
    create_topic(broker.bootstrap, topic, 1)
    sent = bad.good(3)
    wire.request("Produce", 9, produce_body(topic, 0, sent))
    (stored,) = _stored_batches(wire, topic)
    assert bytes(stored.buffer[rb.ATTRIBUTES_OFFSET - 4:]) == sent[rb.ATTRIBUTES_OFFSET - 4:]


def test_idempotent_producer_state_uses_the_records_time(broker, wire):
    topic = unique_topic("max-ts-idempotent")
    create_topic(broker.bootstrap, topic, 1)
    now = int(time.time() * 1000)
    builder = BatchBuilder(BatchSpec(producer_id=4242, producer_epoch=0, base_sequence=0))
    builder.append(now, b"k", b"v")
    sent = bad.patched(builder.build(), bad.MAX_TIMESTAMP, ">q", -1)
    _, response = wire.request("Produce", 9, produce_body(topic, 0, sent))
    assert response.responses[0].partition_responses[0].error_code == 0
    state = broker.broker.replica_manager.get(topic, 0).producer_state
    # Silent for an hour only an hour after its record: kept now (with -1 it was gone at once).
    assert state.expire(now + 1000, 3_600_000) == []
    assert state.expire(now + 3_600_000, 3_600_000) == [4242]


def test_confluent_kafka_max_timestamp_and_offsets_for_times(broker, wire):
    topic = unique_topic("max-ts-confluent")
    create_topic(broker.bootstrap, topic, 1)
    t = int(time.time() * 1000) - 60_000
    wire.request("Produce", 9, produce_body(topic, 0, bad.max_timestamp_unset([t, t + 900, t + 300, t + 400])))
    wire.request("Produce", 9, produce_body(topic, 0, bad.good(2, timestamps=[t + 500, t + 600])))
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    tp = TopicPartition(topic, 0)
    found = admin.list_offsets({tp: OffsetSpec.max_timestamp()})[tp].result(20)
    assert (found.offset, found.timestamp) == (1, t + 900)
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": unique_topic("g")})
    try:
        (before,) = consumer.offsets_for_times([TopicPartition(topic, 0, t - 1000)], timeout=20)
        (middle,) = consumer.offsets_for_times([TopicPartition(topic, 0, t + 450)], timeout=20)
    finally:
        consumer.close()
    assert (before.offset, middle.offset) == (0, 1)


def test_a_lookup_over_a_stored_corrupt_batch_is_its_partitions_error(broker, wire):
    """A batch stored before records were validated (here written to the log directly) makes
    a timestamp lookup answer CORRUPT_MESSAGE for its partition; the connection and the other
    partition are served."""
    topic = unique_topic("max-ts-corrupt")
    create_topic(broker.bootstrap, topic, 2)
    t = int(time.time() * 1000) - 60_000
    garbage = bytearray(bad.patched(bad.garbage_gzip(), bad.MAX_TIMESTAMP, ">q", t + 10))
    broker.broker.replica_manager.get(topic, 0).log.append(garbage, LogAppendInfo.from_batches(garbage))
    wire.request("Produce", 9, produce_body(topic, 1, bad.good(2, timestamps=[t, t + 10])))
    m = codec.module("ListOffsetsRequest")
    got = []
    for ts in (t, MAX_TIMESTAMP):  # one request each: a partition asked twice is INVALID_REQUEST
        body = m.MESSAGE(replica_id=-1, isolation_level=0, topics=[m.ListOffsetsTopic(name=topic, partitions=[
            m.ListOffsetsPartition(partition_index=p, timestamp=ts) for p in (0, 1)])])
        _, response = wire.request("ListOffsets", 7, body)
        got += [(p.partition_index, p.error_code, p.offset) for p in response.topics[0].partitions]
    assert got == [(0, ErrorCode.CORRUPT_MESSAGE, -1), (1, 0, 0), (0, ErrorCode.CORRUPT_MESSAGE, -1), (1, 0, 1)]
