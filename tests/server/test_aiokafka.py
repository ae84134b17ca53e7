"""aiokafka against a real odradek broker.

One broker serves the module; each test runs its own event loop (``asyncio.run``) with its
own clients. Consumers use ``group_id=None`` and ``assign()``.
"""

from __future__ import annotations

import asyncio
import time

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka import errors as Errors
from aiokafka.admin import AIOKafkaAdminClient, NewPartitions, NewTopic, RecordsToDelete
from aiokafka.admin.config_resource import ConfigResource, ConfigResourceType

from odradek.testing.broker import InProcessBroker
from tests.server.clients import (
    CODECS, Rec, aiokafka_read, assert_all_clients_agree, assert_contiguous, assert_matches_sent,
    partition_state, sample_messages, unique_topic,
)

MAX_BYTES = 20_000
ONE_RECORD_OVERHEAD = 72  # batch bytes beyond the value; see test_kafka_python.py


@pytest.fixture(scope="module")
def ab(tmp_path_factory):
    with InProcessBroker(tmp_path_factory.mktemp("aiokafka") / "data", message_max_bytes=MAX_BYTES,
                         log_retention_check_interval_ms=100) as b:
        yield b


def run(coro):
    return asyncio.run(asyncio.wait_for(coro, 60))


class Admin:
    """``async with Admin(broker) as admin``."""

    def __init__(self, broker) -> None:
        self.client = AIOKafkaAdminClient(bootstrap_servers=broker.bootstrap)

    async def __aenter__(self) -> AIOKafkaAdminClient:
        await self.client.start()
        return self.client

    async def __aexit__(self, *exc) -> None:
        await self.client.close()


async def _create(ab, name, partitions=1, configs=None, validate_only=False) -> list:
    """Create a topic; returns the response's ``[(name, error code, message)]``."""
    async with Admin(ab) as admin:
        resp = await admin.create_topics([NewTopic(name, partitions, 1, topic_configs=configs or {})],
                                         validate_only=validate_only)
    return [tuple(e[:3]) for e in resp.topic_errors]


async def _created(ab, name, partitions=1, configs=None) -> str:
    assert await _create(ab, name, partitions, configs) == [(name, 0, None)]
    return name


async def _send_all(ab, topic, msgs, **config) -> list[tuple[int, int]]:
    producer = AIOKafkaProducer(bootstrap_servers=ab.bootstrap, linger_ms=5, **config)
    await producer.start()
    try:
        futures = [await producer.send(topic, key=m.key, value=m.value, headers=list(m.headers),
                                       timestamp_ms=m.timestamp) for m in msgs]
        # With acks=0 there is no response, and aiokafka resolves each send to None.
        return [(None, None) if md is None else (md.partition, md.offset) for md in await asyncio.gather(*futures)]
    finally:
        await producer.stop()


async def _consumer(ab, **config) -> AIOKafkaConsumer:
    consumer = AIOKafkaConsumer(bootstrap_servers=ab.bootstrap, group_id=None, enable_auto_commit=False, **config)
    await consumer.start()
    return consumer


async def _poll_until(consumer, n: int, deadline_s: float = 20) -> list:
    got = []
    deadline = time.monotonic() + deadline_s
    while len(got) < n and time.monotonic() < deadline:
        for items in (await consumer.getmany(timeout_ms=200)).values():
            got.extend(items)
    return got


