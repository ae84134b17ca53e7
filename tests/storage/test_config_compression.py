"""``compression.type`` and the KIP-390 levels in ``LogConfig``: Kafka's names, defaults and
allowed values; the broker keys have the same names (topic overrides win)."""

from __future__ import annotations

import pytest

from odradek.storage.config import COMPRESSION_TYPES, TOPIC_CONFIG_NAMES, LogConfig
from odradek.storage.errors import InvalidConfigError


def test_defaults_are_kafkas():
    config = LogConfig()
    assert config.compression_type == "producer"
    assert (config.compression_gzip_level, config.compression_lz4_level, config.compression_zstd_level) == (-1, 9, 3)
    for name in ("compression.type", "compression.gzip.level", "compression.lz4.level", "compression.zstd.level"):
        assert name in TOPIC_CONFIG_NAMES


@pytest.mark.parametrize("value", COMPRESSION_TYPES)
def test_every_kafka_value_is_accepted(value):
    assert LogConfig.from_properties({"compression.type": f" {value} "}).compression_type == value


@pytest.mark.parametrize("value", ["none", "ZSTD", "brotli", "", 4])
def test_other_values_are_refused(value):
    with pytest.raises(InvalidConfigError, match="compression.type"):
        LogConfig.from_properties({"compression.type": value})


@pytest.mark.parametrize("key, good, bad", [
    ("compression.gzip.level", ["-1", "1", "9"], ["0", "-2", "10", "x"]),
    ("compression.lz4.level", ["1", "17"], ["0", "18"]),
    ("compression.zstd.level", ["-131072", "0", "22"], ["-131073", "23", "1.5"]),
])
def test_level_ranges(key, good, bad):
    field = key.replace(".", "_")
    for value in good:
        assert getattr(LogConfig.from_properties({key: value}), field) == int(value)
    for value in bad:
        with pytest.raises(InvalidConfigError, match=key):
            LogConfig.from_properties({key: value})


def test_topic_override_wins_over_the_broker_default():
    broker = LogConfig.from_properties({"compression.type": "gzip", "compression.gzip.level": "2"})
    topic = LogConfig.from_properties({"compression.type": "zstd"}, base=broker)
    assert (topic.compression_type, topic.compression_gzip_level) == ("zstd", 2)
