"""confluent-kafka (librdkafka) against a real odradek broker.

One broker serves the module. Consumers use ``assign()`` with a ``group.id`` that librdkafka
requires but never joins (auto-commit off, no ``subscribe()``), so nothing here needs the
group coordinator: librdkafka sees from ApiVersions that FindCoordinator is not served and
consumes from its assigned partitions all the same.
"""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor

import pytest
from confluent_kafka import OFFSET_END, Consumer, KafkaError, KafkaException, Producer, TopicCollection, TopicPartition
from confluent_kafka.admin import (
    AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, ConfigSource, NewPartitions, NewTopic,
    OffsetSpec, ResourceType,
)

from odradek.testing.broker import InProcessBroker
from tests.server.clients import (
    CODECS, CONSUMERS, Msg, assert_all_clients_agree, assert_contiguous, assert_matches_sent, consume_confluent,
    partition_state, sample_messages, unique_topic, wait_until,
)

MAX_BYTES = 20_000
ONE_RECORD_OVERHEAD = 72  # batch bytes beyond the value; see test_kafka_python.py


@pytest.fixture(scope="module")
def cb(tmp_path_factory):
    with InProcessBroker(tmp_path_factory.mktemp("confluent") / "data", message_max_bytes=MAX_BYTES,
                         log_retention_check_interval_ms=100) as b:
        yield b


@pytest.fixture(scope="module")
def admin(cb):
    return AdminClient({"bootstrap.servers": cb.bootstrap})


def _create(admin, name, partitions=1, configs=None, **kw):
    for future in admin.create_topics([NewTopic(name, partitions, 1, config=configs or {})], **kw).values():
        future.result(20)
    return name


def _result(futures: dict):
    """The single result of an admin call that returns ``{resource: future}``."""
    [future] = futures.values()
    return future.result(20)


def _produce(cb, topic, msgs: list[Msg], flush_each=False, **config) -> list:
    """Produce and return, per message, ``(partition, offset)`` or the KafkaError it failed with."""
    producer = Producer({"bootstrap.servers": cb.bootstrap, "linger.ms": 5, **config})
    reports: list = [None] * len(msgs)

    def report(i):
        return lambda err, m: reports.__setitem__(i, err if err is not None else (m.partition(), m.offset()))

    for i, m in enumerate(msgs):
        producer.produce(topic, key=m.key, value=m.value, headers=list(m.headers), timestamp=m.timestamp or 0,
                         on_delivery=report(i))
        if flush_each:
            producer.flush(20)
    assert producer.flush(20) == 0
    return reports


def _consumer(cb, **config) -> Consumer:
    return Consumer({"bootstrap.servers": cb.bootstrap, "group.id": "odradek-tests-no-group",
                     "enable.auto.commit": False, **config})


# --- metadata and admin -----------------------------------------------------------------------
def test_metadata_describes_the_single_broker(cb, admin):
    topic = _create(admin, unique_topic("meta"), 3)
    meta = admin.list_topics(timeout=10)
    assert meta.cluster_id == cb.broker.cluster_id
    assert meta.controller_id == 1
    assert {i: (b.host, b.port) for i, b in meta.brokers.items()} == {1: ("127.0.0.1", cb.port)}
    parts = meta.topics[topic].partitions
    assert {i: (p.leader, p.replicas, p.isrs, p.error) for i, p in parts.items()} == \
        {i: (1, [1], [1], None) for i in range(3)}

    cluster = admin.describe_cluster().result(20)
    assert cluster.cluster_id == cb.broker.cluster_id
    assert cluster.controller.id == 1
    assert [(n.id, n.host, n.port) for n in cluster.nodes] == [(1, "127.0.0.1", cb.port)]
    described = admin.describe_topics(TopicCollection([topic]))[topic].result(20)
    assert described.name == topic and not described.is_internal
    assert [(p.id, p.leader.id, [r.id for r in p.replicas]) for p in described.partitions] == \
        [(i, 1, [1]) for i in range(3)]


