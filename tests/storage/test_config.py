import random

import pytest

from odradek.storage.clock import FakeClock, SystemClock
from odradek.storage.config import LONG_MAX, TOPIC_CONFIG_NAMES, LogConfig
from odradek.storage.errors import InvalidConfigError


def test_defaults_are_kafkas():
    c = LogConfig()
    assert c.segment_bytes == 1 << 30
    assert c.segment_ms == 7 * 24 * 3600 * 1000
    assert c.segment_index_bytes == 10 * 1024 * 1024
    assert c.index_interval_bytes == 4096
    assert c.retention_ms == 7 * 24 * 3600 * 1000
    assert c.retention_bytes == -1
    assert c.flush_messages == LONG_MAX and c.flush_ms == LONG_MAX
    assert c.delete_enabled and not c.compact_enabled


def test_topic_names_and_strings():
    c = LogConfig.from_properties(
        {
            "segment.bytes": "1048576",
            "retention.ms": -1,
            "cleanup.policy": "compact, delete",
            "min.cleanable.dirty.ratio": "0.25",
            "message.timestamp.type": "LogAppendTime",
            "flush.messages": 1,
            "unrelated.broker.setting": "whatever",
        }
    )
    assert c.segment_bytes == 1048576
    assert c.retention_ms == -1
    assert c.cleanup_policy == ("compact", "delete")
    assert c.compact_enabled and c.delete_enabled
    assert c.min_cleanable_dirty_ratio == 0.25
    assert c.message_timestamp_type == "LogAppendTime"
    assert c.flush_messages == 1


def test_broker_names_and_units_and_precedence():
    c = LogConfig.from_properties(
        {
            "log.roll.hours": "2",
            "log.retention.minutes": 3,
            "log.retention.hours": 100,  # minutes win over hours
            "log.flush.interval.ms": 500,
            "log.segment.bytes": 5000,
            "segment.bytes": 7000,  # topic-level wins over broker-level
        }
    )
    assert c.segment_ms == 2 * 3600 * 1000
    assert c.retention_ms == 3 * 60 * 1000
    assert c.flush_ms == 500
    assert c.segment_bytes == 7000


def test_overrides_apply_on_a_base():
    base = LogConfig.from_properties({"log.retention.bytes": 100})
    topic = LogConfig.from_properties({"segment.ms": 10}, base=base)
    assert topic.retention_bytes == 100 and topic.segment_ms == 10


@pytest.mark.parametrize(
    "props",
    [
        {"segment.bytes": 10},
        {"segment.bytes": "abc"},
        {"segment.bytes": 2**31},
        {"segment.bytes": 1.5},
        {"segment.bytes": True},
        {"retention.ms": -2},
        {"cleanup.policy": "shred"},
        {"cleanup.policy": ""},
        {"message.timestamp.type": "Sometime"},
        {"min.cleanable.dirty.ratio": 1.5},
        {"flush.messages": 0},
        {"segment.ms": 0},
    ],
)
def test_invalid_values_are_refused(props):
    with pytest.raises(InvalidConfigError):
        LogConfig.from_properties(props)


def test_direct_construction_is_validated():
    with pytest.raises(InvalidConfigError, match="segment.bytes"):
        LogConfig(segment_bytes=0)


def test_topic_config_names():
    assert "segment.bytes" in TOPIC_CONFIG_NAMES and "cleanup.policy" in TOPIC_CONFIG_NAMES


def test_clocks():
    fake = FakeClock(1000)
    fake.advance(5)
    assert fake.milliseconds() == 1005 and fake.monotonic() == 1.005
    with pytest.raises(ValueError):
        fake.advance(-1)
    with pytest.raises(ValueError):
        fake.set(10)
    real = SystemClock()
    assert real.milliseconds() > 1_600_000_000_000
    assert real.monotonic() <= real.monotonic()


# --- segment.jitter.ms, max.compaction.lag.ms, message.timestamp.*.max.ms -----------------------

def test_new_defaults_are_kafkas():
    c = LogConfig()
    assert c.segment_jitter_ms == 0
    assert c.max_compaction_lag_ms == LONG_MAX
    assert c.message_timestamp_difference_max_ms == LONG_MAX
    assert c.message_timestamp_before_max_ms == LONG_MAX
    assert c.message_timestamp_after_max_ms == LONG_MAX
    assert c.timestamp_before_max_ms == LONG_MAX and c.timestamp_after_max_ms == LONG_MAX
    for name in ("segment.jitter.ms", "max.compaction.lag.ms", "message.timestamp.difference.max.ms",
                 "message.timestamp.before.max.ms", "message.timestamp.after.max.ms"):
        assert name in TOPIC_CONFIG_NAMES


