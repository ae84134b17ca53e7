"""kafka-python against a real odradek broker: metadata, admin, produce and fetch end to end.

One broker serves the whole module (each test uses its own topics); its ``message.max.bytes``
is small so the size limit can be tested byte-exactly, and its retention check runs every
100 ms so retention is seen within a test. Consumers read without a group.
"""

from __future__ import annotations

import time
from contextlib import closing

import pytest
from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka import errors as Errors
from kafka.admin import ConfigResource, KafkaAdminClient, NewPartitions, NewTopic

from odradek.testing.broker import InProcessBroker
from tests.server.clients import (
    CODECS, Msg, assert_all_clients_agree, assert_contiguous, assert_matches_sent, consume_confluent,
    consume_kafka_python, partition_state, sample_messages, unique_topic, wait_until,
)

MAX_BYTES = 20_000
# A v2 batch holding one record with a null key, no headers and a value of v bytes, for
# 2^13 <= v < 2^20 (so the zigzag varints of the value length and of the record length take
# 3 bytes each): 61 (batch header) + 3 (record length) + 1 (attributes) + 1 (timestamp delta)
# + 1 (offset delta) + 1 (key length -1) + 3 (value length) + v + 1 (header count) = v + 72.
ONE_RECORD_OVERHEAD = 72


@pytest.fixture(scope="module")
def kb(tmp_path_factory):
    with InProcessBroker(tmp_path_factory.mktemp("kafka-python") / "data", message_max_bytes=MAX_BYTES,
                         log_retention_check_interval_ms=100) as b:
        yield b


@pytest.fixture(scope="module")
def admin(kb):
    client = KafkaAdminClient(bootstrap_servers=kb.bootstrap)
    yield client
    client.close()


def _producer(kb, **config) -> KafkaProducer:
    return KafkaProducer(bootstrap_servers=kb.bootstrap, **{"linger_ms": 5, **config})


def _send_all(producer, topic, msgs, **kw) -> list[tuple[int, int]]:
    futures = [producer.send(topic, key=m.key, value=m.value, headers=list(m.headers),
                             timestamp_ms=m.timestamp, **kw) for m in msgs]
    producer.flush(20)
    return [(md.partition, md.offset) for md in (f.get(20) for f in futures)]


def _create(admin, name, partitions=1, configs=None):
    admin.create_topics([NewTopic(name, partitions, 1, topic_configs=configs or {})])
    return name


def _created_unless_marked(admin, name, partitions) -> bool:
    try:
        _create(admin, name, partitions)
    except Errors.TopicAlreadyExistsError as error:
        if "marked for deletion" not in str(error):
            raise
        return False
    return True


def _consumer(kb, **config) -> KafkaConsumer:
    return KafkaConsumer(bootstrap_servers=kb.bootstrap, group_id=None, enable_auto_commit=False, **config)


# --- metadata and admin -----------------------------------------------------------------------
def test_metadata_describes_the_single_broker(kb, admin):
    topic = _create(admin, unique_topic("meta"), 3)
    cluster = admin.describe_cluster()
    assert cluster["cluster_id"] == kb.broker.cluster_id
    assert cluster["controller_id"] == 1
    assert [(b["broker_id"], b["host"], b["port"]) for b in cluster["brokers"]] == [(1, "127.0.0.1", kb.port)]
    with closing(_consumer(kb)) as consumer:
        assert topic in consumer.topics()
        assert consumer.partitions_for_topic(topic) == {0, 1, 2}
    [described] = admin.describe_topics([topic])
    assert described["error_code"] == 0
    assert [(p["partition_index"], p["leader_id"], p["replica_nodes"], p["isr_nodes"])
            for p in sorted(described["partitions"], key=lambda p: p["partition_index"])] == \
        [(i, 1, [1], [1]) for i in range(3)]