def test_admin_creates_describes_grows_and_deletes_a_topic(cb, admin):
    name = unique_topic("admin")
    _create(admin, name, 2, {"retention.ms": "3600000"}, validate_only=True)
    assert name not in admin.list_topics(timeout=10).topics  # validate_only created nothing
    _create(admin, name, 2, {"retention.ms": "3600000"})
    with pytest.raises(KafkaException) as e:
        _create(admin, name, 2)
    assert e.value.args[0].code() == KafkaError.TOPIC_ALREADY_EXISTS

    configs = _result(admin.describe_configs([ConfigResource(ResourceType.TOPIC, name)]))
    assert configs["retention.ms"].value == "3600000"
    assert configs["retention.ms"].source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value
    assert configs["max.message.bytes"].value == str(MAX_BYTES)
    assert configs["max.message.bytes"].source == ConfigSource.STATIC_BROKER_CONFIG.value
    assert configs["segment.bytes"].source == ConfigSource.DEFAULT_CONFIG.value
    broker_configs = _result(admin.describe_configs([ConfigResource(ResourceType.BROKER, "1")]))
    assert broker_configs["message.max.bytes"].value == str(MAX_BYTES)

    change = ConfigEntry("retention.ms", "7200000", incremental_operation=AlterConfigOpType.SET)
    _result(admin.incremental_alter_configs([ConfigResource(ResourceType.TOPIC, name, incremental_configs=[change])]))
    configs = _result(admin.describe_configs([ConfigResource(ResourceType.TOPIC, name)]))
    assert configs["retention.ms"].value == "7200000"

    _result(admin.create_partitions([NewPartitions(name, 5)]))
    assert len(admin.list_topics(name, timeout=10).topics[name].partitions) == 5
    producer = Producer({"bootstrap.servers": cb.bootstrap})
    reports = []
    producer.produce(name, b"to partition 4", partition=4, on_delivery=lambda err, m: reports.append((err, m.offset())))
    producer.flush(20)
    assert reports == [(None, 0)]
    with pytest.raises(KafkaException) as e:
        _result(admin.create_partitions([NewPartitions(name, 3)]))
    assert e.value.args[0].code() == KafkaError.INVALID_PARTITIONS

    _result(admin.delete_topics([name]))
    wait_until(lambda: name not in admin.list_topics(timeout=10).topics, what=f"{name} to go")
    with pytest.raises(KafkaException) as e:
        _result(admin.delete_topics([name]))
    assert e.value.args[0].code() == KafkaError.UNKNOWN_TOPIC_OR_PART


@pytest.mark.parametrize("name, partitions, configs, code", [
    ("ok", 1, {"retention.ms": "soon"}, KafkaError.INVALID_CONFIG),
    ("ok", 1, {"no.such.config": "1"}, KafkaError.INVALID_CONFIG),
    ("bad name!", 1, {}, KafkaError.TOPIC_EXCEPTION),
    ("ok", 0, {}, KafkaError.INVALID_PARTITIONS),
])
def test_admin_refuses_bad_topics(admin, name, partitions, configs, code):
    name = unique_topic("bad") if name == "ok" else name
    with pytest.raises(KafkaException) as e:
        _create(admin, name, partitions, configs)
    assert e.value.args[0].code() == code


def test_admin_list_offsets(cb, admin):
    topic = _create(admin, unique_topic("list-offsets"))
    base = int(time.time() * 1000) - 60_000
    _produce(cb, topic, [Msg(b"k", b"v%d" % i, (), base + 1000 * i) for i in range(5)])
    tp = TopicPartition(topic, 0)
    specs = {"earliest": OffsetSpec.earliest(), "latest": OffsetSpec.latest(),
             "max": OffsetSpec.max_timestamp(), "at": OffsetSpec.for_timestamp(base + 2500)}
    got = {name: admin.list_offsets({tp: spec})[tp].result(20) for name, spec in specs.items()}
    assert got["earliest"].offset == 0
    assert got["latest"].offset == 5
    assert (got["max"].offset, got["max"].timestamp) == (4, base + 4000)
    assert (got["at"].offset, got["at"].timestamp) == (3, base + 3000)


