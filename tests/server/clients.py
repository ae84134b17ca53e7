"""Helpers shared by the real-client compatibility tests (kafka-python, confluent-kafka,
aiokafka, kcat) against a broker on 127.0.0.1.

Every consumer here reads without a consumer group (group coordination is another issue):
kafka-python and aiokafka with ``group_id=None``, confluent-kafka with ``assign()`` and
auto-commit off, kcat with ``-C`` (a simple consumer). Each returns the records it read as
``Rec`` values, so that what different clients see can be compared field by field.

Waiting is always by polling against a deadline (``wait_until``), never by a fixed sleep.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import logging
import subprocess
import time
import uuid
from dataclasses import dataclass

CODECS = ("none", "gzip", "snappy", "lz4", "zstd")
DEADLINE_S = 20.0
_names = itertools.count()

# The clients log every connection the broker closes at the end of a module; that is noise.
for _name in ("kafka", "aiokafka"):
    logging.getLogger(_name).setLevel(logging.CRITICAL)


def unique_topic(prefix: str) -> str:
    """A topic name no other test uses (tests share module-scoped brokers)."""
    return f"{prefix}-{next(_names)}-{uuid.uuid4().hex[:6]}"


def wait_until(predicate, timeout: float = DEADLINE_S, interval: float = 0.05, what: str = "condition"):
    """Poll ``predicate`` until it returns something truthy; return that, or fail the test."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() >= deadline:
            raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what} (last: {value!r})")
        time.sleep(interval)


# --- what is produced -------------------------------------------------------------------------
@dataclass(frozen=True)
class Msg:
    """One record to produce: key and value are bytes or None; headers ``((str, bytes), ...)``."""

    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes], ...] = ()
    timestamp: int | None = None


def sample_messages(n: int, *, keyed: bool = True, tag: str = "", timestamp: int | None = None) -> list[Msg]:
    """``n`` distinct records: keys cycle over 5 values; values are UTF-8 text, all 256 byte
    values, empty or (keyed only) null; headers have non-ASCII names, repeated names, empty
    and binary values. ``timestamp`` gives record i the timestamp ``timestamp + i``.
    """
    out = []
    for i in range(n):
        key = f"key-{i % 5}".encode() if keyed else None
        value = f"{tag}value-{i}-é☃".encode()
        if i % 4 == 1:
            value = bytes(range(256)) + value
        elif i % 4 == 2:
            value = b""
        elif i % 7 == 3 and keyed:
            value = None  # a tombstone (a null value needs a key)
        headers = (("seq", str(i).encode()), ("h-é", f"x{i % 3}".encode()),
                   ("dup", b"1"), ("dup", b""), ("bin", bytes([0, 255, i % 256])))
        ts = None if timestamp is None else timestamp + i
        out.append(Msg(key, value, headers, ts))
    return out


# --- what is consumed -------------------------------------------------------------------------
@dataclass(frozen=True)
class Rec:
    """One consumed record, normalised across clients."""

    topic: str
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...]
    timestamp: int

    @property
    def content(self) -> tuple:
        return (self.key, self.value, self.headers)


def by_partition(recs: list[Rec]) -> dict[int, list[Rec]]:
    out: dict[int, list[Rec]] = {}
    for r in recs:
        out.setdefault(r.partition, []).append(r)
    return out


def assert_contiguous(recs: list[Rec], start: int | dict[int, int] = 0) -> None:
    """Within each partition the offsets read are consecutive, ascending, from ``start``."""
    for partition, items in by_partition(recs).items():
        first = start[partition] if isinstance(start, dict) else start
        offsets = [r.offset for r in items]
        assert offsets == list(range(first, first + len(items))), f"partition {partition}: {offsets}"


