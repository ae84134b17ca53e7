"""Fetch v0-v3: old clients read what modern clients wrote, down-converted to magic 0/1.

Records are produced by confluent-kafka (v2 batches, uncompressed and gzip); raw Fetch frames
of each old version decode them as legacy message sets, and kafka-python forced to old API
versions consumes them as an old client would.
"""

from __future__ import annotations

import time

import pytest

from odradek.protocol import codec
from odradek.protocol.generated.error_codes import ErrorCode
from odradek.records.legacy import LegacyBatch, iter_messages
from odradek.testing.broker import InProcessBroker
from tests.server.clients import unique_topic
from tests.server.wire import WireClient, message

T0 = 1_700_000_000_000
N = 40


def _produce(bootstrap: str, topic: str, compression: str, configs: dict[str, str] | None = None) -> None:
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, 1, 1, config=configs or {})])[topic].result(10)
    producer = Producer({"bootstrap.servers": bootstrap, "compression.type": compression,
                         "linger.ms": 5, "batch.num.messages": 16})
    for i in range(N):
        key = None if i % 5 == 4 else b"key-%d" % i
        producer.produce(topic, key=key, value=b"value-%d" % i * (1 + i % 3), timestamp=T0 + i,
                         headers=[("h", b"dropped")])
    assert producer.flush(10) == 0


def _expected(i: int) -> tuple:
    return (i, None if i % 5 == 4 else b"key-%d" % i, b"value-%d" % i * (1 + i % 3), T0 + i)


@pytest.fixture(scope="module")
def topics(shared_broker):
    names = {c: unique_topic(f"old-{c}") for c in ("none", "gzip")}
    for compression, name in names.items():
        _produce(shared_broker.bootstrap, name, compression)
    return names


def _fetch(client: WireClient, version: int, topic: str, offset: int, partition_max_bytes: int = 1 << 20):
    m = codec.module("FetchRequest")
    body = m.MESSAGE(replica_id=-1, max_wait_ms=0, min_bytes=0, max_bytes=1 << 20, topics=[
        m.FetchTopic(topic=topic, partitions=[
            m.FetchPartition(partition=0, fetch_offset=offset, partition_max_bytes=partition_max_bytes)])])
    _, resp = client.request("Fetch", version, body)
    return resp.responses[0].partitions[0]


def _records(part) -> list[tuple]:
    """(offset, key, value, timestamp) of every record, and the magics of the entries."""
    entries = list(iter_messages(part.records))
    out = [(r.offset, r.key, r.value, r.timestamp) for e in entries for r in LegacyBatch(e).records()]
    return out, {e.magic for e in entries}, {e.compression for e in entries}


@pytest.mark.parametrize("version", [0, 1, 2, 3])
@pytest.mark.parametrize("compression", ["none", "gzip"])
def test_raw_old_fetch_versions_read_legacy_messages(shared_broker, topics, version, compression):
    client = WireClient(shared_broker.bootstrap)
    part = _fetch(client, version, topics[compression], 0)
    assert part.error_code == ErrorCode.NONE and part.high_watermark == N
    records, magics, codecs = _records(part)
    magic = 0 if version < 2 else 1
    assert magics == {magic}
    assert codecs == ({0} if compression == "none" else {1})
    expected = [_expected(i) for i in range(N)]
    if magic == 0:  # no timestamps in magic 0
        expected = [(o, k, v, -1) for o, k, v, _ in expected]
    assert records == expected
    # From an offset inside a batch: the records before it are left out.
    records, _, _ = _records(_fetch(client, version, topics[compression], 7))
    assert [r[0] for r in records] == list(range(7, N))
    client.close()


@pytest.mark.parametrize("version", [0, 3])
def test_old_fetch_keeps_to_the_partition_max_bytes_but_sends_one_message(shared_broker, topics, version):
    client = WireClient(shared_broker.bootstrap)
    tiny = _fetch(client, version, topics["none"], 3, partition_max_bytes=1)
    assert [r[0] for r in _records(tiny)[0]] == [3]
    part = _fetch(client, version, topics["none"], 3, partition_max_bytes=300)
    assert 0 < len(part.records) <= 300
    offsets = [r[0] for r in _records(part)[0]]
    assert offsets == list(range(3, 3 + len(offsets))) and len(offsets) < N - 3
    client.close()


def test_api_versions_advertises_fetch_from_v0(shared_broker):
    client = WireClient(shared_broker.bootstrap)
    _, resp = client.request("ApiVersions", 0, message("ApiVersionsRequest"))
    fetch = next(k for k in resp.api_keys if k.api_key == 1)
    assert fetch.min_version == 0 and fetch.max_version >= 12
    client.close()