# --- produce and consume ------------------------------------------------------------------------
@pytest.mark.parametrize("keyed", [True, False], ids=["keyed", "unkeyed"])
@pytest.mark.parametrize("codec", CODECS)
def test_produce_and_consume_every_codec(cb, admin, codec, keyed):
    topic = _create(admin, unique_topic(f"codec-{codec}"), 3)
    msgs = sample_messages(40, keyed=keyed, tag=codec, timestamp=int(time.time() * 1000) - 5000)
    placed = _produce(cb, topic, msgs, **{"compression.type": codec})
    assert all(isinstance(p, tuple) for p in placed), placed
    recs = consume_confluent(cb.bootstrap, topic, len(msgs))
    assert_matches_sent(recs, msgs, placed, check_timestamps=True)
    assert_contiguous(recs)


def test_consume_from_latest_skips_what_was_there(cb, admin):
    topic = _create(admin, unique_topic("latest"))
    _produce(cb, topic, sample_messages(5, tag="old"))
    consumer = _consumer(cb)
    producer = Producer({"bootstrap.servers": cb.bootstrap})
    try:
        consumer.assign([TopicPartition(topic, 0, OFFSET_END)])
        got = []

        def read_new():
            # When "latest" is resolved is up to librdkafka: keep adding records until one shows.
            producer.produce(topic, key=b"k", value=b"new")
            producer.flush(10)
            got.extend(consumer.consume(num_messages=100, timeout=0.2))
            return got
        wait_until(read_new, what="a record produced after assign(OFFSET_END)")
        assert all(m.error() is None and m.value() == b"new" and m.offset() >= 5 for m in got)
        assert [m.offset() for m in got] == list(range(got[0].offset(), got[0].offset() + len(got)))
        assert consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)[0] == 0
    finally:
        consumer.close()


def test_offsets_for_times_and_consume_from_a_timestamp(cb, admin):
    topic = _create(admin, unique_topic("times"))
    base = int(time.time() * 1000) - 60_000
    msgs = [Msg(b"k", b"v%d" % i, (("i", b"%d" % i),), base + 1000 * i) for i in range(10)]
    _produce(cb, topic, msgs)
    consumer = _consumer(cb)
    try:
        [found] = consumer.offsets_for_times([TopicPartition(topic, 0, base + 3500)], timeout=10)
        assert found.offset == 4
        [none] = consumer.offsets_for_times([TopicPartition(topic, 0, base + 60_000)], timeout=10)
        assert none.offset == -1  # OFFSET_END: no record that late
        assert consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=10) == (0, 10)
    finally:
        consumer.close()
    recs = consume_confluent(cb.bootstrap, topic, 6, offsets={0: found.offset})
    assert [(r.offset, r.timestamp, r.value, r.headers) for r in recs] == \
        [(i, base + 1000 * i, b"v%d" % i, (("i", b"%d" % i),)) for i in range(4, 10)]


def test_records_up_to_message_max_bytes_are_accepted_and_larger_refused(cb, admin):
    topic = _create(admin, unique_topic("size"))
    exact = b"x" * (MAX_BYTES - ONE_RECORD_OVERHEAD)  # a batch of exactly message.max.bytes
    sizes = [exact, exact + b"y", b"z" * (2 * MAX_BYTES), b"small"]
    placed = _produce(cb, topic, [Msg(None, v) for v in sizes], flush_each=True,
                      **{"message.max.bytes": 4 * MAX_BYTES, "retries": 0})
    assert placed[0] == (0, 0)
    assert [p.code() for p in placed[1:3]] == [KafkaError.MSG_SIZE_TOO_LARGE] * 2
    assert placed[3] == (0, 1)
    recs = consume_confluent(cb.bootstrap, topic, 2)
    assert [(r.offset, len(r.value)) for r in recs] == [(0, len(exact)), (1, 5)]