def assert_matches_sent(recs: list[Rec], sent: list[Msg], placed: list[tuple[int, int]] | None = None,
                        check_timestamps: bool = False) -> None:
    """Each partition holds exactly the records sent to it, in the order they were sent.

    ``placed[i]`` is ``(partition, offset)`` as the producer reported it for ``sent[i]``;
    without it, only content and per-key order are compared (keyed records of one key go to
    one partition, so their relative order is kept).
    """
    assert len(recs) == len(sent), f"read {len(recs)} records, sent {len(sent)}"
    if placed is not None:
        got = {(r.partition, r.offset): r for r in recs}
        for msg, where in zip(sent, placed, strict=True):
            rec = got[where]
            assert rec.content == (msg.key, msg.value, msg.headers), (where, rec, msg)
            if check_timestamps and msg.timestamp is not None:
                assert rec.timestamp == msg.timestamp, (where, rec.timestamp, msg.timestamp)
        return
    assert sorted(map(_sort_key, recs)) == sorted(_sort_key(Rec("", 0, 0, m.key, m.value, m.headers, 0))
                                                  for m in sent)
    for key in {m.key for m in sent if m.key is not None}:
        want = [m.value for m in sent if m.key == key]
        for items in by_partition(recs).values():
            have = [r.value for r in items if r.key == key]
            assert have in ([], want), f"order of key {key!r}: {have} != {want}"


def _sort_key(r: Rec):
    return (r.key or b"", r.value or b"", r.value is None, r.headers)


# --- consumers -----------------------------------------------------------------------------
def consume_kafka_python(bootstrap: str, topic: str, expected: int, *, offsets: dict[int, int] | None = None,
                         timeout: float = DEADLINE_S, **config) -> list[Rec]:
    """Read ``expected`` records from every partition of ``topic`` (from ``offsets`` or earliest)."""
    from kafka import KafkaConsumer, TopicPartition

    consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id=None, enable_auto_commit=False,
                             auto_offset_reset="earliest", **config)
    try:
        parts = wait_until(lambda: consumer.partitions_for_topic(topic), what=f"partitions of {topic}")
        tps = [TopicPartition(topic, p) for p in sorted(parts)]
        consumer.assign(tps)
        for tp in tps:
            if offsets is None:
                consumer.seek_to_beginning(tp)
            elif tp.partition in offsets:
                consumer.seek(tp, offsets[tp.partition])
        recs: list[Rec] = []
        deadline = time.monotonic() + timeout
        while len(recs) < expected and time.monotonic() < deadline:
            for items in consumer.poll(timeout_ms=200).values():
                recs.extend(Rec(m.topic, m.partition, m.offset, m.key, m.value,
                                tuple((k, v) for k, v in m.headers), m.timestamp) for m in items)
        return recs
    finally:
        consumer.close()


def read_from_beginning(bootstrap: str, topic: str, partitions: int,
                        isolation_level: str = "read_uncommitted") -> list[tuple[int, int, bytes]]:
    """Every record of partitions 0 to ``partitions - 1`` of ``topic`` with kafka-python, from
    the beginning until 1.5 s pass without one, as sorted ``(partition, offset, value)``."""
    from kafka import KafkaConsumer, TopicPartition

    consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id=None, enable_auto_commit=False,
                             auto_offset_reset="earliest", consumer_timeout_ms=1500,
                             isolation_level=isolation_level)
    try:
        tps = [TopicPartition(topic, p) for p in range(partitions)]
        consumer.assign(tps)
        consumer.seek_to_beginning(*tps)
        return sorted((r.partition, r.offset, r.value) for r in consumer)
    finally:
        consumer.close()