# --- metadata and admin -----------------------------------------------------------------------
def test_metadata_and_admin(ab):
    async def scenario():
        topic = await _created(ab, unique_topic("admin"), 2, {"retention.ms": "3600000"})
        async with Admin(ab) as admin:
            cluster = await admin.describe_cluster()
            assert cluster["cluster_id"] == ab.broker.cluster_id
            assert cluster["controller_id"] == 1
            assert [(b["node_id"], b["host"], b["port"]) for b in cluster["brokers"]] == [(1, "127.0.0.1", ab.port)]
            assert topic in await admin.list_topics()
            [described] = await admin.describe_topics([topic])
            assert described["error_code"] == 0
            assert sorted(p["partition"] for p in described["partitions"]) == [0, 1]

            [resp] = await admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, topic)])
            [(code, _, _, _, entries)] = [tuple(r[:5]) for r in resp.resources]
            assert code == 0
            values = {e[0]: e[1] for e in entries}
            assert values["retention.ms"] == "3600000"
            assert values["max.message.bytes"] == str(MAX_BYTES)

            await admin.alter_configs([ConfigResource(ConfigResourceType.TOPIC, topic, {"retention.ms": "7200000"})])
            only = ConfigResource(ConfigResourceType.TOPIC, topic, {"retention.ms": None})
            [resp] = await admin.describe_configs([only])
            assert [(e[0], e[1]) for e in resp.resources[0][4]] == [("retention.ms", "7200000")]

            await admin.create_partitions({topic: NewPartitions(3)})
            [described] = await admin.describe_topics([topic])
            assert sorted(p["partition"] for p in described["partitions"]) == [0, 1, 2]
            with pytest.raises(Errors.InvalidPartitionsError):
                await admin.create_partitions({topic: NewPartitions(1)})

            resp = await admin.delete_topics([topic])
            assert [tuple(e[:2]) for e in resp.topic_error_codes] == [(topic, 0)]
            assert topic not in await admin.list_topics()
    run(scenario())


def test_admin_create_errors_and_validate_only(ab):
    async def scenario():
        name = unique_topic("validate")
        assert await _create(ab, name, validate_only=True) == [(name, 0, None)]
        async with Admin(ab) as admin:
            assert name not in await admin.list_topics()
        await _created(ab, name)
        [(_, code, _)] = await _create(ab, name)
        assert code == Errors.TopicAlreadyExistsError.errno
        [(_, code, _)] = await _create(ab, unique_topic("bad"), configs={"retention.ms": "x"})
        assert code == Errors.InvalidConfigurationError.errno
        [(_, code, _)] = await _create(ab, "bad name")
        assert code == Errors.InvalidTopicError.errno
    run(scenario())


# --- produce and consume ------------------------------------------------------------------------
@pytest.mark.parametrize("keyed", [True, False], ids=["keyed", "unkeyed"])
@pytest.mark.parametrize("codec", CODECS)
def test_produce_and_consume_every_codec(ab, codec, keyed):
    async def scenario():
        topic = await _created(ab, unique_topic(f"codec-{codec}"), 3)
        msgs = sample_messages(40, keyed=keyed, tag=codec, timestamp=int(time.time() * 1000) - 5000)
        placed = await _send_all(ab, topic, msgs, compression_type=None if codec == "none" else codec)
        recs = await aiokafka_read(ab.bootstrap, topic, len(msgs))
        assert_matches_sent(recs, msgs, placed, check_timestamps=True)
        assert_contiguous(recs)
    run(scenario())


def test_consume_from_latest_and_from_a_timestamp(ab):
    async def scenario():
        topic = await _created(ab, unique_topic("latest"))
        base = int(time.time() * 1000) - 60_000
        old = sample_messages(10, tag="old", timestamp=base)
        await _send_all(ab, topic, old)
        tp = TopicPartition(topic, 0)
        consumer = await _consumer(ab, auto_offset_reset="latest", fetch_max_wait_ms=50)
        try:
            consumer.assign([tp])
            assert await consumer.position(tp) == 10
            assert await consumer.beginning_offsets([tp]) == {tp: 0}
            assert await consumer.end_offsets([tp]) == {tp: 10}
            new = sample_messages(3, tag="new")
            await _send_all(ab, topic, new)
            got = await _poll_until(consumer, 3)
            assert [(m.offset, m.value) for m in got] == [(10 + i, m.value) for i, m in enumerate(new)]

            found = (await consumer.offsets_for_times({tp: base + 6})).get(tp)
            assert (found.offset, found.timestamp) == (6, base + 6)
            assert (await consumer.offsets_for_times({tp: int(time.time() * 1000) + 60_000}))[tp] is None
            consumer.seek(tp, found.offset)
            got = await _poll_until(consumer, 7)
            assert [m.offset for m in got] == list(range(6, 13))
            assert [(m.timestamp, m.value) for m in got[:4]] == [(base + i, old[i].value) for i in range(6, 10)]
        finally:
            await consumer.stop()
    run(scenario())