def test_seek_into_the_middle_of_a_compressed_batch(cb, admin):
    topic = _create(admin, unique_topic("mid-batch"))
    placed = _produce(cb, topic, [Msg(b"k", b"v%d" % i) for i in range(10)],
                      **{"compression.type": "zstd", "linger.ms": 1000})
    assert placed == [(0, i) for i in range(10)]
    assert partition_state(cb, topic)["batches"] == [(0, 9)]
    recs = consume_confluent(cb.bootstrap, topic, 5, offsets={0: 5}, partitions=1)
    assert [(r.offset, r.value) for r in recs] == [(i, b"v%d" % i) for i in range(5, 10)]


def test_a_batch_larger_than_the_fetch_limits_comes_back_whole(cb, admin):
    topic = _create(admin, unique_topic("big-batch"))
    values = [bytes([fill]) * 15_000 for fill in b"ab"]
    _produce(cb, topic, [Msg(None, v) for v in values], flush_each=True)
    small = {"fetch.max.bytes": 1000, "message.max.bytes": 1000, "max.partition.fetch.bytes": 1000}
    recs = consume_confluent(cb.bootstrap, topic, 2, partitions=1, **small)
    assert [(r.offset, r.value) for r in recs] == list(enumerate(values))


def test_log_append_time_topic_stamps_records_with_the_broker_clock(cb, admin):
    from confluent_kafka import TIMESTAMP_LOG_APPEND_TIME

    topic = _create(admin, unique_topic("append-time"), configs={"message.timestamp.type": "LogAppendTime"})
    before = int(time.time() * 1000)
    _produce(cb, topic, [Msg(b"k", b"v%d" % i, (), 1000) for i in range(3)], **{"compression.type": "gzip"})
    consumer = _consumer(cb)
    try:
        consumer.assign([TopicPartition(topic, 0, 0)])
        got = []
        wait_until(lambda: got.extend(m for m in consumer.consume(10, timeout=0.2) if m.error() is None)
                   or len(got) >= 3, what="three records")
    finally:
        consumer.close()
    stamps = {m.timestamp() for m in got}
    assert len(stamps) == 1  # one batch, one append time
    kind, ts = stamps.pop()
    assert kind == TIMESTAMP_LOG_APPEND_TIME and before <= ts <= int(time.time() * 1000)


def test_a_waiting_consumer_sees_records_as_they_are_produced(cb, admin):
    """The consumer long-polls at the log end while a producer appends in many small batches."""
    topic = _create(admin, unique_topic("live"), 2)
    consumer = _consumer(cb)
    producer = Producer({"bootstrap.servers": cb.bootstrap, "linger.ms": 0, "batch.num.messages": 3})
    try:
        consumer.assign([TopicPartition(topic, p, 0) for p in range(2)])  # the topic is empty
        got: list = []
        sent = 0

        def step():
            nonlocal sent
            if sent < 600:
                for i in range(sent, sent + 50):
                    producer.produce(topic, key=b"k%d" % (i % 7), value=b"%d" % i)
                producer.poll(0)
                sent += 50
            got.extend(m for m in consumer.consume(500, timeout=0.1) if m.error() is None)
            return len(got) >= 600 and sent == 600
        wait_until(step, what="600 records")
        producer.flush(20)
    finally:
        consumer.close()
    assert sorted(int(m.value()) for m in got) == list(range(600))
    for p in range(2):
        offsets = [m.offset() for m in got if m.partition() == p]
        assert offsets == list(range(offsets[0], offsets[0] + len(offsets)))


