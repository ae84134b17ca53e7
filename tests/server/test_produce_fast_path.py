"""The produce fast path (``odradek/server/produce_fast_path.py``) against real clients, and
against the generic path on the same bytes.

A spy around ``ProduceFastPath.handle`` counts the requests it took and declined, so each
test also shows which path answered. The generic path is the reference: the same frames sent
to a broker with the fast path switched off must give the same responses and the same log
files, byte for byte.
"""

from __future__ import annotations

import asyncio
import struct
import subprocess
import time
from pathlib import Path

import crc32c
import pytest
from aiokafka import AIOKafkaProducer
from confluent_kafka import KafkaError, Producer
from kafka import KafkaProducer

from odradek.client.admin_quotas import ClientQuotaAlteration
from odradek.client.sync import AdminClient
from odradek.protocol import codec
from odradek.protocol.generated.error_codes import ErrorCode
from odradek.records.builder import BatchSpec, build_batch
from odradek.records.record import Record
from odradek.testing.broker import InProcessBroker
from tests.server.clients import (
    assert_all_clients_agree, assert_matches_sent, read_with_every_client, sample_messages, unique_topic,
)
from tests.server.group_clients import create_topic
from tests.server.wire import WireClient, fetch_body

CODECS = (0, 1, 2, 3, 4)  # none, gzip, snappy, lz4, zstd


class Spy:
    """Counts what the fast path took and declined. Installed before any client connects
    (connections look ``handle`` up when they are made)."""

    def __init__(self, broker: InProcessBroker, enabled: bool = True) -> None:
        self.taken = self.declined = 0
        fast = broker.broker.produce_fast_path
        original = fast.handle

        def handle(frame, connection):
            response = original(frame, connection) if enabled else None
            if response is None:
                self.declined += 1
            else:
                self.taken += 1
            return response

        fast.handle = handle


@pytest.fixture
def spied(tmp_path):
    with InProcessBroker(tmp_path / "data") as b:
        yield b, Spy(b)


# --- real clients -----------------------------------------------------------------------------
def _produce_confluent(bootstrap, topic, msgs, **config):
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, **config})
    placed, errors = [None] * len(msgs), []

    def done(i, err, m):
        if err:
            errors.append(err)
        else:
            placed[i] = (m.partition(), m.offset())

    for i, m in enumerate(msgs):
        producer.produce(topic, key=m.key, value=m.value, headers=list(m.headers),
                         on_delivery=lambda err, m, i=i: done(i, err, m))
    assert producer.flush(30) == 0 and not errors, errors
    return placed


def _produce_kafka_python(bootstrap, topic, msgs, **config):
    # kafka-python 3 is idempotent by default, like the Java client; acks=all then.
    config = {"enable_idempotence": False, "acks": 1, **config}
    producer = KafkaProducer(bootstrap_servers=bootstrap, linger_ms=5, **config)
    futures = [producer.send(topic, key=m.key, value=m.value, headers=list(m.headers)) for m in msgs]
    placed = [(md.partition, md.offset) for md in (f.get(30) for f in futures)]
    producer.close()
    return placed


def _produce_aiokafka(bootstrap, topic, msgs):
    async def run():
        producer = AIOKafkaProducer(bootstrap_servers=bootstrap, linger_ms=5)
        await producer.start()
        try:
            futures = [await producer.send(topic, key=m.key, value=m.value, headers=list(m.headers))
                       for m in msgs]
            return [(md.partition, md.offset) for md in await asyncio.gather(*futures)]
        finally:
            await producer.stop()
    return asyncio.run(run())


def _produce_kcat(bootstrap, topic, msgs):
    lines = b"".join(b"%d\n" % i for i in range(len(msgs)))
    subprocess.run(["kcat", "-b", bootstrap, "-P", "-t", topic, "-X", "linger.ms=5"], input=lines,
                   check=True, capture_output=True, timeout=60)


PRODUCERS = {"confluent-kafka": _produce_confluent, "kafka-python": _produce_kafka_python,
             "aiokafka": _produce_aiokafka}


@pytest.mark.parametrize("client", sorted(PRODUCERS))
def test_clients_produce_through_the_fast_path(spied, client):
    broker, spy = spied
    topic = unique_topic(f"fast-{client}")
    create_topic(broker.bootstrap, topic, 3)
    sent = sample_messages(300, tag=client)
    placed = PRODUCERS[client](broker.bootstrap, topic, sent)
    assert spy.taken > 0 and spy.declined == 0, (spy.taken, spy.declined)
    assert_all_clients_agree(broker.bootstrap, topic, sent, placed)