def test_records_up_to_message_max_bytes_are_accepted_and_larger_refused(ab):
    async def scenario():
        topic = await _created(ab, unique_topic("size"))
        producer = AIOKafkaProducer(bootstrap_servers=ab.bootstrap, max_request_size=4 * MAX_BYTES)
        await producer.start()
        try:
            exact = b"x" * (MAX_BYTES - ONE_RECORD_OVERHEAD)  # a batch of exactly message.max.bytes
            assert (await producer.send_and_wait(topic, exact)).offset == 0
            with pytest.raises(Errors.MessageSizeTooLargeError):
                await producer.send_and_wait(topic, exact + b"y")
            with pytest.raises(Errors.MessageSizeTooLargeError):
                await producer.send_and_wait(topic, b"z" * (2 * MAX_BYTES))
            assert (await producer.send_and_wait(topic, b"small")).offset == 1
        finally:
            await producer.stop()
        recs = await aiokafka_read(ab.bootstrap, topic, 2)
        assert [(r.offset, len(r.value)) for r in recs] == [(0, len(exact)), (1, 5)]
    run(scenario())


def test_seek_into_the_middle_of_a_compressed_batch_and_small_fetches(ab):
    async def scenario():
        topic = await _created(ab, unique_topic("mid-batch"))
        producer = AIOKafkaProducer(bootstrap_servers=ab.bootstrap, compression_type="snappy")
        await producer.start()
        try:
            batch = producer.create_batch()
            for i in range(10):
                assert batch.append(key=b"k", value=b"v%d" % i, timestamp=None) is not None
            md = await (await producer.send_batch(batch, topic, partition=0))
            assert md.offset == 0
            big = await producer.send_and_wait(topic, b"b" * 15_000)
            assert big.offset == 10
        finally:
            await producer.stop()
        recs = await aiokafka_read(ab.bootstrap, topic, 5, offsets={0: 5})
        assert [(r.offset, r.value) for r in recs[:5]] == [(i, b"v%d" % i) for i in range(5, 10)]
        recs = await aiokafka_read(ab.bootstrap, topic, 1, offsets={0: 10},
                                   max_partition_fetch_bytes=1000, fetch_max_bytes=1000)
        assert [(r.offset, r.value) for r in recs] == [(10, b"b" * 15_000)]
        return topic
    topic = run(scenario())
    assert partition_state(ab, topic)["batches"] == [(0, 9), (10, 10)]


def test_log_append_time_topic_stamps_records_with_the_broker_clock(ab):
    async def scenario():
        topic = await _created(ab, unique_topic("append-time"), configs={"message.timestamp.type": "LogAppendTime"})
        before = int(time.time() * 1000)
        producer = AIOKafkaProducer(bootstrap_servers=ab.bootstrap, compression_type="lz4")
        await producer.start()
        try:
            md = await producer.send_and_wait(topic, b"v", key=b"k", timestamp_ms=1000)
        finally:
            await producer.stop()
        assert before <= md.timestamp <= int(time.time() * 1000)
        consumer = await _consumer(ab, auto_offset_reset="earliest")
        try:
            consumer.assign([TopicPartition(topic, 0)])
            [m] = await _poll_until(consumer, 1)
            assert (m.timestamp, m.timestamp_type, m.value) == (md.timestamp, 1, b"v")
        finally:
            await consumer.stop()
    run(scenario())


def test_producing_to_an_unknown_topic_creates_it(ab):
    async def scenario():
        topic = unique_topic("auto")
        assert await _send_all(ab, topic, sample_messages(3)) == [(0, 0), (0, 1), (0, 2)]
        async with Admin(ab) as admin:
            assert topic in await admin.list_topics()
    run(scenario())