def test_admin_creates_describes_grows_and_deletes_a_topic(kb, admin):
    topic = _create(admin, unique_topic("admin"), 2, {"retention.ms": "3600000", "cleanup.policy": "delete"})
    assert topic in admin.list_topics()
    with pytest.raises(Errors.TopicAlreadyExistsError):
        admin.create_topics([NewTopic(topic, 1, 1)])

    configs = admin.describe_configs([ConfigResource("TOPIC", topic)])["topic"][topic]
    assert configs["retention.ms"]["value"] == "3600000"
    assert configs["retention.ms"]["config_source"] == "DYNAMIC_TOPIC_CONFIG"  # Kafka's name for 1
    assert configs["cleanup.policy"]["value"] == "delete"
    assert "segment.bytes" not in configs  # the default filter shows overrides only
    everything = admin.describe_configs([ConfigResource("TOPIC", topic)], config_filter="all")["topic"][topic]
    assert everything["max.message.bytes"]["value"] == str(MAX_BYTES)  # the broker's message.max.bytes
    assert everything["max.message.bytes"]["config_source"] == "STATIC_BROKER_CONFIG"

    admin.alter_configs([ConfigResource("TOPIC", topic, {"retention.ms": "7200000"})])
    configs = admin.describe_configs([ConfigResource("TOPIC", topic)])["topic"][topic]
    assert configs["retention.ms"]["value"] == "7200000"

    admin.create_partitions({topic: NewPartitions(4)})
    [described] = admin.describe_topics([topic])
    assert len(described["partitions"]) == 4
    with closing(_producer(kb)) as producer:
        assert producer.send(topic, b"to the new partition", partition=3).get(20).offset == 0
    with pytest.raises(Errors.InvalidPartitionsError):
        admin.create_partitions({topic: NewPartitions(2)})

    admin.delete_topics([topic])
    assert topic not in admin.list_topics()
    with pytest.raises(Errors.UnknownTopicOrPartitionError):
        admin.delete_topics([topic])


@pytest.mark.parametrize("partitions, rf, configs, error", [
    (1, 1, {"retention.ms": "not-a-number"}, Errors.InvalidConfigurationError),
    (1, 1, {"no.such.config": "1"}, Errors.InvalidConfigurationError),
    (0, 1, {}, Errors.InvalidPartitionsError),
    (1, 3, {}, Errors.InvalidReplicationFactorError),
])
def test_admin_refuses_bad_topics(admin, partitions, rf, configs, error):
    name = unique_topic("bad")
    with pytest.raises(error):
        admin.create_topics([NewTopic(name, partitions, rf, topic_configs=configs)])
    assert name not in admin.list_topics()


def test_admin_refuses_an_invalid_topic_name(admin):
    with pytest.raises(Errors.InvalidTopicError):
        admin.create_topics([NewTopic("bad/name", 1, 1)])


# --- produce and consume ------------------------------------------------------------------------
@pytest.mark.parametrize("keyed", [True, False], ids=["keyed", "unkeyed"])
@pytest.mark.parametrize("codec", CODECS)
def test_produce_and_consume_every_codec(kb, admin, codec, keyed):
    topic = _create(admin, unique_topic(f"codec-{codec}"), 3)
    msgs = sample_messages(40, keyed=keyed, tag=codec, timestamp=int(time.time() * 1000) - 5000)
    with closing(_producer(kb, compression_type=None if codec == "none" else codec)) as producer:
        placed = _send_all(producer, topic, msgs)
    recs = consume_kafka_python(kb.bootstrap, topic, len(msgs))
    assert_matches_sent(recs, msgs, placed, check_timestamps=True)
    assert_contiguous(recs)
    if keyed:  # one key, one partition
        for key in {m.key for m in msgs}:
            assert len({r.partition for r in recs if r.key == key}) == 1


def test_consume_from_latest_sees_only_new_records(kb, admin):
    topic = _create(admin, unique_topic("latest"))
    with closing(_producer(kb)) as producer, closing(_consumer(kb, auto_offset_reset="latest")) as consumer:
        _send_all(producer, topic, sample_messages(5, tag="old"))
        tp = TopicPartition(topic, 0)
        consumer.assign([tp])
        assert consumer.end_offsets([tp]) == {tp: 5}
        assert consumer.position(tp) == 5
        new = sample_messages(3, tag="new")
        _send_all(producer, topic, new)
        got = []
        wait_until(lambda: got.extend(r for rs in consumer.poll(timeout_ms=100).values() for r in rs) or len(got) >= 3,
                   what="the new records")
        assert [(r.offset, r.value) for r in got] == [(5 + i, m.value) for i, m in enumerate(new)]