def test_kcat_produces_through_the_fast_path(spied):
    broker, spy = spied
    topic = unique_topic("fast-kcat")
    create_topic(broker.bootstrap, topic, 2)
    _produce_kcat(broker.bootstrap, topic, range(2000))
    assert spy.taken > 0 and spy.declined == 0, (spy.taken, spy.declined)
    recs = read_with_every_client(broker.bootstrap, topic, 2000)
    for name, got in recs.items():
        assert sorted(int(r.value) for r in got) == list(range(2000)), name


def test_acks_all_takes_the_fast_path(spied):
    broker, spy = spied
    topic = unique_topic("fast-acks-all")
    create_topic(broker.bootstrap, topic, 2)
    sent = sample_messages(200)
    placed = _produce_kafka_python(broker.bootstrap, topic, sent, acks="all")
    assert spy.taken > 0 and spy.declined == 0, (spy.taken, spy.declined)
    assert_all_clients_agree(broker.bootstrap, topic, sent, placed)


def test_acks_all_below_min_insync_replicas_is_refused_by_the_generic_path(spied):
    broker, spy = spied
    topic = unique_topic("fast-min-isr")
    create_topic(broker.bootstrap, topic, 1, **{"min.insync.replicas": 2})
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap, acks="all", retries=0, enable_idempotence=False)
    try:
        with pytest.raises(Exception, match="NotEnoughReplicas"):
            producer.send(topic, b"refused").get(30)
    finally:
        producer.close()
    assert spy.declined > 0 and spy.taken == 0, (spy.taken, spy.declined)


@pytest.mark.parametrize("client", ["confluent-kafka", "kafka-python"])
def test_idempotent_producers_go_the_generic_way(spied, client):
    broker, spy = spied
    topic = unique_topic("fast-idempotent")
    create_topic(broker.bootstrap, topic, 2)
    sent = sample_messages(200)
    if client == "confluent-kafka":
        placed = _produce_confluent(broker.bootstrap, topic, sent, **{"enable.idempotence": True})
    else:
        placed = _produce_kafka_python(broker.bootstrap, topic, sent, enable_idempotence=True, acks="all")
    assert spy.declined > 0 and spy.taken == 0, (spy.taken, spy.declined)
    assert_all_clients_agree(broker.bootstrap, topic, sent, placed)


@pytest.mark.parametrize("configs", [
    {"compression.type": "zstd"}, {"message.timestamp.type": "LogAppendTime"}, {"flush.messages": "1"},
], ids=lambda c: next(iter(c)))
def test_topics_that_rewrite_or_flush_go_the_generic_way(spied, configs):
    broker, spy = spied
    topic = unique_topic("fast-config")
    create_topic(broker.bootstrap, topic, 1, **configs)
    sent = sample_messages(50)
    placed = _produce_confluent(broker.bootstrap, topic, sent)
    assert spy.declined > 0 and spy.taken == 0, (spy.taken, spy.declined)
    assert_matches_sent(read_with_every_client(broker.bootstrap, topic, 50)["kafka-python"], sent, placed)


# --- the same bytes through both paths ----------------------------------------------------------
def _batch(values, codec_id: int, base_ts: int = 1_700_000_000_000) -> bytes:
    records = [Record(offset=i, timestamp=base_ts + i, key=b"k%d" % i, value=v, headers=(("h", b"x"),))
               for i, v in enumerate(values)]
    return build_batch(records, BatchSpec(compression=codec_id))