def consume_confluent(bootstrap: str, topic: str, expected: int, *, offsets: dict[int, int] | None = None,
                      timeout: float = DEADLINE_S, partitions: int | None = None, **config) -> list[Rec]:
    """Read with confluent-kafka's ``assign()`` (a group.id is required but never joined)."""
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

    conf = {"bootstrap.servers": bootstrap, "group.id": "odradek-tests-no-group",
            "enable.auto.commit": False, "auto.offset.reset": "earliest", **config}
    consumer = Consumer(conf)
    try:
        if partitions is None:
            meta = consumer.list_topics(topic, timeout=10).topics[topic]
            assert meta.error is None, meta.error
            partitions = len(meta.partitions)
        tps = [TopicPartition(topic, p, (offsets or {}).get(p, OFFSET_BEGINNING)) for p in range(partitions)]
        consumer.assign(tps)
        recs: list[Rec] = []
        deadline = time.monotonic() + timeout
        while len(recs) < expected and time.monotonic() < deadline:
            for m in consumer.consume(num_messages=1000, timeout=0.2):
                if m.error() is None:
                    recs.append(_confluent_rec(m))
                elif m.topic() is not None:
                    raise AssertionError(f"{m.topic()}-{m.partition()}: {m.error()}")
                # else: an error of the consumer group (librdkafka looks for the group's
                # coordinator whenever group.id is set, even for assign()); not this read's.
        return recs
    finally:
        consumer.close()


def _confluent_rec(m) -> Rec:
    headers = tuple((k, v) for k, v in (m.headers() or []))
    return Rec(m.topic(), m.partition(), m.offset(), m.key(), m.value(), headers, m.timestamp()[1])


def consume_aiokafka(bootstrap: str, topic: str, expected: int, *, offsets: dict[int, int] | None = None,
                     timeout: float = DEADLINE_S, **config) -> list[Rec]:
    return asyncio.run(aiokafka_read(bootstrap, topic, expected, offsets=offsets, timeout=timeout, **config))


async def aiokafka_read(bootstrap: str, topic: str, expected: int, *, offsets: dict[int, int] | None = None,
                        timeout: float = DEADLINE_S, **config) -> list[Rec]:
    from aiokafka import AIOKafkaConsumer, TopicPartition

    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, group_id=None, enable_auto_commit=False,
                                auto_offset_reset="earliest", **config)
    await consumer.start()
    try:
        parts = None
        deadline = time.monotonic() + timeout
        while not parts and time.monotonic() < deadline:
            # partitions_for_topic() only knows topics the consumer already uses; this is the
            # metadata request that topics() makes, kept whole.
            parts = (await consumer._client.fetch_all_metadata()).partitions_for_topic(topic)
        assert parts, f"no partitions for {topic}"
        tps = [TopicPartition(topic, p) for p in sorted(parts)]
        consumer.assign(tps)
        for tp in tps:
            if offsets is None:
                await consumer.seek_to_beginning(tp)
            elif tp.partition in offsets:
                consumer.seek(tp, offsets[tp.partition])
        recs: list[Rec] = []
        while len(recs) < expected and time.monotonic() < deadline:
            for items in (await consumer.getmany(timeout_ms=200)).values():
                recs.extend(Rec(m.topic, m.partition, m.offset, m.key, m.value,
                                tuple((k, v) for k, v in m.headers), m.timestamp) for m in items)
        return recs
    finally:
        await consumer.stop()


def kcat(bootstrap: str, *args: str, input: bytes | None = None, timeout: float = 30,
         check: bool = True) -> subprocess.CompletedProcess:
    """Run Debian's kcat against ``bootstrap``; with ``check`` a non-zero exit fails the test.

    Consumers (``-C``) get ``fetch.wait.max.ms=50``: with ``-e`` kcat stops at the end of
    each partition, which librdkafka learns from a fetch at the high watermark that waits
    that long for data (500 ms by default, for every kcat run).
    """
    if "-C" in args:
        args = ("-X", "fetch.wait.max.ms=50", *args)
    proc = subprocess.run(["kcat", "-b", bootstrap, *args], input=input, capture_output=True, timeout=timeout)
    if check:
        assert proc.returncode == 0, f"kcat {' '.join(args)} exited {proc.returncode}: {proc.stderr.decode()}"
    return proc