def test_producing_to_an_unknown_topic_creates_it(cb, admin):
    topic = unique_topic("auto")
    assert _produce(cb, topic, [Msg(b"k", b"v")]) == [(0, 0)]
    assert topic in admin.list_topics(timeout=10).topics
    assert [r.value for r in consume_confluent(cb.bootstrap, topic, 1)] == [b"v"]


def test_metadata_auto_creation_follows_the_request_flag(cb, admin):
    topic = unique_topic("no-auto")
    consumer = _consumer(cb)  # allow.auto.create.topics=false is librdkafka's consumer default
    try:
        meta = consumer.list_topics(topic, timeout=10).topics[topic]
        assert meta.error.code() == KafkaError.UNKNOWN_TOPIC_OR_PART
    finally:
        consumer.close()
    assert topic not in admin.list_topics(timeout=10).topics

    producer = Producer({"bootstrap.servers": cb.bootstrap})  # a producer's metadata may create
    meta = producer.list_topics(topic, timeout=10).topics[topic]
    assert meta.error is None and list(meta.partitions) == [0]
    assert topic in admin.list_topics(timeout=10).topics


def test_concurrent_metadata_requests_for_a_new_topic_all_see_it(cb, admin):
    """Several clients asking at once for the same unknown topic: it is created once, and every
    answer describes it (none says it does not exist while its creation is under way)."""
    producers = [Producer({"bootstrap.servers": cb.bootstrap}) for _ in range(4)]
    with ThreadPoolExecutor(len(producers)) as pool:  # list_topics() blocks without the GIL
        for _ in range(5):
            topic = unique_topic("auto-race")
            metas = list(pool.map(lambda p, t=topic: p.list_topics(t, timeout=10).topics[t], producers))
            assert [(m.error, list(m.partitions)) for m in metas] == [(None, [0])] * len(producers)


# --- delivery guarantees ---------------------------------------------------------------------------
@pytest.mark.parametrize("acks", ["0", "1", "all"])
def test_acks(cb, admin, acks):
    topic = _create(admin, unique_topic(f"acks-{acks}"))
    msgs = sample_messages(25, tag=f"acks{acks}")
    placed = _produce(cb, topic, msgs, acks=acks)
    if acks == "0":  # no response: librdkafka reports no offsets
        assert placed == [(0, None)] * 25
        wait_until(lambda: partition_state(cb, topic)["high_watermark"] == 25, what="25 records")
        placed = [(0, i) for i in range(25)]
    else:
        assert placed == [(0, i) for i in range(25)]
    recs = consume_confluent(cb.bootstrap, topic, 25, partitions=1)
    assert_matches_sent(recs, msgs, placed)
    assert_contiguous(recs)


def test_acks_all_needs_min_insync_replicas(cb, admin):
    topic = _create(admin, unique_topic("min-isr"), configs={"min.insync.replicas": "2"})
    [refused] = _produce(cb, topic, [Msg(b"k", b"durable?")], acks="all", retries=0)
    assert refused.code() == KafkaError.NOT_ENOUGH_REPLICAS
    assert _produce(cb, topic, [Msg(b"k", b"leader only")], acks="1") == [(0, 0)]


def test_idempotent_producer(cb, admin):
    topic = _create(admin, unique_topic("idem"), 2)
    msgs = sample_messages(60, tag="idem")
    placed = _produce(cb, topic, msgs, **{"enable.idempotence": True, "compression.type": "zstd",
                                          "batch.num.messages": 7})
    for p in range(2):
        assert len(partition_state(cb, topic, p)["producer_ids"]) == 1
    recs = consume_confluent(cb.bootstrap, topic, len(msgs))
    assert_matches_sent(recs, msgs, placed)
    assert_contiguous(recs)
    # A second idempotent producer gets a producer id of its own.
    _produce(cb, topic, [Msg(b"k", b"again")], **{"enable.idempotence": True})
    assert sum(len(partition_state(cb, topic, p)["producer_ids"]) for p in range(2)) == 3


