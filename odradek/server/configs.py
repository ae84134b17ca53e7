"""Config entries as DescribeConfigs reports them: name, value, source, synonyms, type.

A topic's effective value of a config comes from, in order: the topic's override
(TOPIC_CONFIG), a dynamic broker default (DYNAMIC_DEFAULT_BROKER_CONFIG), the broker's
``server.properties`` (STATIC_BROKER_CONFIG), else Kafka's default (DEFAULT_CONFIG). Synonyms
list every level that has a value, most specific first, as Kafka does.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from odradek.server.config import KEYS
from odradek.server.dynamic_broker_config import ALL_KEYS, is_sensitive

# DescribeConfigsResponse.ConfigSource
TOPIC_CONFIG = 1
DYNAMIC_BROKER_CONFIG = 2
DYNAMIC_DEFAULT_BROKER_CONFIG = 3
STATIC_BROKER_CONFIG = 4
DEFAULT_CONFIG = 5
DYNAMIC_BROKER_LOGGER_CONFIG = 6
# DescribeConfigsResponse.ConfigType
UNKNOWN_TYPE = 0
BOOLEAN, STRING, INT, SHORT, LONG, DOUBLE, LIST = 1, 2, 3, 4, 5, 6, 7

# topic config -> (broker synonyms, most specific first; type; Kafka default as a string)
TOPIC_CONFIGS: dict[str, tuple[tuple[str, ...], int, str]] = {
    "cleanup.policy": (("log.cleanup.policy",), LIST, "delete"),
    "compression.type": (("compression.type",), STRING, "producer"),
    "compression.gzip.level": (("compression.gzip.level",), INT, "-1"),
    "compression.lz4.level": (("compression.lz4.level",), INT, "9"),
    "compression.zstd.level": (("compression.zstd.level",), INT, "3"),
    "delete.retention.ms": (("log.cleaner.delete.retention.ms",), LONG, "86400000"),
    "file.delete.delay.ms": (("log.segment.delete.delay.ms",), LONG, "60000"),
    "flush.messages": (("log.flush.interval.messages",), LONG, "9223372036854775807"),
    "flush.ms": (("log.flush.interval.ms",), LONG, "9223372036854775807"),
    "index.interval.bytes": (("log.index.interval.bytes",), INT, "4096"),
    "max.compaction.lag.ms": (("log.cleaner.max.compaction.lag.ms",), LONG, "9223372036854775807"),
    "max.message.bytes": (("message.max.bytes",), INT, "1048588"),
    "message.timestamp.after.max.ms": (("log.message.timestamp.after.max.ms",), LONG, "9223372036854775807"),
    "message.timestamp.before.max.ms": (("log.message.timestamp.before.max.ms",), LONG, "9223372036854775807"),
    "message.timestamp.difference.max.ms": (("log.message.timestamp.difference.max.ms",), LONG,
                                            "9223372036854775807"),
    "message.timestamp.type": (("log.message.timestamp.type",), STRING, "CreateTime"),
    # Deprecated (KIP-724), accepted and ignored: see server/message_format_version.py.
    "message.format.version": (("log.message.format.version",), STRING, "3.0-IV1"),
    "message.downconversion.enable": (("log.message.downconversion.enable",), BOOLEAN, "true"),
    "min.cleanable.dirty.ratio": (("log.cleaner.min.cleanable.ratio",), DOUBLE, "0.5"),
    "min.compaction.lag.ms": (("log.cleaner.min.compaction.lag.ms",), LONG, "0"),
    "min.insync.replicas": (("min.insync.replicas",), INT, "1"),
    "preallocate": (("log.preallocate",), BOOLEAN, "false"),
    "retention.bytes": (("log.retention.bytes",), LONG, "-1"),
    "retention.ms": (("log.retention.ms", "log.retention.minutes", "log.retention.hours"), LONG, "604800000"),
    "segment.bytes": (("log.segment.bytes",), INT, "1073741824"),
    "segment.index.bytes": (("log.index.size.max.bytes",), INT, "10485760"),
    "segment.jitter.ms": (("log.roll.jitter.ms", "log.roll.jitter.hours"), LONG, "0"),
    "segment.ms": (("log.roll.ms", "log.roll.hours"), LONG, "604800000"),
    "unclean.leader.election.enable": (("unclean.leader.election.enable",), BOOLEAN, "false"),
    # No broker synonym: the default has no synonym entry either (Kafka's configSynonyms).
    "leader.replication.throttled.replicas": ((), LIST, ""),
    "follower.replication.throttled.replicas": ((), LIST, ""),
}

_SCALE = {"minutes": 60_000, "hours": 3_600_000}
_TYPES = {"bool": BOOLEAN, "string": STRING, "int": INT, "long": LONG, "double": DOUBLE, "list": LIST}


@dataclass
class Entry:
    name: str
    value: str | None
    config_source: int
    read_only: bool = False
    is_sensitive: bool = False
    config_type: int = STRING
    synonyms: list[tuple[str, str | None, int]] = field(default_factory=list)

    @property
    def is_default(self) -> bool:
        return self.config_source == DEFAULT_CONFIG


def _in_ms(key: str, value: str) -> str:
    """A broker synonym's value in the topic config's unit (``log.retention.hours=1`` -> ms)."""
    unit = key.rsplit(".", 1)[-1]
    if unit in _SCALE and value.lstrip("-").isdigit() and int(value) >= 0:
        return str(int(value) * _SCALE[unit])
    return value


def topic_entries(static: dict[str, str], dynamic: dict[str, str], overrides: dict[str, str]) -> list[Entry]:
    """Every topic config with its effective value and where it comes from."""
    out = []
    for name, (synonyms, type_, default) in sorted(TOPIC_CONFIGS.items()):
        levels: list[tuple[str, str | None, int]] = []
        if name in overrides:
            levels.append((name, overrides[name], TOPIC_CONFIG))
        for key in synonyms:
            if key in dynamic:
                levels.append((key, _in_ms(key, dynamic[key]), DYNAMIC_DEFAULT_BROKER_CONFIG))
        for key in synonyms:
            if key in static:
                levels.append((key, _in_ms(key, static[key]), STATIC_BROKER_CONFIG))
        if synonyms:
            levels.append((synonyms[0], default, DEFAULT_CONFIG))
        value, source = (levels[0][1], levels[0][2]) if levels else (default, DEFAULT_CONFIG)
        out.append(Entry(name, value, source, config_type=type_, synonyms=levels))
    return out


def broker_entries(static: dict[str, str], per_broker: dict[str, str], cluster_default: dict[str, str],
                   defaults: bool = True) -> list[Entry]:
    """Every broker config odradek knows (only those set, without ``defaults``), and every
    dynamic one set, with its value and source: this broker's dynamic value, then the
    cluster-wide dynamic default, then server.properties, then Kafka's default. Passwords
    (Kafka's PASSWORD type) are described as sensitive, without their value."""
    out = []
    known = KEYS if defaults else {}
    for name in sorted(set(known) | set(static) & set(KEYS) | set(per_broker) | set(cluster_default)):
        key = KEYS.get(name)
        levels: list[tuple[str, str | None, int]] = []
        if name in per_broker:
            levels.append((name, per_broker[name], DYNAMIC_BROKER_CONFIG))
        if name in cluster_default:
            levels.append((name, cluster_default[name], DYNAMIC_DEFAULT_BROKER_CONFIG))
        if name in static:
            levels.append((name, static[name], STATIC_BROKER_CONFIG))
        if key is not None and defaults:
            levels.append((name, None if key.default is None else _to_text(key.default), DEFAULT_CONFIG))
        set_dynamically = name in per_broker or name in cluster_default  # listener-prefixed names too
        sensitive = is_sensitive(name)
        if sensitive:
            levels = [(n, None, s) for n, _, s in levels]
        value, source = levels[0][1], levels[0][2]
        read_only = not (name in DYNAMIC_BROKER_KEYS or set_dynamically)
        out.append(Entry(name, value, source, read_only=read_only, is_sensitive=sensitive,
                         config_type=_TYPES.get(key.type, STRING) if key else STRING, synonyms=levels))
    return out


def _to_text(value) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


# Broker configs that may be changed at run time (Kafka's DynamicBrokerConfig.AllDynamicConfigs).
DYNAMIC_BROKER_KEYS = ALL_KEYS