def parse_kcat_json(stdout: bytes) -> list[Rec]:
    """Records from ``kcat -C -J``: keys, payloads and header values are written as JSON
    strings holding the raw bytes (control characters escaped), so decoding the line with
    ``surrogateescape`` and encoding the strings back the same way gives the bytes again."""
    recs = []
    for line in stdout.splitlines():
        if not line.strip():
            continue
        obj = json.loads(line.decode("utf-8", "surrogateescape"))
        flat = obj.get("headers") or []
        headers = tuple((flat[i], _raw(flat[i + 1])) for i in range(0, len(flat), 2))
        recs.append(Rec(obj["topic"], obj["partition"], obj["offset"], _raw(obj["key"]), _raw(obj["payload"]),
                        headers, obj["ts"]))
    return recs


def _raw(text: str | None) -> bytes | None:
    return None if text is None else text.encode("utf-8", "surrogateescape")


def consume_kcat(bootstrap: str, topic: str, expected: int, *, offset: str = "beginning",
                 timeout: float = DEADLINE_S) -> list[Rec]:
    """``kcat -C -e``: every partition from ``offset`` to its end, then exit."""
    proc = kcat(bootstrap, "-C", "-t", topic, "-o", offset, "-e", "-J", timeout=timeout)
    recs = parse_kcat_json(proc.stdout)
    assert len(recs) >= expected or expected < 0, f"kcat read {len(recs)} of {expected}: {proc.stderr.decode()}"
    return recs


CONSUMERS = {
    "kafka-python": consume_kafka_python,
    "confluent-kafka": consume_confluent,
    "aiokafka": consume_aiokafka,
    "kcat": consume_kcat,
}


def read_with_every_client(bootstrap: str, topic: str, expected: int) -> dict[str, list[Rec]]:
    """The same topic read from the beginning by each client, records sorted by position."""
    return {name: sorted(fn(bootstrap, topic, expected), key=lambda r: (r.partition, r.offset))
            for name, fn in CONSUMERS.items()}


def assert_all_clients_agree(bootstrap: str, topic: str, sent: list[Msg], placed=None) -> list[Rec]:
    """Every client reads exactly what was sent, with identical keys/values/headers/timestamps."""
    seen = read_with_every_client(bootstrap, topic, len(sent))
    reference = seen["kafka-python"]
    assert_matches_sent(reference, sent, placed, check_timestamps=True)
    for name, recs in seen.items():
        assert recs == reference, f"{name} read differently from kafka-python"
    return reference


# --- the broker's view ---------------------------------------------------------------------
def partition_state(broker, topic: str, index: int = 0) -> dict:
    """Log start/end, high watermark, producer ids and batch offset ranges of a partition,
    read on the broker's loop."""
    def look():
        part = broker.broker.replica_manager.get(topic, index)
        return {
            "log_start_offset": part.log_start_offset,
            "log_end_offset": part.log_end_offset,
            "high_watermark": part.high_watermark,
            "producer_ids": sorted(part.producer_state.entries()),
            "segments": len(part.log.segments),
            "batches": [(h.base_offset, h.last_offset) for h in part.log.batch_headers(part.log_start_offset)],
        }
    return broker.call(look)


def assert_topic_configs_refused(admin, configs: dict[str, str], prefix: str) -> None:
    """``configs`` are refused with INVALID_CONFIG (40) by kafka-python's ``admin``: when a
    topic is created with them, and when they are altered on an existing topic, both with
    AlterConfigs and with IncrementalAlterConfigs."""
    from kafka import errors as kafka_errors
    from kafka.admin import ConfigResource, NewTopic

    topic = unique_topic(prefix)
    try:
        admin.create_topics([NewTopic(topic, 1, 1, topic_configs=configs)])
    except kafka_errors.InvalidConfigurationError:
        pass
    else:
        raise AssertionError(f"creating {topic} with {configs} was not refused")
    admin.create_topics([NewTopic(topic, 1, 1)])
    for incremental in (False, True):
        result = admin.alter_configs([ConfigResource("TOPIC", topic, configs)], incremental=incremental)
        assert str(result["topic"][topic]).startswith("[Error 40] InvalidConfigurationError")