@pytest.mark.parametrize("props, field, value", [
    ({"segment.jitter.ms": "250"}, "segment_jitter_ms", 250),
    ({"log.roll.jitter.ms": 300}, "segment_jitter_ms", 300),
    ({"log.roll.jitter.hours": "2"}, "segment_jitter_ms", 2 * 3600 * 1000),
    ({"log.roll.jitter.ms": 300, "log.roll.jitter.hours": 2}, "segment_jitter_ms", 300),  # ms wins
    ({"segment.jitter.ms": 1, "log.roll.jitter.ms": 300}, "segment_jitter_ms", 1),  # topic wins
    ({"max.compaction.lag.ms": "60000"}, "max_compaction_lag_ms", 60000),
    ({"log.cleaner.max.compaction.lag.ms": 5000}, "max_compaction_lag_ms", 5000),
    ({"message.timestamp.before.max.ms": "10"}, "message_timestamp_before_max_ms", 10),
    ({"log.message.timestamp.before.max.ms": 11}, "message_timestamp_before_max_ms", 11),
    ({"message.timestamp.after.max.ms": "12"}, "message_timestamp_after_max_ms", 12),
    ({"log.message.timestamp.after.max.ms": 13}, "message_timestamp_after_max_ms", 13),
    ({"message.timestamp.difference.max.ms": "0"}, "message_timestamp_difference_max_ms", 0),
    ({"log.message.timestamp.difference.max.ms": 14}, "message_timestamp_difference_max_ms", 14),
])
def test_new_names_and_broker_synonyms(props, field, value):
    assert getattr(LogConfig.from_properties(props), field) == value


@pytest.mark.parametrize("props", [
    {"segment.jitter.ms": -1},
    {"log.roll.jitter.hours": "-1"},
    {"max.compaction.lag.ms": 0},  # Kafka: atLeast(1)
    {"max.compaction.lag.ms": 2**63},
    {"message.timestamp.before.max.ms": -1},
    {"message.timestamp.after.max.ms": "-5"},
    {"message.timestamp.difference.max.ms": -1},
    {"message.timestamp.after.max.ms": "soon"},
    {"min.compaction.lag.ms": 5000, "max.compaction.lag.ms": 4999},  # validateValues' conflict
])
def test_new_invalid_values_are_refused(props):
    with pytest.raises(InvalidConfigError):
        LogConfig.from_properties(props)


def test_min_compaction_lag_may_equal_max_and_conflicts_across_levels():
    assert LogConfig(min_compaction_lag_ms=10, max_compaction_lag_ms=10).max_compaction_lag_ms == 10
    broker = LogConfig.from_properties({"log.cleaner.max.compaction.lag.ms": 1000})
    with pytest.raises(InvalidConfigError, match="min.compaction.lag.ms"):
        LogConfig.from_properties({"min.compaction.lag.ms": 2000}, base=broker)


def test_timestamp_limits_fall_back_to_the_deprecated_difference():
    only_difference = LogConfig(message_timestamp_difference_max_ms=100)
    assert only_difference.timestamp_before_max_ms == 100
    assert only_difference.timestamp_after_max_ms == 100
    mixed = LogConfig(message_timestamp_difference_max_ms=100, message_timestamp_before_max_ms=7)
    assert mixed.timestamp_before_max_ms == 7 and mixed.timestamp_after_max_ms == 100
    both = LogConfig(message_timestamp_difference_max_ms=100, message_timestamp_before_max_ms=7,
                     message_timestamp_after_max_ms=9)
    assert (both.timestamp_before_max_ms, both.timestamp_after_max_ms) == (7, 9)


def test_max_segment_ms_is_capped_by_max_compaction_lag_for_compacted_logs_only():
    assert LogConfig(segment_ms=1000, max_compaction_lag_ms=300).max_segment_ms == 1000
    compacted = LogConfig(segment_ms=1000, max_compaction_lag_ms=300, cleanup_policy=("compact",))
    assert compacted.max_segment_ms == 300
    both = LogConfig(segment_ms=200, max_compaction_lag_ms=300, cleanup_policy=("compact", "delete"))
    assert both.max_segment_ms == 200


class Draws:
    """A random source that records the bound it was asked for and answers ``value``."""

    def __init__(self, value):
        self.value, self.asked = value, []

    def randrange(self, stop):
        self.asked.append(stop)
        return self.value


def test_random_segment_jitter_is_below_min_of_jitter_and_segment_ms():
    rng = Draws(3)
    assert LogConfig(segment_jitter_ms=0).random_segment_jitter(rng) == 0
    assert rng.asked == []  # no draw without jitter
    assert LogConfig(segment_ms=1000, segment_jitter_ms=50).random_segment_jitter(rng) == 3
    assert LogConfig(segment_ms=40, segment_jitter_ms=50).random_segment_jitter(rng) == 3
    # A compacted log's roll interval is capped by max.compaction.lag.ms, and so is its
    # jitter (Kafka uses segment.ms here, and then rolls at every append).
    lagged = LogConfig(segment_ms=1000, segment_jitter_ms=500, max_compaction_lag_ms=30,
                       cleanup_policy=("compact",))
    assert lagged.random_segment_jitter(rng) == 3
    assert rng.asked == [50, 40, 30]
    config = LogConfig(segment_ms=100, segment_jitter_ms=10_000)
    draws = [config.random_segment_jitter(random.Random(seed)) for seed in range(200)]
    assert all(0 <= d < 100 for d in draws) and len(set(draws)) > 10
