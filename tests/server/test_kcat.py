"""kcat (Debian's 1.7.1, librdkafka 2.0.2) as a subprocess against a real odradek broker.

kcat reads and writes records as lines, so the data here is printable text; ``-J`` gives
every consumed record's partition, offset, timestamp, key, payload and headers. Topics that
need several partitions or configs are created with confluent-kafka's AdminClient (kcat
itself only creates topics by auto-creation).
"""

from __future__ import annotations

import json
import re
import time

import pytest
from confluent_kafka import TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic, OffsetSpec

from odradek.testing.broker import InProcessBroker
from tests.server.clients import (
    CODECS, Msg, assert_all_clients_agree, assert_contiguous, assert_matches_sent, by_partition,
    consume_kafka_python, consume_kcat, kcat, parse_kcat_json, partition_state, unique_topic, wait_until,
)

MAX_BYTES = 20_000
ONE_RECORD_OVERHEAD = 72  # batch bytes beyond the value; see test_kafka_python.py
HEADERS = (("src", b"kcat"), ("empty", b""), ("snow", "☃".encode()))
HEADER_ARGS = ("-H", "src=kcat", "-H", "empty=", "-H", "snow=☃")


@pytest.fixture(scope="module")
def kb(tmp_path_factory):
    with InProcessBroker(tmp_path_factory.mktemp("kcat") / "data", message_max_bytes=MAX_BYTES,
                         log_retention_check_interval_ms=100) as b:
        yield b


@pytest.fixture(scope="module")
def admin(kb):
    return AdminClient({"bootstrap.servers": kb.bootstrap})


def _create(admin, name, partitions=1, configs=None):
    for future in admin.create_topics([NewTopic(name, partitions, 1, config=configs or {})]).values():
        future.result(20)
    return name


def _messages(n: int, keyed: bool, tag: str) -> list[Msg]:
    return [Msg(f"key-{i % 5}".encode() if keyed else None, f"{tag}-{i}-é".encode(), HEADERS) for i in range(n)]


def _produce(kb, topic, msgs: list[Msg], *args: str) -> None:
    """One kcat run producing ``msgs`` as lines (``key:value`` when keyed), all with HEADERS."""
    keyed = msgs[0].key is not None
    lines = b"".join((m.key + b":" if keyed else b"") + m.value + b"\n" for m in msgs)
    kcat(kb.bootstrap, "-P", "-t", topic, *(("-K", ":") if keyed else ()), *HEADER_ARGS, *args, input=lines)


def _end_offsets(proc) -> dict[int, int]:
    """``{partition: offset}`` from kcat's "Reached end of topic T [p] at offset N" lines."""
    return {int(p): int(o) for p, o in re.findall(rb"Reached end of topic \S+ \[(\d+)\] at offset (\d+)", proc.stderr)}


# --- metadata -------------------------------------------------------------------------------
def test_metadata_lists_broker_and_topics(kb, admin):
    topic = _create(admin, unique_topic("meta"), 3)
    meta = json.loads(kcat(kb.bootstrap, "-L", "-J").stdout)
    assert meta["controllerid"] == 1
    assert meta["brokers"] == [{"id": 1, "name": f"127.0.0.1:{kb.port}"}]
    [described] = [t for t in meta["topics"] if t["topic"] == topic]
    assert described["partitions"] == [
        {"partition": i, "leader": 1, "replicas": [{"id": 1}], "isrs": [{"id": 1}]} for i in range(3)]
    text = kcat(kb.bootstrap, "-L", "-t", topic).stdout.decode()
    assert f'topic "{topic}" with 3 partitions' in text
    assert "partition 2, leader 1, replicas: 1, isrs: 1" in text


def test_metadata_for_an_unknown_topic_creates_it(kb, admin):
    topic = unique_topic("auto-meta")
    text = kcat(kb.bootstrap, "-L", "-t", topic).stdout.decode()
    assert f'topic "{topic}" with 1 partitions' in text
    assert topic in admin.list_topics(timeout=10).topics


