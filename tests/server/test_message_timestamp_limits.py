"""``message.timestamp.before.max.ms`` / ``after.max.ms`` (and the deprecated
``difference.max.ms``) with real clients: a record whose CreateTime is too far from the
broker's clock is refused with INVALID_TIMESTAMP (32) and never stored; records in range are
stored and read back with their timestamps.

The broker's clock is the real one: the limits are a minute and the bad timestamps an hour
away, so the test does not depend on how fast it runs.
"""

from __future__ import annotations

import time
from contextlib import closing

import pytest
from confluent_kafka import KafkaError, Producer
from confluent_kafka.admin import (
    AdminClient,
    ConfigResource,
    ConfigSource,
    NewTopic,
    ResourceType,
)
from kafka import KafkaProducer
from kafka import errors as Errors
from kafka.admin import ConfigResource as KPConfigResource
from kafka.admin import NewTopic as KPNewTopic

from tests.server.clients import consume_confluent, consume_kafka_python, unique_topic

MINUTE = 60_000
HOUR = 60 * MINUTE
LIMITS = {"message.timestamp.before.max.ms": str(MINUTE), "message.timestamp.after.max.ms": str(MINUTE)}


def now_ms() -> int:
    return time.time_ns() // 1_000_000


@pytest.fixture(scope="module")
def confluent_admin(shared_broker):
    return AdminClient({"bootstrap.servers": shared_broker.bootstrap})



def create_confluent(admin, configs) -> str:
    name = unique_topic("ts-limits")
    for future in admin.create_topics([NewTopic(name, 1, 1, config=configs)]).values():
        future.result(20)
    return name


def produce_confluent(bootstrap, topic, timestamps) -> list:
    """Produce one record per timestamp, each in its own request; return each delivery's
    error code (None when stored)."""
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0})
    outcomes = []
    for i, ts in enumerate(timestamps):
        producer.produce(topic, key=b"k%d" % i, value=b"v%d" % i, timestamp=ts,
                         on_delivery=lambda err, _msg: outcomes.append(None if err is None else err.code()))
        assert producer.flush(20) == 0
    return outcomes


def test_confluent_kafka_records_out_of_range_are_refused(shared_broker, confluent_admin):
    topic = create_confluent(confluent_admin, LIMITS)
    now = now_ms()
    outcomes = produce_confluent(shared_broker.bootstrap, topic, [now - HOUR, now + HOUR, now])
    assert outcomes == [KafkaError.INVALID_TIMESTAMP, KafkaError.INVALID_TIMESTAMP, None]
    recs = consume_confluent(shared_broker.bootstrap, topic, 1, timeout=10)
    assert [(r.offset, r.key, r.value, r.timestamp) for r in recs] == [(0, b"k2", b"v2", now)]

    [described] = confluent_admin.describe_configs([ConfigResource(ResourceType.TOPIC, topic)]).values()
    configs = described.result(20)
    for name, value in LIMITS.items():
        assert configs[name].value == value
        assert configs[name].source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value
    assert configs["message.timestamp.difference.max.ms"].value == str(2**63 - 1)
    assert configs["message.timestamp.difference.max.ms"].source == ConfigSource.DEFAULT_CONFIG.value


def test_the_deprecated_difference_limits_both_ways(shared_broker, confluent_admin):
    topic = create_confluent(confluent_admin, {"message.timestamp.difference.max.ms": str(MINUTE)})
    now = now_ms()
    outcomes = produce_confluent(shared_broker.bootstrap, topic, [now + HOUR, now - HOUR, now])
    assert outcomes == [KafkaError.INVALID_TIMESTAMP, KafkaError.INVALID_TIMESTAMP, None]


def test_log_append_time_topics_take_any_timestamp(shared_broker, confluent_admin):
    topic = create_confluent(confluent_admin, {**LIMITS, "message.timestamp.type": "LogAppendTime"})
    now = now_ms()
    assert produce_confluent(shared_broker.bootstrap, topic, [now - HOUR, now + HOUR]) == [None, None]


def test_kafka_python_records_out_of_range_are_refused(shared_broker, kp_admin):
    topic = unique_topic("ts-limits-kp")
    kp_admin.create_topics([KPNewTopic(topic, 1, 1, topic_configs=LIMITS)])
    now = now_ms()
    with closing(KafkaProducer(bootstrap_servers=shared_broker.bootstrap, retries=0)) as producer:
        with pytest.raises(Errors.InvalidTimestampError):
            producer.send(topic, key=b"old", value=b"x", timestamp_ms=now - HOUR).get(20)
        with pytest.raises(Errors.InvalidTimestampError):
            producer.send(topic, key=b"new", value=b"x", timestamp_ms=now + HOUR).get(20)
        first = producer.send(topic, key=b"a", value=b"in range", timestamp_ms=now - MINUTE // 2).get(20)
        second = producer.send(topic, key=b"b", value=b"in range", timestamp_ms=now + MINUTE // 2).get(20)
    assert (first.offset, second.offset) == (0, 1)
    recs = consume_kafka_python(shared_broker.bootstrap, topic, 2, timeout=10)
    assert [(r.key, r.timestamp) for r in recs] == [(b"a", now - MINUTE // 2), (b"b", now + MINUTE // 2)]


def test_altering_a_limit_applies_to_the_next_produce(shared_broker, kp_admin):
    topic = unique_topic("ts-limits-alter")
    kp_admin.create_topics([KPNewTopic(topic, 1, 1)])
    now = now_ms()
    with closing(KafkaProducer(bootstrap_servers=shared_broker.bootstrap, retries=0)) as producer:
        assert producer.send(topic, value=b"old", timestamp_ms=now - HOUR).get(20).offset == 0
        kp_admin.alter_configs([KPConfigResource("TOPIC", topic, {"message.timestamp.before.max.ms": str(MINUTE)})])
        with pytest.raises(Errors.InvalidTimestampError):
            producer.send(topic, value=b"old again", timestamp_ms=now - HOUR).get(20)
        configs = kp_admin.describe_configs([KPConfigResource("TOPIC", topic)])["topic"][topic]
        assert configs["message.timestamp.before.max.ms"]["value"] == str(MINUTE)


@pytest.mark.parametrize("configs", [
    {"message.timestamp.before.max.ms": "-1"},
    {"message.timestamp.after.max.ms": "soon"},
    {"message.timestamp.difference.max.ms": "-5"},
])
def test_bad_limits_are_refused_at_creation(kp_admin, configs):
    name = unique_topic("ts-limits-bad")
    with pytest.raises(Errors.InvalidConfigurationError):
        kp_admin.create_topics([KPNewTopic(name, 1, 1, topic_configs=configs)])
    assert name not in kp_admin.list_topics()