# --- the log start offset moving ---------------------------------------------------------------------
def test_delete_records_and_offset_reset(cb, admin):
    topic = _create(admin, unique_topic("delete-records"))
    _produce(cb, topic, [Msg(b"k", b"r%d" % i) for i in range(10)], flush_each=True)
    tp = TopicPartition(topic, 0, 6)
    deleted = admin.delete_records([tp])[tp].result(20)
    assert deleted.low_watermark == 6
    assert admin.list_offsets({TopicPartition(topic, 0): OffsetSpec.earliest()})[
        TopicPartition(topic, 0)].result(20).offset == 6
    with pytest.raises(KafkaException) as e:
        admin.delete_records([TopicPartition(topic, 0, 11)])[TopicPartition(topic, 0, 11)].result(20)
    assert e.value.args[0].code() == KafkaError.OFFSET_OUT_OF_RANGE

    # Offset 2 is gone: "earliest" resets to the new log start...
    recs = consume_confluent(cb.bootstrap, topic, 4, offsets={0: 2}, partitions=1)
    assert [(r.offset, r.value) for r in recs] == [(i, b"r%d" % i) for i in range(6, 10)]
    # ...and "error" hands the application the reset error instead.
    consumer = _consumer(cb, **{"auto.offset.reset": "error"})
    try:
        consumer.assign([TopicPartition(topic, 0, 2)])
        errors = []
        wait_until(lambda: errors.extend(m.error() for m in consumer.consume(timeout=0.2) if m.error()) or errors,
                   what="an offset reset error")
        assert errors[0].code() == KafkaError._AUTO_OFFSET_RESET
    finally:
        consumer.close()


def test_delete_records_inside_a_batch(cb, admin):
    """The log start may fall inside a batch: fetches still return that whole batch, yet no
    client shows a record below the log start, and a position below it is out of range."""
    topic = _create(admin, unique_topic("delete-in-batch"))
    _produce(cb, topic, [Msg(b"k", b"r%d" % i) for i in range(10)], **{"linger.ms": 1000})
    assert partition_state(cb, topic)["batches"] == [(0, 9)]
    tp = TopicPartition(topic, 0, 6)
    assert admin.delete_records([tp])[tp].result(20).low_watermark == 6
    for name, read in CONSUMERS.items():
        kw = {} if name == "kcat" else {"offsets": {0: 4}}  # kcat: from the beginning
        assert [r.offset for r in read(cb.bootstrap, topic, 4, **kw)] == [6, 7, 8, 9], name


def test_retention_moves_the_earliest_offset(cb, admin):
    topic = _create(admin, unique_topic("retention"),
                    configs={"retention.ms": "60000", "segment.bytes": "100", "file.delete.delay.ms": "0"})
    old = int(time.time() * 1000) - 600_000
    _produce(cb, topic, [Msg(b"k", b"r%d" % i, (), old) for i in range(6)], flush_each=True)
    tp = TopicPartition(topic, 0)
    # One batch per 100-byte segment: retention deletes all but the active one.
    wait_until(lambda: admin.list_offsets({tp: OffsetSpec.earliest()})[tp].result(20).offset == 5,
               what="retention to move the log start")
    recs = consume_confluent(cb.bootstrap, topic, 1, offsets={0: 0}, partitions=1)
    assert [(r.offset, r.value) for r in recs] == [(5, b"r5")]


# --- across clients -------------------------------------------------------------------------------
def test_records_from_confluent_read_the_same_by_every_client(cb, admin):
    topic = _create(admin, unique_topic("from-confluent"), 2)
    msgs = sample_messages(20, tag="ck", timestamp=int(time.time() * 1000) - 1000)
    placed = _produce(cb, topic, msgs, **{"compression.type": "snappy"})
    assert_all_clients_agree(cb.bootstrap, topic, msgs, placed)