# --- produce and consume ----------------------------------------------------------------------
@pytest.mark.parametrize("keyed", [True, False], ids=["keyed", "unkeyed"])
@pytest.mark.parametrize("codec", CODECS)
def test_produce_and_consume_every_codec(kb, admin, codec, keyed):
    topic = _create(admin, unique_topic(f"codec-{codec}"), 3)
    msgs = _messages(40, keyed, codec)
    _produce(kb, topic, msgs, "-z", codec)
    recs = consume_kcat(kb.bootstrap, topic, len(msgs))
    assert_matches_sent(recs, msgs)
    assert_contiguous(recs)
    for items in by_partition(recs).values():  # each partition keeps the order of sending
        sent_order = [int(r.value.split(b"-")[1]) for r in items]
        assert sent_order == sorted(sent_order)
    assert sorted(consume_kafka_python(kb.bootstrap, topic, len(msgs)), key=lambda r: (r.partition, r.offset)) == \
        sorted(recs, key=lambda r: (r.partition, r.offset))


def test_consume_from_beginning_end_tail_and_timestamp(kb, admin):
    topic = _create(admin, unique_topic("offsets"))
    _produce(kb, topic, _messages(5, True, "first"))
    first = consume_kcat(kb.bootstrap, topic, 5)
    cut = max(r.timestamp for r in first) + 1
    wait_until(lambda: time.time() * 1000 > cut + 1, what="the clock to pass the first batch")
    _produce(kb, topic, _messages(3, True, "second"))

    assert [r.offset for r in consume_kcat(kb.bootstrap, topic, 8, offset="beginning")] == list(range(8))
    end = kcat(kb.bootstrap, "-C", "-t", topic, "-o", "end", "-e")
    assert end.stdout == b"" and _end_offsets(end) == {0: 8}
    tail = parse_kcat_json(kcat(kb.bootstrap, "-C", "-t", topic, "-o", "-2", "-e", "-J").stdout)
    assert [r.offset for r in tail] == [6, 7]
    since = consume_kcat(kb.bootstrap, topic, 3, offset=f"s@{cut}")
    assert [(r.offset, r.value) for r in since] == [(5 + i, f"second-{i}-é".encode()) for i in range(3)]
    query = kcat(kb.bootstrap, "-Q", "-t", f"{topic}:0:{cut}").stdout.decode()
    assert f"{topic} [0] offset 5" in query


def test_records_up_to_message_max_bytes_are_accepted_and_larger_refused(kb, admin):
    topic = _create(admin, unique_topic("size"))
    exact = b"x" * (MAX_BYTES - ONE_RECORD_OVERHEAD)  # a batch of exactly message.max.bytes
    big = ("-X", f"message.max.bytes={4 * MAX_BYTES}")
    kcat(kb.bootstrap, "-P", "-t", topic, *big, input=exact + b"\n")
    refused = kcat(kb.bootstrap, "-P", "-t", topic, *big, input=exact + b"y\n", check=False)
    assert refused.returncode != 0
    assert b"Message size too large" in refused.stderr
    kcat(kb.bootstrap, "-P", "-t", topic, input=b"small\n")
    recs = consume_kcat(kb.bootstrap, topic, 2)
    assert [(r.offset, len(r.value)) for r in recs] == [(0, len(exact)), (1, 5)]


def test_seek_into_the_middle_of_a_batch_and_small_fetches(kb, admin):
    topic = _create(admin, unique_topic("mid-batch"))
    _produce(kb, topic, _messages(10, True, "m"), "-z", "lz4", "-X", "linger.ms=500")
    kcat(kb.bootstrap, "-P", "-t", topic, input=b"b" * 15_000 + b"\n")
    assert partition_state(kb, topic)["batches"] == [(0, 9), (10, 10)]
    recs = parse_kcat_json(kcat(kb.bootstrap, "-C", "-t", topic, "-o", "5", "-c", "5", "-J").stdout)
    assert [(r.offset, r.value) for r in recs] == [(i, f"m-{i}-é".encode()) for i in range(5, 10)]
    small = ("-X", "fetch.max.bytes=1000", "-X", "message.max.bytes=1000", "-X", "max.partition.fetch.bytes=1000")
    recs = parse_kcat_json(kcat(kb.bootstrap, "-C", "-t", topic, "-o", "10", "-e", "-J", *small).stdout)
    assert [(r.offset, r.value) for r in recs] == [(10, b"b" * 15_000)]


def test_log_append_time_topic(kb, admin):
    topic = _create(admin, unique_topic("append-time"), configs={"message.timestamp.type": "LogAppendTime"})
    before = int(time.time() * 1000)
    _produce(kb, topic, _messages(3, True, "t"), "-z", "snappy")
    out = kcat(kb.bootstrap, "-C", "-t", topic, "-o", "beginning", "-e", "-J").stdout
    records = [json.loads(line) for line in out.splitlines()]
    assert [r["tstype"] for r in records] == ["logappend"] * 3
    assert all(before <= r["ts"] <= int(time.time() * 1000) for r in records)