def _requests(topics: list[str]) -> list[tuple[int, object]]:
    """Produce requests of every version 3-11 mixing topics, partitions, several batches per
    partition and every codec, and some the fast path must decline (a bad CRC in one
    partition, a partition twice, an unknown partition, acks=0 with no response)."""
    m = codec.module("ProduceRequest")
    out = []
    for version in range(3, 12):
        data = []
        for t, topic in enumerate(topics):
            parts = []
            for p in range(2):
                batches = b"".join(_batch([b"v%d-%d-%d-%d" % (version, t, p, j) for j in range(3 + n)], c)
                                   for n, c in enumerate(CODECS[: 1 + (version + p) % 5]))
                parts.append(m.PartitionProduceData(index=p, records=batches))
            data.append(m.TopicProduceData(name=topic, partition_data=parts))
        out.append((version, m.MESSAGE(acks=1 if version % 2 else -1, timeout_ms=5000, topic_data=data)))
    bad = bytearray(_batch([b"corrupt"], 0))
    bad[-1] ^= 0xFF
    good = _batch([b"fine"], 0)
    one = [m.PartitionProduceData(index=0, records=good)]
    out.append((9, m.MESSAGE(acks=1, timeout_ms=5000, topic_data=[m.TopicProduceData(
        name=topics[0], partition_data=one + [m.PartitionProduceData(index=1, records=bytes(bad))])])))
    out.append((9, m.MESSAGE(acks=1, timeout_ms=5000, topic_data=[m.TopicProduceData(
        name=topics[0], partition_data=one + one)])))
    out.append((9, m.MESSAGE(acks=1, timeout_ms=5000, topic_data=[m.TopicProduceData(
        name=topics[1], partition_data=one + [m.PartitionProduceData(index=7, records=good)])])))
    out.append((7, m.MESSAGE(acks=0, timeout_ms=5000, topic_data=[m.TopicProduceData(
        name=topics[1], partition_data=one)])))
    return out


def _run(broker: InProcessBroker, topics, requests) -> list[bytes]:
    client = WireClient(broker.bootstrap)
    for topic in topics:
        create_topic(broker.bootstrap, topic, 2)
    responses = []
    try:
        for version, body in requests:
            client.send_raw(client.frame("Produce", version, body))
            if body.acks != 0:
                responses.append(client.recv_frame())
    finally:
        client.close()
    return responses


def _log_files(data_dir: Path) -> dict[str, bytes]:
    return {str(p.relative_to(data_dir)): p.read_bytes() for p in sorted(data_dir.rglob("*.log"))
            if not p.parent.name.startswith("__")}


# An authorizer (the client, User:ANONYMOUS, a super user) and a produce quota never reached:
# the fast path still answers, as the generic path would (throttle_time_ms 0).
SECURED = {"authorizer_class_name": "kafka.security.authorizer.AclAuthorizer", "super_users": "User:ANONYMOUS"}


def _set_default_produce_quota(broker: InProcessBroker, rate: float) -> None:
    admin = AdminClient(broker.bootstrap)
    try:
        assert set(admin.alter_client_quotas([ClientQuotaAlteration(
            {"client-id": None}, [("producer_byte_rate", rate)])]).values()) == {None}
    finally:
        admin.close()


@pytest.mark.parametrize("secured", [False, True], ids=["plain", "acls-and-quota"])
def test_fast_and_generic_paths_answer_and_write_the_same_bytes(tmp_path, secured):
    topics = ["same-a", "same-b"]
    requests = _requests(topics)
    results = {}
    for enabled in (True, False):
        data = tmp_path / f"data-{enabled}"
        with InProcessBroker(data, **(SECURED if secured else {})) as broker:
            if secured:
                _set_default_produce_quota(broker, 1e12)
            spy = Spy(broker, enabled)
            responses = _run(broker, topics, requests)
        results[enabled] = (responses, _log_files(data), spy)
    fast, generic = results[True], results[False]
    assert fast[2].taken == 9 and fast[2].declined == 4, (fast[2].taken, fast[2].declined)
    assert generic[2].taken == 0
    assert fast[0] == generic[0]
    assert fast[1] == generic[1] and len(fast[1]) == 4
    errors = [p.error_code for t in codec.decode_response(0, 9, fast[0][9])[1].responses
              for p in t.partition_responses]
    assert errors == [ErrorCode.NONE, ErrorCode.CORRUPT_MESSAGE]


def test_responses_keep_request_order_behind_a_waiting_fetch(spied):
    broker, spy = spied
    topic = unique_topic("fast-order")
    create_topic(broker.bootstrap, topic, 2)
    client = WireClient(broker.bootstrap)
    try:
        # A fetch of partition 1 that waits for data, then a produce to partition 0: the
        # produce is answered at once, but its response must follow the fetch's.
        fetch = client.frame("Fetch", 11, fetch_body(topic, 1, 0, max_wait_ms=300, min_bytes=1))
        m = codec.module("ProduceRequest")
        body = m.MESSAGE(acks=1, timeout_ms=5000, topic_data=[m.TopicProduceData(
            name=topic, partition_data=[m.PartitionProduceData(index=0, records=_batch([b"x"], 0))])])
        produce = client.frame("Produce", 9, body)
        client.send_raw(fetch + produce)
        first, second = client.recv_frame(), client.recv_frame()
    finally:
        client.close()
    correlation = struct.Struct(">i")
    assert correlation.unpack_from(first)[0] < correlation.unpack_from(second)[0]
    assert spy.taken == 1
    _, answer = codec.decode_response(0, 9, second)
    assert answer.responses[0].partition_responses[0].error_code == ErrorCode.NONE