def test_offsets_for_times_and_consume_from_a_timestamp(kb, admin):
    topic = _create(admin, unique_topic("times"))
    base = int(time.time() * 1000) - 60_000
    msgs = sample_messages(10, tag="t")
    with closing(_producer(kb, linger_ms=1000, compression_type="zstd")) as producer:
        for i, m in enumerate(msgs):
            producer.send(topic, key=m.key, value=m.value, timestamp_ms=base + 1000 * i)
        producer.flush(20)
    # One batch: the lookup must find the record inside it, not just the batch.
    assert partition_state(kb, topic)["batches"] == [(0, 9)]
    tp = TopicPartition(topic, 0)
    with closing(_consumer(kb)) as consumer:
        found = consumer.offsets_for_times({tp: base + 3500})[tp]
        assert (found.offset, found.timestamp) == (4, base + 4000)
        assert consumer.offsets_for_times({tp: base})[tp].offset == 0
        assert consumer.offsets_for_times({tp: base + 10_000})[tp] is None
        assert consumer.beginning_offsets([tp]) == {tp: 0}
        assert consumer.end_offsets([tp]) == {tp: 10}
    recs = consume_kafka_python(kb.bootstrap, topic, 6, offsets={0: found.offset})
    assert [(r.offset, r.timestamp, r.value) for r in recs] == \
        [(i, base + 1000 * i, msgs[i].value) for i in range(4, 10)]


def test_records_up_to_message_max_bytes_are_accepted_and_larger_refused(kb, admin):
    topic = _create(admin, unique_topic("size"))
    with closing(_producer(kb, max_request_size=4 * MAX_BYTES, retries=0)) as producer:
        exact = b"x" * (MAX_BYTES - ONE_RECORD_OVERHEAD)  # a batch of exactly message.max.bytes
        assert producer.send(topic, exact).get(20).offset == 0
        with pytest.raises(Errors.MessageSizeTooLargeError):
            producer.send(topic, exact + b"y").get(20)
        with pytest.raises(Errors.MessageSizeTooLargeError):
            producer.send(topic, b"z" * (2 * MAX_BYTES)).get(20)
        assert producer.send(topic, b"small").get(20).offset == 1  # nothing else was appended
    recs = consume_kafka_python(kb.bootstrap, topic, 2)
    assert [(r.offset, len(r.value)) for r in recs] == [(0, len(exact)), (1, 5)]


def test_the_limit_applies_to_the_compressed_batch(kb, admin):
    topic = _create(admin, unique_topic("compressed-size"))
    with closing(_producer(kb, compression_type="gzip", max_request_size=4 * MAX_BYTES)) as producer:
        assert producer.send(topic, bytes(3 * MAX_BYTES)).get(20).offset == 0  # zeros compress well
    assert [len(r.value) for r in consume_kafka_python(kb.bootstrap, topic, 1)] == [3 * MAX_BYTES]


def test_topic_config_max_message_bytes_overrides_the_broker(kb, admin):
    topic = _create(admin, unique_topic("topic-size"), configs={"max.message.bytes": "1000"})
    with closing(_producer(kb, retries=0, enable_idempotence=False)) as producer:
        assert producer.send(topic, b"a" * 900).get(20).offset == 0
        with pytest.raises(Errors.MessageSizeTooLargeError):
            producer.send(topic, b"b" * 1000).get(20)
        admin.alter_configs([ConfigResource("TOPIC", topic, {"max.message.bytes": "2000"})])
        assert producer.send(topic, b"c" * 1500).get(20).offset == 1  # the new limit applies at once


def test_producing_to_an_unknown_topic_creates_it(kb, admin):
    topic = unique_topic("auto")
    with closing(_producer(kb)) as producer:
        md = producer.send(topic, key=b"k", value=b"v").get(20)
    assert (md.topic, md.partition, md.offset) == (topic, 0, 0)
    assert topic in admin.list_topics()
    assert [r.value for r in consume_kafka_python(kb.bootstrap, topic, 1)] == [b"v"]