def test_producing_to_an_unknown_topic_creates_it(kb, admin):
    topic = unique_topic("auto")
    _produce(kb, topic, _messages(3, True, "auto"))
    assert topic in admin.list_topics(timeout=10).topics
    assert [r.offset for r in consume_kcat(kb.bootstrap, topic, 3)] == [0, 1, 2]


# --- delivery guarantees ---------------------------------------------------------------------------
@pytest.mark.parametrize("acks", ["0", "1", "all"])
def test_acks(kb, admin, acks):
    topic = _create(admin, unique_topic(f"acks-{acks}"))
    msgs = _messages(25, True, f"acks{acks}")
    _produce(kb, topic, msgs, "-X", f"acks={acks}")
    wait_until(lambda: partition_state(kb, topic)["high_watermark"] == 25, what="25 records")
    recs = consume_kcat(kb.bootstrap, topic, 25)
    assert_matches_sent(recs, msgs, [(0, i) for i in range(25)])


def test_idempotent_producer(kb, admin):
    topic = _create(admin, unique_topic("idem"))
    msgs = _messages(30, True, "idem")
    _produce(kb, topic, msgs, "-X", "enable.idempotence=true", "-z", "lz4")
    assert len(partition_state(kb, topic)["producer_ids"]) == 1
    _produce(kb, topic, msgs[:1])  # not idempotent: no producer id
    assert len(partition_state(kb, topic)["producer_ids"]) == 1
    recs = consume_kcat(kb.bootstrap, topic, 31)
    assert_contiguous(recs)
    assert [r.value for r in recs] == [m.value for m in msgs + msgs[:1]]


# --- the log start offset moving ---------------------------------------------------------------------
def test_delete_records_seen_by_kcat(kb, admin):
    topic = _create(admin, unique_topic("delete-records"))
    _produce(kb, topic, _messages(10, True, "d"))
    tp = TopicPartition(topic, 0, 6)
    assert admin.delete_records([tp])[tp].result(20).low_watermark == 6
    assert [r.offset for r in consume_kcat(kb.bootstrap, topic, 4)] == [6, 7, 8, 9]
    reset = kcat(kb.bootstrap, "-C", "-t", topic, "-o", "2", "-e", "-J", "-X", "auto.offset.reset=earliest")
    assert [r.offset for r in parse_kcat_json(reset.stdout)] == [6, 7, 8, 9]
    to_end = kcat(kb.bootstrap, "-C", "-t", topic, "-o", "2", "-e", "-J", "-X", "auto.offset.reset=latest")
    assert to_end.stdout == b"" and _end_offsets(to_end) == {0: 10}
    query = kcat(kb.bootstrap, "-Q", "-t", f"{topic}:0:-2").stdout.decode()  # -2: the earliest offset
    assert f"{topic} [0] offset 6" in query


def test_retention_by_size_seen_by_kcat(kb, admin):
    topic = _create(admin, unique_topic("retention"),
                    configs={"retention.bytes": "50", "segment.bytes": "100", "file.delete.delay.ms": "0"})
    for i in range(6):  # one kcat run, one batch, one 100-byte segment each
        kcat(kb.bootstrap, "-P", "-t", topic, "-K", ":", input=b"k:r%d\n" % i)
    tp = TopicPartition(topic, 0)
    # Retention deletes the oldest segment while the rest still hold retention.bytes (each
    # segment here is one batch of about 70 bytes): only the active segment is left.
    wait_until(lambda: admin.list_offsets({tp: OffsetSpec.earliest()})[tp].result(20).offset == 5,
               what="retention to move the log start")
    recs = consume_kcat(kb.bootstrap, topic, 1)
    assert [(r.offset, r.value) for r in recs] == [(5, b"r5")]


# --- across clients -------------------------------------------------------------------------------
def test_records_from_kcat_read_the_same_by_every_client(kb, admin):
    topic = _create(admin, unique_topic("from-kcat"), 2)
    msgs = _messages(20, True, "kc")
    _produce(kb, topic, msgs, "-z", "gzip")
    recs = assert_all_clients_agree(kb.bootstrap, topic, msgs)
    now = time.time() * 1000
    assert all(now - 60_000 < r.timestamp <= now for r in recs)
