"""``compression.type`` with real clients: a topic set to a codec stores every produced batch
in that codec whatever the producer used (confluent-kafka lz4 / none, kafka-python gzip),
both clients read every record back, AlterConfigs changes the codec for the next produce,
the broker key of the same name is the default of topics without their own, and values
Kafka does not know are refused with INVALID_CONFIG (40)."""

from __future__ import annotations

from contextlib import closing

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic
from kafka import KafkaProducer
from kafka.admin import ConfigResource, KafkaAdminClient

from odradek.records import compression as codecs
from odradek.records.reader import iter_batches
from odradek.testing.broker import InProcessBroker
from tests.server.clients import (
    assert_topic_configs_refused,
    assert_matches_sent,
    consume_confluent,
    consume_kafka_python,
    sample_messages,
    unique_topic,
)

TS = 1_700_000_000_000



def create(bootstrap: str, configs: dict[str, str]) -> str:
    name = unique_topic("ctype")
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([NewTopic(name, 1, 1, config=configs)]).values():
        future.result(20)
    return name


def produce_confluent(bootstrap: str, topic: str, msgs, codec: str) -> list[tuple[int, int]]:
    producer = Producer({"bootstrap.servers": bootstrap, "compression.type": codec, "linger.ms": 20})
    placed: list = [None] * len(msgs)

    def delivered(i):
        def report(err, msg):
            assert err is None, err
            placed[i] = (msg.partition(), msg.offset())
        return report

    for i, m in enumerate(msgs):
        producer.produce(topic, key=m.key, value=m.value, headers=list(m.headers), timestamp=m.timestamp,
                         partition=0, on_delivery=delivered(i))
    assert producer.flush(20) == 0
    return placed


def produce_kafka_python(bootstrap: str, topic: str, msgs, codec: str) -> list[tuple[int, int]]:
    with closing(KafkaProducer(bootstrap_servers=bootstrap, compression_type=codec, linger_ms=20)) as producer:
        futures = [producer.send(topic, key=m.key, value=m.value, headers=list(m.headers), partition=0,
                                 timestamp_ms=m.timestamp) for m in msgs]
        producer.flush(20)
        return [(meta.partition, meta.offset) for meta in (f.get(20) for f in futures)]


def stored_codecs(broker, topic: str) -> list[int]:
    """The codec of every batch in the partition's log, read from the log itself."""
    data = broker.call(lambda: broker.broker.replica_manager.get(topic, 0).log.read(0, 1 << 24).read())
    return [batch.compression for batch in iter_batches(data)]


def produce_all_three(bootstrap: str, topic: str):
    lz4 = sample_messages(30, tag="lz4-", timestamp=TS)
    plain = sample_messages(10, tag="none-", timestamp=TS + 100)
    gzip = sample_messages(25, tag="gzip-", timestamp=TS + 200)
    placed = produce_confluent(bootstrap, topic, lz4, "lz4")
    placed += produce_confluent(bootstrap, topic, plain, "none")
    placed += produce_kafka_python(bootstrap, topic, gzip, "gzip")
    return lz4 + plain + gzip, placed


@pytest.mark.parametrize("kind, codec", [("zstd", codecs.ZSTD), ("uncompressed", codecs.NONE)])
def test_every_batch_is_stored_in_the_topics_codec(shared_broker, kind, codec):
    bootstrap = shared_broker.bootstrap
    topic = create(bootstrap, {"compression.type": kind})
    sent, placed = produce_all_three(bootstrap, topic)
    found = stored_codecs(shared_broker, topic)
    assert found and set(found) == {codec}
    for consume in (consume_confluent, consume_kafka_python):
        recs = consume(bootstrap, topic, len(sent))
        assert_matches_sent(recs, sent, placed, check_timestamps=True)


def test_producer_keeps_each_producers_codec(shared_broker):
    topic = create(shared_broker.bootstrap, {})
    sent, placed = produce_all_three(shared_broker.bootstrap, topic)
    assert set(stored_codecs(shared_broker, topic)) == {codecs.LZ4, codecs.NONE, codecs.GZIP}
    assert_matches_sent(consume_confluent(shared_broker.bootstrap, topic, len(sent)), sent, placed)