def test_metadata_auto_creation_follows_the_request_flag(kb, admin):
    asked_not_to = unique_topic("no-auto")
    with closing(_consumer(kb, allow_auto_create_topics=False)) as consumer:
        consumer.topics()
        assert not consumer.partitions_for_topic(asked_not_to)
    assert asked_not_to not in admin.list_topics()

    allowed = unique_topic("auto-meta")
    with closing(_consumer(kb, allow_auto_create_topics=True)) as consumer:
        consumer.assign([TopicPartition(allowed, 0)])
        consumer.poll(timeout_ms=100)  # the fetcher asks for metadata of what it was assigned
        wait_until(lambda: allowed in admin.list_topics(), what=f"{allowed} to be created")


def test_seek_into_the_middle_of_a_compressed_batch(kb, admin):
    topic = _create(admin, unique_topic("mid-batch"))
    # Sent within the linger time and flushed once: all ten records in one batch.
    with closing(_producer(kb, compression_type="gzip", linger_ms=1000)) as producer:
        futures = [producer.send(topic, key=b"k", value=b"v%d" % i) for i in range(10)]
        producer.flush(20)
    assert [f.get(20).offset for f in futures] == list(range(10))
    assert partition_state(kb, topic)["batches"] == [(0, 9)]
    # The broker answers with the whole batch from offset 0; the client drops offsets 0-4.
    recs = consume_kafka_python(kb.bootstrap, topic, 5, offsets={0: 5})
    assert [(r.offset, r.value) for r in recs] == [(i, b"v%d" % i) for i in range(5, 10)]


def test_a_batch_larger_than_the_fetch_limits_comes_back_whole(kb, admin):
    topic = _create(admin, unique_topic("big-batch"))
    with closing(_producer(kb)) as producer:
        for fill in b"ab":
            producer.send(topic, bytes([fill]) * 15_000).get(20)
    recs = consume_kafka_python(kb.bootstrap, topic, 2, max_partition_fetch_bytes=1000, fetch_max_bytes=1000)
    assert [(r.offset, r.value) for r in recs] == [(0, b"a" * 15_000), (1, b"b" * 15_000)]


def test_many_batches_read_through_many_small_fetches(kb, admin):
    topic = _create(admin, unique_topic("many"), 2)
    with closing(_producer(kb, batch_size=2000, compression_type="snappy")) as producer:
        futures = [producer.send(topic, key=b"k%d" % (i % 10), value=b"value-%05d" % i) for i in range(5000)]
        producer.flush(30)
        placed = [(f.get(20).partition, f.get(20).offset) for f in futures]
    assert len(partition_state(kb, topic, 0)["batches"]) > 10
    recs = consume_kafka_python(kb.bootstrap, topic, 5000, max_partition_fetch_bytes=4096, fetch_max_bytes=8192)
    assert_contiguous(recs)
    got = {(r.partition, r.offset): r.value for r in recs}
    assert len(got) == 5000
    assert all(got[where] == b"value-%05d" % i for i, where in enumerate(placed))


def test_log_append_time_topic_stamps_records_with_the_broker_clock(kb, admin):
    topic = _create(admin, unique_topic("append-time"), configs={"message.timestamp.type": "LogAppendTime"})
    before = int(time.time() * 1000)
    with closing(_producer(kb, compression_type="lz4")) as producer:
        md = producer.send(topic, key=b"k", value=b"v", timestamp_ms=1000).get(20)
    assert before <= md.timestamp <= int(time.time() * 1000)  # from the produce response
    with closing(_consumer(kb, auto_offset_reset="earliest")) as consumer:
        consumer.assign([TopicPartition(topic, 0)])
        got = []
        wait_until(lambda: got.extend(r for rs in consumer.poll(timeout_ms=100).values() for r in rs) or got,
                   what="the record")
        assert [(m.timestamp, m.timestamp_type, m.value) for m in got] == [(md.timestamp, 1, b"v")]


def test_a_deleted_and_recreated_topic_starts_empty(kb, admin):
    topic = _create(admin, unique_topic("recreate"))
    with closing(_producer(kb)) as producer:
        _send_all(producer, topic, sample_messages(5, tag="old"))
    admin.delete_topics([topic])
    # DeleteTopics answers once the topic has left the metadata; until the deletion has also
    # removed its logs, CreateTopics answers "marked for deletion" (TOPIC_ALREADY_EXISTS), as
    # Kafka's does: a client creates again until it may.
    wait_until(lambda: _created_unless_marked(admin, topic, 2), what="the topic created again")
    with closing(_producer(kb)) as producer:
        placed = _send_all(producer, topic, [Msg(b"k", b"new")], partition=1)
    assert placed == [(1, 0)]
    recs = consume_kafka_python(kb.bootstrap, topic, 1)
    assert [(r.partition, r.offset, r.value) for r in recs] == [(1, 0, b"new")]


