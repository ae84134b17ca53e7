"""Which source configs a target topic takes, and what brings an existing target topic in
step (MirrorMaker 2's targetConfig and incremental config sync), without brokers; TopicSync
against brokers is exercised by test_mirror_maker."""

from __future__ import annotations

import re

from odradek.client import AlterConfigOp, AlterConfigOpType, ConfigEntry, ConfigSource
from odradek.mirror.mirror_config import CONFIG_PROPERTIES_EXCLUDE, MirrorConfig
from odradek.mirror.topic_sync import TopicSync, config_changes, target_configs

EXCLUDE = re.compile("|".join(f"(?:{p})" for p in CONFIG_PROPERTIES_EXCLUDE))


def entry(name: str, value: str | None, source: ConfigSource, **flags) -> ConfigEntry:
    return ConfigEntry(name, value, source, is_default=source == ConfigSource.DEFAULT_CONFIG, **flags)


def entries(*items: ConfigEntry) -> dict[str, ConfigEntry]:
    return {e.name: e for e in items}


SOURCE = entries(
    entry("retention.ms", "3600000", ConfigSource.DYNAMIC_TOPIC_CONFIG),
    entry("cleanup.policy", "compact", ConfigSource.DYNAMIC_TOPIC_CONFIG),
    entry("segment.bytes", "1073741824", ConfigSource.DEFAULT_CONFIG),
    entry("compression.type", "lz4", ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG),
    entry("max.message.bytes", "2000000", ConfigSource.STATIC_BROKER_CONFIG),
    entry("min.insync.replicas", "2", ConfigSource.DYNAMIC_TOPIC_CONFIG),
    entry("leader.replication.throttled.replicas", "0:1", ConfigSource.DYNAMIC_TOPIC_CONFIG),
    entry("message.timestamp.type", "LogAppendTime", ConfigSource.DYNAMIC_TOPIC_CONFIG),
    entry("sasl.secret", "x", ConfigSource.DYNAMIC_TOPIC_CONFIG, is_sensitive=True),
    entry("read.only.thing", "1", ConfigSource.DYNAMIC_TOPIC_CONFIG, read_only=True),
)


def test_target_configs_are_the_source_topics_own_less_the_excluded():
    assert target_configs(SOURCE, EXCLUDE) == {
        "retention.ms": "3600000", "cleanup.policy": "compact", "compression.type": "lz4"}


def test_config_changes_set_what_differs_and_delete_target_overrides_the_source_lacks():
    target = entries(
        entry("retention.ms", "3600000", ConfigSource.DYNAMIC_TOPIC_CONFIG),  # same: untouched
        entry("cleanup.policy", "delete", ConfigSource.DEFAULT_CONFIG),
        entry("segment.ms", "60000", ConfigSource.DYNAMIC_TOPIC_CONFIG),  # not on the source: removed
        entry("min.insync.replicas", "1", ConfigSource.DYNAMIC_TOPIC_CONFIG),  # excluded: the target's own
    )
    assert config_changes(SOURCE, target, EXCLUDE) == [
        AlterConfigOp("cleanup.policy", "compact"), AlterConfigOp("compression.type", "lz4"),
        AlterConfigOp("segment.ms", None, AlterConfigOpType.DELETE)]
    same = entries(*(entry(k, v, ConfigSource.DYNAMIC_TOPIC_CONFIG)
                     for k, v in target_configs(SOURCE, EXCLUDE).items()))
    assert config_changes(SOURCE, same, EXCLUDE) == []


def test_mirrored_topics_match_the_whole_regex_and_leave_internal_topics_out():
    sync = TopicSync(None, None, MirrorConfig("s:1", "t:1", "orders.*,payments"))
    assert sync.mirrored("orders-eu", False) and sync.mirrored("payments", False)
    assert not sync.mirrored("payments-eu", False)  # the whole name must match
    assert not sync.mirrored("orders", True)  # internal
    sync = TopicSync(None, None, MirrorConfig("s:1", "t:1", ".*"))
    assert not sync.mirrored("__consumer_offsets", False) and not sync.mirrored("__mirror", False)