@pytest.mark.parametrize("api_version", [(0, 9), (0, 10, 0), (0, 10, 1)])
@pytest.mark.parametrize("compression", ["none", "gzip"])
def test_kafka_python_as_an_old_client_consumes(shared_broker, topics, api_version, compression):
    from kafka import KafkaConsumer, TopicPartition

    consumer = KafkaConsumer(bootstrap_servers=shared_broker.bootstrap, api_version=api_version,
                             group_id=None, enable_auto_commit=False, auto_offset_reset="earliest")
    got: list[tuple] = []
    try:
        consumer.assign([TopicPartition(topics[compression], 0)])
        deadline = time.monotonic() + 20
        while len(got) < N and time.monotonic() < deadline:
            for items in consumer.poll(timeout_ms=200).values():
                got.extend((m.offset, m.key, m.value, m.timestamp) for m in items)
    finally:
        consumer.close()
    expected = [_expected(i) for i in range(N)]
    if api_version == (0, 9):  # Fetch v1: magic 0, no timestamps
        expected = [(o, k, v, None) for o, k, v, _ in expected]
    assert got == expected


def test_topic_with_down_conversion_disabled_answers_unsupported_version(shared_broker):
    topic = unique_topic("old-off")
    _produce(shared_broker.bootstrap, topic, "none", {"message.downconversion.enable": "false"})
    client = WireClient(shared_broker.bootstrap)
    assert _fetch(client, 2, topic, 0).error_code == ErrorCode.UNSUPPORTED_VERSION
    assert _fetch(client, 4, topic, 0).error_code == ErrorCode.NONE  # new versions unaffected
    client.close()


def test_broker_with_down_conversion_disabled_unless_the_topic_enables_it(tmp_path):
    with InProcessBroker(tmp_path / "data", log_message_downconversion_enable="false") as broker:
        off, on = unique_topic("off"), unique_topic("on")
        _produce(broker.bootstrap, off, "none")
        _produce(broker.bootstrap, on, "none", {"message.downconversion.enable": "true"})
        client = WireClient(broker.bootstrap)
        assert _fetch(client, 0, off, 0).error_code == ErrorCode.UNSUPPORTED_VERSION
        part = _fetch(client, 0, on, 0)
        assert part.error_code == ErrorCode.NONE and len(_records(part)[0]) == N
        client.close()


def test_down_conversion_follows_the_dynamic_broker_config(tmp_path):
    from kafka.admin import ConfigResource, KafkaAdminClient

    with InProcessBroker(tmp_path / "data") as broker:
        topic = unique_topic("old-dyn")
        _produce(broker.bootstrap, topic, "none")
        client = WireClient(broker.bootstrap)
        assert _fetch(client, 1, topic, 0).error_code == ErrorCode.NONE
        admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
        admin.alter_configs([ConfigResource("BROKER", "1", {"log.message.downconversion.enable": "false"})])
        admin.close()
        assert _fetch(client, 1, topic, 0).error_code == ErrorCode.UNSUPPORTED_VERSION
        client.close()


def test_one_old_fetch_converts_about_a_mebibyte_of_the_log_whatever_it_asks(shared_broker):
    from odradek.records.builder import BatchSpec, build_batch
    from odradek.records.record import Record
    from tests.server.wire import produce_body

    topic = unique_topic("old-big")
    client = WireClient(shared_broker.bootstrap)
    m = codec.module("CreateTopicsRequest")
    _, created = client.request("CreateTopics", 5, m.MESSAGE(timeout_ms=5000, topics=[m.CreatableTopic(
        name=topic, num_partitions=1, replication_factor=1,
        configs=[m.CreatableTopicConfig(name="max.message.bytes", value="4000000")])]))
    assert created.topics[0].error_code == ErrorCode.NONE
    for count in (600, 600, 600, 1500):  # records of ~1 kB: three 0.6 MB batches, one of 1.5 MB
        batch = build_batch([Record(i, T0, None, b"%06d" % i * 170) for i in range(count)], BatchSpec())
        _, resp = client.request("Produce", 8, produce_body(topic, 0, batch))
        assert resp.responses[0].partition_responses[0].error_code == ErrorCode.NONE
    # Fetch v2 has no limit for the whole response, only the partition's 64 MiB.
    part = _fetch(client, 2, topic, 0, partition_max_bytes=64 << 20)
    assert [r[0] for r in _records(part)[0]] == list(range(600))  # 1.2 MB would pass 1 MiB
    big = _fetch(client, 2, topic, 1800, partition_max_bytes=64 << 20)
    assert [r[0] for r in _records(big)[0]] == list(range(1800, 3300))  # a larger batch: whole
    client.close()