LEGACY = [((0, 8, 2), codec) for codec in (None, "gzip", "snappy")] + \
    [((0, 10, 1), codec) for codec in (None, "gzip", "snappy", "lz4")]


@pytest.mark.parametrize("api_version, codec", LEGACY, ids=[f"{'.'.join(map(str, v))}-{c}" for v, c in LEGACY])
def test_legacy_message_sets_are_stored_as_v2_batches(kb, admin, api_version, codec):
    """An old producer's message sets (magic 0 or 1, Produce v0-v2) are readable by today's
    clients; magic 0 has no timestamps (read as -1)."""
    topic = _create(admin, unique_topic("legacy"))
    base = int(time.time() * 1000) - 1000
    with closing(_producer(kb, api_version=api_version, compression_type=codec)) as producer:
        futures = [producer.send(topic, key=b"k%d" % (i % 2), value=b"v%d" % i, timestamp_ms=base + i)
                   for i in range(6)]
        producer.flush(20)
        assert [f.get(20).offset for f in futures] == list(range(6))
    stamps = [-1] * 6 if api_version < (0, 10) else [base + i for i in range(6)]
    for read in (consume_kafka_python, consume_confluent):
        recs = read(kb.bootstrap, topic, 6)
        assert [(r.offset, r.key, r.value, r.timestamp) for r in recs] == \
            [(i, b"k%d" % (i % 2), b"v%d" % i, stamps[i]) for i in range(6)]


def test_legacy_lz4_message_sets_of_magic_0(kb, admin):
    """Clients before 0.10 wrote a wrong LZ4 header checksum in magic-0 sets; Kafka accepts it."""
    topic = _create(admin, unique_topic("legacy-lz4"))
    producer = _producer(kb, api_version=(0, 8, 2), compression_type="lz4", retries=0)
    try:
        assert producer.send(topic, key=b"k", value=b"v").get(20).offset == 0
    finally:
        producer.close(1)
    assert [r.value for r in consume_kafka_python(kb.bootstrap, topic, 1)] == [b"v"]


# --- delivery guarantees ---------------------------------------------------------------------------
@pytest.mark.parametrize("acks", [0, 1, "all"])
def test_acks(kb, admin, acks):
    topic = _create(admin, unique_topic(f"acks-{acks}"))
    msgs = sample_messages(25, tag=f"acks{acks}")
    with closing(_producer(kb, acks=acks)) as producer:
        placed = _send_all(producer, topic, msgs)
    if acks == 0:  # no response, so the offsets kafka-python reports are made up
        wait_until(lambda: partition_state(kb, topic)["high_watermark"] == 25, what="25 records")
        placed = [(0, i) for i in range(25)]
    else:
        assert placed == [(0, i) for i in range(25)]
    recs = consume_kafka_python(kb.bootstrap, topic, 25)
    assert_matches_sent(recs, msgs, placed)
    assert_contiguous(recs)


def test_acks_all_needs_min_insync_replicas(kb, admin):
    topic = _create(admin, unique_topic("min-isr"), configs={"min.insync.replicas": "2"})
    # One replica in the ISR, two required: refused, and nothing is appended.
    with closing(_producer(kb, acks="all", enable_idempotence=False, retries=0)) as producer:
        with pytest.raises(Errors.NotEnoughReplicasError):
            producer.send(topic, b"durable?").get(20)
    with closing(_producer(kb, acks=1)) as producer:  # acks=1 does not ask for the ISR
        assert producer.send(topic, b"leader only").get(20).offset == 0
    admin.alter_configs([ConfigResource("TOPIC", topic, {"min.insync.replicas": "1"})])
    with closing(_producer(kb, acks="all")) as producer:
        assert producer.send(topic, b"durable").get(20).offset == 1
    with pytest.raises(Errors.InvalidConfigurationError):
        admin.create_topics([NewTopic(unique_topic("bad-min-isr"), 1, 1, topic_configs={"min.insync.replicas": "0"})])


