"""The topic configs ``segment.jitter.ms``, ``max.compaction.lag.ms`` and
``message.timestamp.{before,after,difference}.max.ms`` as the broker knows them: broker
synonyms in ``server.properties`` (validated with Kafka's ranges), DescribeConfigs entries
with value, source and synonyms, and dynamic broker defaults."""

from __future__ import annotations

import pytest

from odradek.server import configs
from odradek.server.config import BrokerConfig, ConfigError
from odradek.server.topics import EXTRA_TOPIC_CONFIGS
from odradek.storage.config import TOPIC_CONFIG_NAMES

LONG_MAX = str(2**63 - 1)
NAMES = ("segment.jitter.ms", "max.compaction.lag.ms", "message.timestamp.before.max.ms",
         "message.timestamp.after.max.ms", "message.timestamp.difference.max.ms")


def entries(static=None, dynamic=None, overrides=None) -> dict[str, configs.Entry]:
    return {e.name: e for e in configs.topic_entries(static or {}, dynamic or {}, overrides or {})}


def test_they_are_real_topic_configs_now():
    for name in NAMES:
        assert name in TOPIC_CONFIG_NAMES and name in configs.TOPIC_CONFIGS
        assert name not in EXTRA_TOPIC_CONFIGS


def test_defaults_are_kafkas():
    found = entries()
    assert found["segment.jitter.ms"].value == "0"
    for name in NAMES[1:]:
        assert found[name].value == LONG_MAX
        assert found[name].config_type == configs.LONG
    assert all(found[n].config_source == configs.DEFAULT_CONFIG for n in NAMES)


def test_value_and_source_at_each_level():
    static = {"log.roll.jitter.hours": "2", "log.message.timestamp.before.max.ms": "1000"}
    dynamic = {"log.cleaner.max.compaction.lag.ms": "60000"}
    overrides = {"message.timestamp.after.max.ms": "5", "segment.jitter.ms": "7"}
    found = entries(static, dynamic, overrides)
    assert (found["segment.jitter.ms"].value, found["segment.jitter.ms"].config_source) == ("7", configs.TOPIC_CONFIG)
    assert found["segment.jitter.ms"].synonyms == [
        ("segment.jitter.ms", "7", configs.TOPIC_CONFIG),
        ("log.roll.jitter.hours", str(2 * 3_600_000), configs.STATIC_BROKER_CONFIG),  # in the topic's unit
        ("log.roll.jitter.ms", "0", configs.DEFAULT_CONFIG),
    ]
    assert (found["max.compaction.lag.ms"].value, found["max.compaction.lag.ms"].config_source) == \
        ("60000", configs.DYNAMIC_DEFAULT_BROKER_CONFIG)
    assert (found["message.timestamp.before.max.ms"].value,
            found["message.timestamp.before.max.ms"].config_source) == ("1000", configs.STATIC_BROKER_CONFIG)
    assert (found["message.timestamp.after.max.ms"].value,
            found["message.timestamp.after.max.ms"].config_source) == ("5", configs.TOPIC_CONFIG)


def test_broker_synonyms_feed_the_log_defaults():
    config = BrokerConfig.from_props({
        "log.roll.jitter.ms": "100", "log.roll.jitter.hours": "5",  # ms wins
        "log.cleaner.max.compaction.lag.ms": "9000",
        "log.message.timestamp.difference.max.ms": "300",
        "log.message.timestamp.after.max.ms": "400",
    })
    log = config.log_config
    assert (log.segment_jitter_ms, log.max_compaction_lag_ms) == (100, 9000)
    assert (log.timestamp_before_max_ms, log.timestamp_after_max_ms) == (300, 400)
    assert config.unknown == ()
    assert config["log.roll.jitter.hours"] == 5


@pytest.mark.parametrize("props, key", [
    ({"log.roll.jitter.ms": "-1"}, "log.roll.jitter.ms"),
    ({"log.roll.jitter.hours": "-1"}, "log.roll.jitter.hours"),
    ({"log.cleaner.max.compaction.lag.ms": "0"}, "log.cleaner.max.compaction.lag.ms"),
    ({"log.message.timestamp.before.max.ms": "-1"}, "log.message.timestamp.before.max.ms"),
    ({"log.message.timestamp.after.max.ms": "x"}, "log.message.timestamp.after.max.ms"),
    ({"log.message.timestamp.difference.max.ms": "-1"}, "log.message.timestamp.difference.max.ms"),
    ({"log.cleaner.min.compaction.lag.ms": "10", "log.cleaner.max.compaction.lag.ms": "9"}, "min.compaction.lag.ms"),
])
def test_bad_broker_values_are_refused(props, key):
    with pytest.raises(ConfigError, match=key):
        BrokerConfig.from_props(props)


def test_broker_synonyms_can_be_set_dynamically():
    for key in ("log.roll.jitter.ms", "log.cleaner.max.compaction.lag.ms",
                "log.message.timestamp.before.max.ms", "log.message.timestamp.after.max.ms",
                "log.message.timestamp.difference.max.ms"):
        assert key in configs.DYNAMIC_BROKER_KEYS