def test_alter_configs_takes_effect_for_the_next_produce(shared_broker, kp_admin):
    bootstrap = shared_broker.bootstrap
    topic = create(bootstrap, {})
    msgs = sample_messages(5, timestamp=TS)
    placed = produce_confluent(bootstrap, topic, msgs, "lz4")
    kp_admin.alter_configs([ConfigResource("TOPIC", topic, {"compression.type": "snappy"})])
    placed += produce_confluent(bootstrap, topic, msgs, "lz4")
    kp_admin.alter_configs([ConfigResource("TOPIC", topic, {"compression.type": "gzip"})], incremental=True)
    placed += produce_kafka_python(bootstrap, topic, msgs, "gzip")  # already gzip: kept
    placed += produce_kafka_python(bootstrap, topic, msgs, "lz4")
    found = stored_codecs(shared_broker, topic)
    assert found[0] == codecs.LZ4 and found[-1] == codecs.GZIP
    assert codecs.SNAPPY in found and codecs.LZ4 not in found[1:]
    described = kp_admin.describe_configs([ConfigResource("TOPIC", topic)], config_filter="all")["topic"][topic]
    assert described["compression.type"]["value"] == "gzip"
    assert described["compression.type"]["config_source"] == "DYNAMIC_TOPIC_CONFIG"
    recs = consume_kafka_python(bootstrap, topic, 4 * len(msgs))
    assert_matches_sent(recs, msgs * 4, placed, check_timestamps=True)


@pytest.mark.parametrize("configs", [
    {"compression.type": "brotli"},
    {"compression.type": "ZSTD"},  # Kafka's names are case-sensitive
    {"compression.type": "none"},  # the producer's name; the topic's is "uncompressed"
    {"compression.zstd.level": "23"},
    {"compression.gzip.level": "0"},
    {"compression.lz4.level": "18"},
])
def test_invalid_values_are_refused(kp_admin, configs):
    assert_topic_configs_refused(kp_admin, configs, "ctype-bad")


def test_the_broker_key_is_the_default_and_levels_reach_the_log(tmp_path):
    """server.properties' compression.type (and lz4 level) apply to a topic without its own;
    a dynamic broker config then changes it for the next produce."""
    with InProcessBroker(tmp_path / "data", compression_type="lz4", compression_lz4_level="12") as broker:
        admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
        try:
            topic = create(broker.bootstrap, {})
            described = admin.describe_configs([ConfigResource("TOPIC", topic)], config_filter="all")["topic"][topic]
            assert described["compression.type"]["value"] == "lz4"
            assert described["compression.type"]["config_source"] == "STATIC_BROKER_CONFIG"
            assert described["compression.lz4.level"]["value"] == "12"
        finally:
            admin.close()
        msgs = sample_messages(8, timestamp=TS)
        placed = produce_kafka_python(broker.bootstrap, topic, msgs, "gzip")
        assert set(stored_codecs(broker, topic)) == {codecs.LZ4}
        config = broker.call(lambda: broker.broker.replica_manager.get(topic, 0).log.config)
        assert (config.compression_type, config.compression_lz4_level) == ("lz4", 12)
        assert_matches_sent(consume_confluent(broker.bootstrap, topic, len(msgs)), msgs, placed)

        # A dynamic broker default reaches the existing topic's next produce.
        admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
        try:
            admin.alter_configs([ConfigResource("BROKER", "1", {"compression.type": "uncompressed"})])
        finally:
            admin.close()
        placed += produce_kafka_python(broker.bootstrap, topic, msgs, "gzip")
        assert stored_codecs(broker, topic)[-1] == codecs.NONE
        assert_matches_sent(consume_confluent(broker.bootstrap, topic, 2 * len(msgs)), msgs * 2, placed)


def test_an_invalid_broker_value_is_refused(tmp_path):
    from odradek.server.config import BrokerConfig, ConfigError

    with pytest.raises(ConfigError, match="compression.type"):
        BrokerConfig.from_props({"compression.type": "brotli"})
    with pytest.raises(ConfigError, match="compression.zstd.level"):
        BrokerConfig.from_props({"compression.zstd.level": "99"})