def test_default_producer_is_idempotent(kb, admin):
    topic = _create(admin, unique_topic("idem"))
    with closing(_producer(kb)) as producer:  # idempotence is on by default since KIP-679
        _send_all(producer, topic, sample_messages(10))
    ids = partition_state(kb, topic)["producer_ids"]
    assert len(ids) == 1 and ids[0] >= 0

    with closing(_producer(kb, enable_idempotence=False, acks=1)) as producer:
        _send_all(producer, topic, sample_messages(10))
    assert partition_state(kb, topic)["producer_ids"] == ids  # a plain producer has no id
    recs = consume_kafka_python(kb.bootstrap, topic, 20)
    assert_contiguous(recs)


# --- the log start offset moving ---------------------------------------------------------------------
def _produce_batches(kb, topic, count, **kw):
    """``count`` records, one batch each (a flush after every send)."""
    with closing(_producer(kb)) as producer:
        for i in range(count):
            producer.send(topic, key=b"k", value=b"record-%d" % i, **kw)
            producer.flush(20)


def test_delete_records_moves_the_earliest_offset(kb, admin):
    topic = _create(admin, unique_topic("delete-records"))
    _produce_batches(kb, topic, 10)
    tp = TopicPartition(topic, 0)
    result = admin.delete_records({tp: 6})
    assert result[tp]["low_watermark"] == 6
    with closing(_consumer(kb)) as consumer:
        assert consumer.beginning_offsets([tp]) == {tp: 6}
    # A position below the log start is out of range: 'earliest' resets to the new start...
    recs = consume_kafka_python(kb.bootstrap, topic, 4, offsets={0: 2})
    assert [r.offset for r in recs] == [6, 7, 8, 9]
    # ...'latest' to the end, and 'none' surfaces the error to the application.
    with closing(_consumer(kb, auto_offset_reset="latest")) as consumer:
        consumer.assign([tp])
        consumer.seek(tp, 2)
        consumer.poll(timeout_ms=500)
        assert wait_until(lambda: consumer.poll(timeout_ms=50) == {} and consumer.position(tp) == 10,
                          what="a reset to the end")
    with closing(_consumer(kb, auto_offset_reset="none")) as consumer:
        consumer.assign([tp])
        consumer.seek(tp, 2)
        with pytest.raises(Errors.OffsetOutOfRangeError):
            wait_until(lambda: consumer.poll(timeout_ms=100), what="OffsetOutOfRange")
    with pytest.raises(Errors.OffsetOutOfRangeError):
        admin.delete_records({tp: 11})


def test_retention_moves_the_earliest_offset(kb, admin):
    topic = _create(admin, unique_topic("retention"),
                    configs={"retention.ms": "60000", "segment.bytes": "100", "file.delete.delay.ms": "0"})
    old = int(time.time() * 1000) - 600_000
    _produce_batches(kb, topic, 6, timestamp_ms=old)  # older than retention.ms already
    # Each batch (about 80 bytes) fills a 100-byte segment, so the log has 6 segments.
    tp = TopicPartition(topic, 0)
    with closing(_consumer(kb)) as consumer:
        # Every segment but the active one is deleted: only the last batch is left.
        wait_until(lambda: consumer.beginning_offsets([tp])[tp] == 5, what="retention to delete old segments")
        assert consumer.end_offsets([tp]) == {tp: 6}
    recs = consume_kafka_python(kb.bootstrap, topic, 1, offsets={0: 0})
    assert [(r.offset, r.value) for r in recs] == [(5, b"record-5")]


# --- across clients -------------------------------------------------------------------------------
def test_records_from_kafka_python_read_the_same_by_every_client(kb, admin):
    topic = _create(admin, unique_topic("from-kafka-python"), 2)
    msgs = sample_messages(20, tag="kp", timestamp=int(time.time() * 1000) - 1000)
    with closing(_producer(kb, compression_type="lz4")) as producer:
        placed = _send_all(producer, topic, msgs)
    assert_all_clients_agree(kb.bootstrap, topic, msgs, placed)
