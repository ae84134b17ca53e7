"""``LogConfig``: the per-log settings, under Kafka's names.

Every field has a topic-level name (``segment.bytes``) and usually a broker-level default
(``log.segment.bytes``); ``LogConfig.from_properties`` reads either from a flat ``dict`` of
strings or numbers, topic-level names winning over broker-level ones, and validates ranges
the way Kafka's ``LogConfig`` does. Keys it does not know are ignored, because the same
``server.properties`` dictionary carries every other broker setting too.

Defaults are Kafka's: 1 GiB segments rolled after 7 days, 10 MiB index limit with an entry per
4096 bytes, 7 days of retention by time and none by size, ``delete`` policy, and flushing left
to the OS (``Long.MAX_VALUE`` messages and milliseconds).

Besides each field's own range, one rule spans two fields, as in Kafka's
``LogConfig.validateValues``: ``min.compaction.lag.ms`` may not exceed ``max.compaction.lag.ms``.
Derived settings Kafka's ``LogConfig`` computes are methods here: ``max_segment_ms``,
``random_segment_jitter``, ``timestamp_before_max_ms`` and ``timestamp_after_max_ms``.

``compression.type`` takes Kafka's ``BrokerCompressionType`` values (``producer`` keeps the
producer's codec; ``uncompressed``, ``gzip``, ``snappy``, ``lz4``, ``zstd`` make the leader
rewrite other batches, see ``records/recompression.py``), with the KIP-390 levels
``compression.{gzip,lz4,zstd}.level``; the broker keys have the same names.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, fields, replace
from typing import Any, Protocol

from odradek.records.recompression import CODEC_OF_TYPE
from odradek.storage.errors import InvalidConfigError

LONG_MAX = 2**63 - 1
INT_MAX = 2**31 - 1
_LONG_MIN = -(2**63)
_INT_MIN = -(2**31)

DELETE = "delete"
COMPACT = "compact"
CREATE_TIME = "CreateTime"
LOG_APPEND_TIME = "LogAppendTime"
# compression.type values (Kafka's BrokerCompressionType; case-sensitive, as in Kafka).
PRODUCER = "producer"
# The broker-side codecs by name (records/recompression.py's table), and "producer".
COMPRESSION_TYPES = (*CODEC_OF_TYPE, PRODUCER)
GZIP_DEFAULT_LEVEL = -1

_HOUR_MS = 3_600_000
_MINUTE_MS = 60_000


class RandomSource(Protocol):
    """What ``random_segment_jitter`` draws from (``random.Random`` fits; tests pass a seeded
    one or a stub)."""

    def randrange(self, stop: int) -> int: ...


@dataclass(frozen=True, slots=True)
class LogConfig:
    """Settings of one partition log; field comments give the Kafka topic-level name."""

    segment_bytes: int = 1_073_741_824  # segment.bytes
    segment_ms: int = 7 * 24 * _HOUR_MS  # segment.ms
    segment_jitter_ms: int = 0  # segment.jitter.ms
    segment_index_bytes: int = 10_485_760  # segment.index.bytes
    index_interval_bytes: int = 4096  # index.interval.bytes
    retention_ms: int = 7 * 24 * _HOUR_MS  # retention.ms (-1: keep forever)
    retention_bytes: int = -1  # retention.bytes (-1: no size limit)
    cleanup_policy: tuple[str, ...] = (DELETE,)  # cleanup.policy
    delete_retention_ms: int = 24 * _HOUR_MS  # delete.retention.ms
    min_compaction_lag_ms: int = 0  # min.compaction.lag.ms
    max_compaction_lag_ms: int = LONG_MAX  # max.compaction.lag.ms
    min_cleanable_dirty_ratio: float = 0.5  # min.cleanable.dirty.ratio
    flush_messages: int = LONG_MAX  # flush.messages
    flush_ms: int = LONG_MAX  # flush.ms
    max_message_bytes: int = 1_048_588  # max.message.bytes
    message_timestamp_type: str = CREATE_TIME  # message.timestamp.type
    # Deprecated since Kafka 3.6 (KIP-937) for the two below; see timestamp_before_max_ms.
    message_timestamp_difference_max_ms: int = LONG_MAX  # message.timestamp.difference.max.ms
    message_timestamp_before_max_ms: int = LONG_MAX  # message.timestamp.before.max.ms
    message_timestamp_after_max_ms: int = LONG_MAX  # message.timestamp.after.max.ms
    file_delete_delay_ms: int = 60_000  # file.delete.delay.ms
    # The codec of the batches the leader writes: "producer" keeps the producer's batches as
    # they are, any other value rewrites each batch of another codec into this one.
    compression_type: str = PRODUCER  # compression.type (broker: compression.type)
    # KIP-390 levels, used when the broker compresses (-1: the codec's default, 6).
    compression_gzip_level: int = GZIP_DEFAULT_LEVEL  # compression.gzip.level
    compression_lz4_level: int = 9  # compression.lz4.level
    compression_zstd_level: int = 3  # compression.zstd.level

    def __post_init__(self) -> None:
        for f in fields(self):
            _check_field(f.name, getattr(self, f.name))
        if self.min_compaction_lag_ms > self.max_compaction_lag_ms:
            raise InvalidConfigError(
                f"conflict topic config setting min.compaction.lag.ms ({self.min_compaction_lag_ms})"
                f" > max.compaction.lag.ms ({self.max_compaction_lag_ms})"
            )

    @property
    def delete_enabled(self) -> bool:
        """True when retention by time/size deletes old segments."""
        return DELETE in self.cleanup_policy

    @property
    def compact_enabled(self) -> bool:
        """True when the cleaner compacts the log."""
        return COMPACT in self.cleanup_policy

    @property
    def max_segment_ms(self) -> int:
        """How long the active segment may stay open (Kafka's ``LogConfig.maxSegmentMs``):
        ``segment.ms``, or for a compacted log the smaller of it and ``max.compaction.lag.ms``,
        since the cleaner never touches the active segment (KIP-354)."""
        if COMPACT in self.cleanup_policy:
            return min(self.segment_ms, self.max_compaction_lag_ms)
        return self.segment_ms

    def random_segment_jitter(self, rng: RandomSource) -> int:
        """The roll jitter for a new segment (Kafka's ``LogConfig.randomSegmentJitter``): 0
        when ``segment.jitter.ms`` is 0, else uniform in [0, min(segment.jitter.ms,
        max_segment_ms)). The segment rolls by time once its roll clock reaches
        ``max_segment_ms`` minus this, so partitions created together do not all roll at
        once.

        Kafka bounds the draw by ``segment.ms`` instead: on a compacted topic whose
        ``max.compaction.lag.ms`` is below the jitter, its roll threshold
        (``maxSegmentMs - rollJitterMs``) can go negative and every append rolls a new
        segment. Bounding by ``max_segment_ms`` keeps the threshold at 1 ms or more; for every
        other topic the two bounds are the same."""
        if self.segment_jitter_ms == 0:
            return 0
        return rng.randrange(min(self.segment_jitter_ms, self.max_segment_ms))

    @property
    def timestamp_before_max_ms(self) -> int:
        """How far before the broker's clock a CreateTime timestamp may be (Kafka's
        ``LogConfig.messageTimestampBeforeMaxMs``): ``message.timestamp.before.max.ms`` when
        it is not the default ``Long.MAX_VALUE``, else the deprecated
        ``message.timestamp.difference.max.ms``."""
        before = self.message_timestamp_before_max_ms
        return before if before != LONG_MAX else self.message_timestamp_difference_max_ms

    @property
    def timestamp_after_max_ms(self) -> int:
        """How far after the broker's clock a CreateTime timestamp may be: the same rule with
        ``message.timestamp.after.max.ms``."""
        after = self.message_timestamp_after_max_ms
        return after if after != LONG_MAX else self.message_timestamp_difference_max_ms

    @classmethod
    def from_properties(
        cls, props: Mapping[str, Any], base: LogConfig | None = None
    ) -> LogConfig:
        """Build a config from Kafka property names, starting from ``base`` (or defaults).

        For each field the first name present wins, in this order: the topic-level name, then
        the broker-level names (for durations, ``.ms`` before ``.minutes`` before ``.hours``).
        Raises InvalidConfigError on an unparsable or out-of-range value.
        """
        changes: dict[str, Any] = {}
        for name, keys in _PROPERTY_NAMES.items():
            for key, scale in keys:
                if key in props:
                    changes[name] = _parse(name, key, props[key], scale)
                    break
        return replace(base if base is not None else cls(), **changes)


# field -> [(property name, multiplier)], in order of precedence.
_PROPERTY_NAMES: dict[str, list[tuple[str, int]]] = {
    "segment_bytes": [("segment.bytes", 1), ("log.segment.bytes", 1)],
    "segment_ms": [("segment.ms", 1), ("log.roll.ms", 1), ("log.roll.hours", _HOUR_MS)],
    "segment_jitter_ms": [
        ("segment.jitter.ms", 1),
        ("log.roll.jitter.ms", 1),
        ("log.roll.jitter.hours", _HOUR_MS),
    ],
    "segment_index_bytes": [("segment.index.bytes", 1), ("log.index.size.max.bytes", 1)],
    "index_interval_bytes": [("index.interval.bytes", 1), ("log.index.interval.bytes", 1)],
    "retention_ms": [
        ("retention.ms", 1),
        ("log.retention.ms", 1),
        ("log.retention.minutes", _MINUTE_MS),
        ("log.retention.hours", _HOUR_MS),
    ],
    "retention_bytes": [("retention.bytes", 1), ("log.retention.bytes", 1)],
    "cleanup_policy": [("cleanup.policy", 1), ("log.cleanup.policy", 1)],
    "delete_retention_ms": [("delete.retention.ms", 1), ("log.cleaner.delete.retention.ms", 1)],
    "min_compaction_lag_ms": [
        ("min.compaction.lag.ms", 1),
        ("log.cleaner.min.compaction.lag.ms", 1),
    ],
    "max_compaction_lag_ms": [
        ("max.compaction.lag.ms", 1),
        ("log.cleaner.max.compaction.lag.ms", 1),
    ],
    "min_cleanable_dirty_ratio": [
        ("min.cleanable.dirty.ratio", 1),
        ("log.cleaner.min.cleanable.ratio", 1),
    ],
    "flush_messages": [("flush.messages", 1), ("log.flush.interval.messages", 1)],
    "flush_ms": [("flush.ms", 1), ("log.flush.interval.ms", 1)],
    "max_message_bytes": [("max.message.bytes", 1), ("message.max.bytes", 1)],
    "message_timestamp_type": [
        ("message.timestamp.type", 1),
        ("log.message.timestamp.type", 1),
    ],
    "message_timestamp_difference_max_ms": [
        ("message.timestamp.difference.max.ms", 1),
        ("log.message.timestamp.difference.max.ms", 1),
    ],
    "message_timestamp_before_max_ms": [
        ("message.timestamp.before.max.ms", 1),
        ("log.message.timestamp.before.max.ms", 1),
    ],
    "message_timestamp_after_max_ms": [
        ("message.timestamp.after.max.ms", 1),
        ("log.message.timestamp.after.max.ms", 1),
    ],
    "file_delete_delay_ms": [("file.delete.delay.ms", 1), ("log.segment.delete.delay.ms", 1)],
    "compression_type": [("compression.type", 1)],
    "compression_gzip_level": [("compression.gzip.level", 1)],
    "compression_lz4_level": [("compression.lz4.level", 1)],
    "compression_zstd_level": [("compression.zstd.level", 1)],
}

# The Kafka topic-level names this config understands (for DescribeConfigs/AlterConfigs).
TOPIC_CONFIG_NAMES: tuple[str, ...] = tuple(keys[0][0] for keys in _PROPERTY_NAMES.values())


def _parse(name: str, key: str, raw: Any, scale: int) -> Any:
    if name == "cleanup_policy":
        return _parse_policy(key, raw)
    if name in ("message_timestamp_type", "compression_type"):
        return str(raw).strip() if isinstance(raw, str) else raw
    if name == "min_cleanable_dirty_ratio":
        return _parse_number(key, raw, float)
    value = _parse_number(key, raw, int)
    # -1 means "unlimited" for the durations that allow it; keep it unscaled.
    return value * scale if value >= 0 else value


def _parse_number(key: str, raw: Any, kind: Callable[[str], Any]) -> Any:
    if isinstance(raw, bool):
        raise InvalidConfigError(f"{key}: expected a number, got {raw!r}")
    if isinstance(raw, (int, float)) and not (kind is int and isinstance(raw, float)):
        return kind(raw)
    if isinstance(raw, str):
        try:
            return kind(raw.strip())
        except ValueError:
            pass
    raise InvalidConfigError(f"{key}: expected {kind.__name__}, got {raw!r}")


def _parse_policy(key: str, raw: Any) -> tuple[str, ...]:
    if isinstance(raw, str):
        items = [p.strip() for p in raw.split(",") if p.strip()]
    elif isinstance(raw, (list, tuple)):
        items = [str(p).strip() for p in raw]
    else:
        raise InvalidConfigError(f"{key}: expected a list of policies, got {raw!r}")
    return tuple(items)


# field -> (lowest, highest) allowed, as Kafka's ConfigDef validators state them.
_RANGES: dict[str, tuple[float, float]] = {
    "segment_bytes": (14, INT_MAX),
    "segment_ms": (1, LONG_MAX),
    "segment_jitter_ms": (0, LONG_MAX),
    "segment_index_bytes": (4, INT_MAX),
    "index_interval_bytes": (0, INT_MAX),
    "retention_ms": (-1, LONG_MAX),
    "retention_bytes": (_LONG_MIN, LONG_MAX),
    "delete_retention_ms": (0, LONG_MAX),
    "min_compaction_lag_ms": (0, LONG_MAX),
    "max_compaction_lag_ms": (1, LONG_MAX),
    "min_cleanable_dirty_ratio": (0.0, 1.0),
    "flush_messages": (1, LONG_MAX),
    "flush_ms": (0, LONG_MAX),
    "max_message_bytes": (0, INT_MAX),
    "file_delete_delay_ms": (0, LONG_MAX),
    "message_timestamp_difference_max_ms": (0, LONG_MAX),
    "message_timestamp_before_max_ms": (0, LONG_MAX),
    "message_timestamp_after_max_ms": (0, LONG_MAX),
    # Kafka's CompressionType ranges: gzip 1-9 (or -1, checked below), lz4 1-17, zstd
    # ZSTD_minCLevel() (-131072) to 22.
    "compression_gzip_level": (1, 9),
    "compression_lz4_level": (1, 17),
    "compression_zstd_level": (-131072, 22),
}


def _check_field(name: str, value: Any) -> None:
    if name == "cleanup_policy":
        if not isinstance(value, tuple) or not value:
            raise InvalidConfigError("cleanup.policy: expected a non-empty list")
        bad = [p for p in value if p not in (DELETE, COMPACT)]
        if bad:
            raise InvalidConfigError(f"cleanup.policy: unknown policy {bad[0]!r}")
        return
    if name == "message_timestamp_type":
        if value not in (CREATE_TIME, LOG_APPEND_TIME):
            raise InvalidConfigError(f"message.timestamp.type: unknown type {value!r}")
        return
    if name == "compression_type":
        if value not in COMPRESSION_TYPES:
            raise InvalidConfigError(
                f"compression.type: {value!r} is not one of {', '.join(COMPRESSION_TYPES)}"
            )
        return
    if name == "compression_gzip_level" and value == GZIP_DEFAULT_LEVEL:
        return
    low, high = _RANGES[name]
    kind = float if name == "min_cleanable_dirty_ratio" else int
    key = _PROPERTY_NAMES[name][0][0]
    if isinstance(value, bool) or not isinstance(value, (int, float)) or (
        kind is int and not isinstance(value, int)
    ):
        raise InvalidConfigError(f"{key}: expected {kind.__name__}, got {value!r}")
    if not low <= value <= high:
        raise InvalidConfigError(f"{key}: {value} not in [{low}, {high}]")
