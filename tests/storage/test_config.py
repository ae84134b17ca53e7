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