# --- delivery guarantees ---------------------------------------------------------------------------
@pytest.mark.parametrize("acks", [0, 1, "all"])
def test_acks(ab, acks):
    async def scenario():
        topic = await _created(ab, unique_topic(f"acks-{acks}"))
        msgs = sample_messages(25, tag=f"acks{acks}")
        placed = await _send_all(ab, topic, msgs, acks=acks)
        if acks == 0:
            assert placed == [(None, None)] * 25
            placed = [(0, i) for i in range(25)]
        else:
            assert placed == [(0, i) for i in range(25)]
        recs = await aiokafka_read(ab.bootstrap, topic, 25)
        assert_matches_sent(recs, msgs, placed)
        assert_contiguous(recs)
    run(scenario())


def test_idempotent_producer(ab):
    async def scenario():
        topic = await _created(ab, unique_topic("idem"), 2)
        msgs = sample_messages(30)
        placed = await _send_all(ab, topic, msgs, enable_idempotence=True, compression_type="gzip")
        recs = await aiokafka_read(ab.bootstrap, topic, len(msgs))
        assert_matches_sent(recs, msgs, placed)
        assert_contiguous(recs)
        return topic
    topic = run(scenario())
    ids = {pid for p in range(2) for pid in partition_state(ab, topic, p)["producer_ids"]}
    assert len(ids) == 1 and min(ids) >= 0


# --- the log start offset moving ---------------------------------------------------------------------
def test_delete_records_and_offset_reset(ab):
    async def scenario():
        topic = await _created(ab, unique_topic("delete-records"))
        producer = AIOKafkaProducer(bootstrap_servers=ab.bootstrap)
        await producer.start()
        try:
            for i in range(10):
                await producer.send_and_wait(topic, b"r%d" % i, key=b"k")
        finally:
            await producer.stop()
        tp = TopicPartition(topic, 0)
        async with Admin(ab) as admin:
            assert await admin.delete_records({tp: RecordsToDelete(6)}) == {tp: 6}
            with pytest.raises(Errors.OffsetOutOfRangeError):
                await admin.delete_records({tp: RecordsToDelete(11)})

        recs = await aiokafka_read(ab.bootstrap, topic, 4, offsets={0: 2})  # earliest: to the new start
        assert [(r.offset, r.value) for r in recs] == [(i, b"r%d" % i) for i in range(6, 10)]

        consumer = await _consumer(ab, auto_offset_reset="none")
        try:
            consumer.assign([tp])
            assert await consumer.beginning_offsets([tp]) == {tp: 6}
            consumer.seek(tp, 2)
            with pytest.raises(Errors.OffsetOutOfRangeError):
                await _poll_until(consumer, 1)
        finally:
            await consumer.stop()
    run(scenario())


def test_retention_moves_the_earliest_offset(ab):
    async def scenario():
        topic = await _created(ab, unique_topic("retention"),
                               configs={"retention.ms": "60000", "segment.bytes": "100", "file.delete.delay.ms": "0"})
        old = int(time.time() * 1000) - 600_000
        producer = AIOKafkaProducer(bootstrap_servers=ab.bootstrap)
        await producer.start()
        try:
            for i in range(6):  # one batch each, one 100-byte segment each
                await producer.send_and_wait(topic, b"r%d" % i, key=b"k", timestamp_ms=old)
        finally:
            await producer.stop()
        tp = TopicPartition(topic, 0)
        consumer = await _consumer(ab)
        try:
            deadline = time.monotonic() + 20
            while (await consumer.beginning_offsets([tp]))[tp] != 5 and time.monotonic() < deadline:
                await asyncio.sleep(0.05)
            assert await consumer.beginning_offsets([tp]) == {tp: 5}
        finally:
            await consumer.stop()
        recs = await aiokafka_read(ab.bootstrap, topic, 1, offsets={0: 0})
        assert [(r.offset, r.value) for r in recs] == [(5, b"r5")]
    run(scenario())


# --- across clients -------------------------------------------------------------------------------
def test_records_from_aiokafka_read_the_same_by_every_client(ab):
    topic = unique_topic("from-aiokafka")
    msgs = sample_messages(20, tag="aio", timestamp=int(time.time() * 1000) - 1000)

    async def produce():
        await _created(ab, topic, 2)
        return await _send_all(ab, topic, msgs, compression_type="zstd")
    placed = run(produce())
    recs: list[Rec] = assert_all_clients_agree(ab.bootstrap, topic, msgs, placed)
    assert len(recs) == 20
