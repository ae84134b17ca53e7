"""``max.compaction.lag.ms`` and ``segment.jitter.ms`` through a running broker: both are
accepted by CreateTopics and AlterConfigs, reported by DescribeConfigs with their source, reach
the partition logs, and a compacted topic whose dirty ratio can never trigger the cleaner
(``min.cleanable.dirty.ratio=1.0``) is compacted once its records are older than
``max.compaction.lag.ms``.

Old records are produced with explicit timestamps ten minutes in the past rather than waited
for: the roll clock and the cleaner both go by record timestamps.
"""

from __future__ import annotations

import time
from contextlib import closing

import pytest
from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import ConfigResource, KafkaAdminClient, NewTopic

from odradek.testing.broker import InProcessBroker
from tests.server.clients import assert_topic_configs_refused, unique_topic, wait_until

MINUTE = 60_000
HOUR = 60 * MINUTE
LONG_MAX = str(2**63 - 1)


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    with InProcessBroker(tmp_path_factory.mktemp("lag") / "data", log_cleaner_backoff_ms=100,
                         log_roll_jitter_hours=1) as b:
        yield b


@pytest.fixture(scope="module")
def admin(broker):
    client = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    yield client
    client.close()


def describe(admin, topic) -> dict:
    return admin.describe_configs([ConfigResource("TOPIC", topic)], config_filter="all")["topic"][topic]


def log_of(broker, topic):
    return broker.call(lambda: broker.broker.replica_manager.get(topic, 0).log)


def read_all(bootstrap: str, topic: str) -> list[tuple[int, bytes, bytes]]:
    """Every record from the beginning to the log end offset: (offset, key, value)."""
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id=None, enable_auto_commit=False)
    try:
        tp = TopicPartition(topic, 0)
        consumer.assign([tp])
        consumer.seek_to_beginning(tp)
        end = consumer.end_offsets([tp])[tp]
        out = []
        deadline = time.monotonic() + 20
        while consumer.position(tp) < end and time.monotonic() < deadline:
            for records in consumer.poll(200).values():
                out += [(r.offset, r.key, r.value) for r in records]
        return out
    finally:
        consumer.close()


def test_alter_configs_sets_and_describe_configs_reports_both(broker, admin):
    topic = unique_topic("lag-alter")
    admin.create_topics([NewTopic(topic, 1, 1)])
    before = describe(admin, topic)
    # log.roll.jitter.hours=1 in the broker's properties, reported in the topic's unit.
    assert before["segment.jitter.ms"]["value"] == str(HOUR)
    assert before["segment.jitter.ms"]["config_source"] == "STATIC_BROKER_CONFIG"
    assert before["max.compaction.lag.ms"]["value"] == LONG_MAX
    assert before["max.compaction.lag.ms"]["config_source"] == "DEFAULT_CONFIG"

    admin.alter_configs([ConfigResource("TOPIC", topic, {"segment.jitter.ms": "1000",
                                                         "max.compaction.lag.ms": "120000"})],
                        incremental=False)
    after = describe(admin, topic)
    assert after["segment.jitter.ms"]["value"] == "1000"
    assert after["max.compaction.lag.ms"]["value"] == "120000"
    assert {after[n]["config_source"] for n in ("segment.jitter.ms", "max.compaction.lag.ms")} == \
        {"DYNAMIC_TOPIC_CONFIG"}
    config = log_of(broker, topic).config
    assert (config.segment_jitter_ms, config.max_compaction_lag_ms) == (1000, 120000)

    # The log's next segment draws its jitter from the new setting.
    now = time.time_ns() // 1_000_000
    with closing(KafkaProducer(bootstrap_servers=broker.bootstrap)) as producer:
        admin.alter_configs([ConfigResource("TOPIC", topic, {"segment.ms": "5000"})], incremental=True)
        producer.send(topic, b"first", timestamp_ms=now - MINUTE).get(20)
        producer.send(topic, b"rolls", timestamp_ms=now).get(20)
    log = log_of(broker, topic)
    assert len(log.segments) == 2 and 0 <= log.segments[-1].roll_jitter_ms < 1000


@pytest.mark.parametrize("configs", [
    {"max.compaction.lag.ms": "0"},
    {"segment.jitter.ms": "-1"},
    {"min.compaction.lag.ms": "5000", "max.compaction.lag.ms": "4000"},
])
def test_bad_values_are_refused(admin, configs):
    assert_topic_configs_refused(admin, configs, "lag-bad")


def test_a_compacted_topic_is_cleaned_by_the_lag_alone(broker, admin):
    topic = unique_topic("lag-compact")
    admin.create_topics([NewTopic(topic, 1, 1, topic_configs={
        "cleanup.policy": "compact", "min.cleanable.dirty.ratio": "1.0", "max.compaction.lag.ms": str(MINUTE)})])
    old = time.time_ns() // 1_000_000 - 10 * MINUTE
    keys = [b"k%d" % i for i in range(5)]
    with closing(KafkaProducer(bootstrap_servers=broker.bootstrap, linger_ms=0)) as producer:
        for rnd in (b"old", b"new"):
            for key in keys:
                producer.send(topic, key=key, value=rnd, timestamp_ms=old).get(20)
        # Ten minutes after the first record: the active segment rolls by the lag (segment.ms
        # is a week) and this record starts the next one.
        producer.send(topic, key=b"later", value=b"now", timestamp_ms=old + 10 * MINUTE).get(20)
    assert len(log_of(broker, topic).segments) == 2

    expected = [(5 + i, key, b"new") for i, key in enumerate(keys)] + [(10, b"later", b"now")]
    wait_until(lambda: read_all(broker.bootstrap, topic) == expected, what="the cleaner to compact by the lag")