def test_timestamp_bounds_take_in_range_batches_and_hand_on_the_rest(spied):
    broker, spy = spied
    topic = unique_topic("fast-ts-bounds")
    hour = 3_600_000
    create_topic(broker.bootstrap, topic, 1, **{"message.timestamp.before.max.ms": hour,
                                               "message.timestamp.after.max.ms": hour})
    producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 0})
    outcomes = []
    now = int(time.time() * 1000)
    for i, ts in enumerate([now, now - 2 * hour, now + 2 * hour, now + 1]):
        producer.produce(topic, value=b"v%d" % i, timestamp=ts,
                         on_delivery=lambda err, _m: outcomes.append(None if err is None else err.code()))
        assert producer.flush(20) == 0
    assert outcomes == [None, KafkaError.INVALID_TIMESTAMP, KafkaError.INVALID_TIMESTAMP, None]
    assert (spy.taken, spy.declined) == (2, 2)
    got = read_with_every_client(broker.bootstrap, topic, 2)["kafka-python"]
    assert [(r.offset, r.value, r.timestamp) for r in got] == [(0, b"v0", now), (1, b"v3", now + 1)]


def _claiming(records_count: int) -> bytes:
    """One real record under a header that claims ``records_count`` (CRC made valid again):
    records are not decoded on the produce path, so only the offsets' span can catch it."""
    batch = bytearray(_batch([b"liar"], 0))
    struct.pack_into(">i", batch, 23, records_count - 1)  # last_offset_delta
    struct.pack_into(">i", batch, 57, records_count)  # records_count
    struct.pack_into(">I", batch, 17, crc32c.crc32c(bytes(batch[21:])))
    return bytes(batch)


@pytest.mark.parametrize("enabled", [True, False])
def test_what_the_log_would_refuse_is_one_partition_error_not_half_a_request(tmp_path, enabled):
    """Bytes beyond segment.bytes (RECORD_LIST_TOO_LARGE, as Kafka) and offsets spanning more
    than 2**31 - 1 (INVALID_RECORD) are refused per partition, before anything is appended:
    the request's other partitions are appended once, and the connection stays open."""
    m = codec.module("ProduceRequest")
    with InProcessBroker(tmp_path / "data") as broker:
        spy = Spy(broker, enabled)
        create_topic(broker.bootstrap, "fine", 1)
        create_topic(broker.bootstrap, "small", 2, **{"segment.bytes": 200})
        big = _batch([b"x" * 300], 0)
        liars = _claiming(2**31 - 1) + _claiming(2**31 - 1)
        client = WireClient(broker.bootstrap)
        try:
            data = [m.TopicProduceData(name="fine", partition_data=[m.PartitionProduceData(index=0, records=_batch([b"ok"], 0))]),
                    m.TopicProduceData(name="small", partition_data=[m.PartitionProduceData(index=0, records=big),
                                                                     m.PartitionProduceData(index=1, records=liars)])]
            client.send_raw(client.frame("Produce", 9, m.MESSAGE(acks=1, timeout_ms=5000, topic_data=data)))
            _, answer = codec.decode_response(0, 9, client.recv_frame())
            errors = {(t.name, p.index): (p.error_code, p.base_offset)
                      for t in answer.responses for p in t.partition_responses}
            assert errors == {("fine", 0): (ErrorCode.NONE, 0),
                              ("small", 0): (ErrorCode.RECORD_LIST_TOO_LARGE, -1),
                              ("small", 1): (ErrorCode.INVALID_RECORD, -1)}
            client.send_raw(client.frame("Fetch", 12, fetch_body("fine", 0, 0)))
            assert client.recv_frame()  # still open
        finally:
            client.close()
        assert spy.taken == 0 and spy.declined == 1
        fine = broker.broker.replica_manager.partitions[("fine", 0)]
        small = [broker.broker.replica_manager.partitions[("small", i)] for i in range(2)]
        assert fine.log.log_end_offset == 1 and [p.log.log_end_offset for p in small] == [0, 0]
