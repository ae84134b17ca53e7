"""The options of the ``odradek`` format, named as Spark's Kafka source and sink name them.

Spark hands options over with lowercased keys; ``parse_source_options`` and
``parse_sink_options`` accept any case and check values up front, so a mistake fails the
query at once with a message naming the option.

Source (reading):
    kafka.bootstrap.servers (or bootstrap.servers)   required, "host:port,..."
    subscribe | subscribePattern | assign            exactly one: topics, a regex, or
                                                     {"topic":[0,1]}
    startingOffsets        earliest | latest | JSON   batch default earliest, stream latest
    endingOffsets          latest | JSON               batch only, default latest
    startingTimestamp / startingOffsetsByTimestamp    ms; first offset at or after it,
                           (take precedence, in that order, over startingOffsets)
    startingOffsetsByTimestampStrategy  error | latest: when no record is that recent
    endingTimestamp / endingOffsetsByTimestamp        batch only, likewise
    maxOffsetsPerTrigger   records per micro-batch, shared by lag
    minOffsetsPerTrigger   wait for at least this many new records before a micro-batch...
    maxTriggerDelay        ...but no longer than this since the last one (default 15m;
                           Spark's time strings: 500ms, 30s, 5m, 1h, 1d; a bare number is ms)
    minPartitions          at least this many Spark partitions (ranges are split)
    maxRecordsPerPartition at most this many records per Spark partition (ranges are split;
                           then split again if still fewer than minPartitions)
    failOnDataLoss         true | false (default true)
    includeHeaders         true | false (default false)
    kafkaConsumer.pollTimeoutMs   how long an executor retries a Fetch that fails or returns
                           nothing below the high watermark (default 120000, Spark's)
    fetchOffset.numRetries, fetchOffset.retryIntervalMs   the driver's offset lookups: retries
                           after a retriable failure (default 3) and the pause between (10 ms)
    groupIdPrefix          accepted; unused, as the source joins no consumer group
    kafka.*                Kafka client settings (``kafka_params``), e.g.
                           kafka.max.partition.fetch.bytes (default here 8 MiB)

Sink (writing):
    kafka.bootstrap.servers (or bootstrap.servers), topic (else a ``topic`` column),
    exactlyOnce            transactional | staged | false (``SINK_MODES``): each task writes in
                           a Kafka transaction that the driver commits with the batch
                           (``txn_sink``); or stage and publish from the driver (``exactly_once``);
                           or write straight, at least once. Default: transactional for
                           streaming, false for batch writes (as Spark's Kafka sink); ``true``
                           means transactional
    transactional.id.prefix   prefix of the transactional sink's ids (default ``odradek-spark-``)
    kafka.transaction.timeout.ms   its transactions' timeout (default 900000)
    kafka.*                the producer's Kafka settings (``kafka_params``), e.g.
                           kafka.compression.type none | gzip | snappy | lz4 | zstd
    staging.topic, commit.topic   the sink's internal topics (see ``sink_log``)
    Batch writes take save mode Append only (Spark refuses ErrorIfExists and Ignore for any
    Python data source, the sink refuses Overwrite: see ``data_source``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from odradek.spark.kafka_params import sink_params, source_params, transaction_timeout_ms
from odradek.spark.offsets import OffsetSpec, parse_assign, parse_offset_spec, parse_partition_json
from odradek.spark.range_reader import FetchConfig

__all__ = ["SourceOptions", "SinkOptions", "parse_source_options", "parse_sink_options", "TRANSACTIONAL", "STAGED",
           "DIRECT"]

STAGING_TOPIC = "_odradek_spark_staging"
COMMIT_TOPIC = "_odradek_spark_commits"
TXN_ID_PREFIX = "odradek-spark-"
TRANSACTIONAL, STAGED, DIRECT = "transactional", "staged", "direct"
# exactlyOnce option value -> sink mode
SINK_MODES = {"transactional": TRANSACTIONAL, "true": TRANSACTIONAL, "staged": STAGED, "false": DIRECT}


@dataclass(frozen=True)
class SourceOptions:
    bootstrap: str
    subscribe: tuple[str, ...] = ()
    pattern: str | None = None
    assign: tuple = ()
    starting: OffsetSpec | None = None       # None: the mode's default
    ending: OffsetSpec = field(default_factory=lambda: OffsetSpec("latest"))
    timestamp_strategy: str = "error"
    max_offsets_per_trigger: int | None = None
    min_offsets_per_trigger: int | None = None
    max_trigger_delay_ms: int = 15 * 60 * 1000
    min_partitions: int | None = None
    max_records_per_partition: int | None = None
    fail_on_data_loss: bool = True
    include_headers: bool = False
    max_partition_bytes: int = 8 << 20
    max_wait_ms: int = 100
    poll_timeout_ms: int = 120_000
    offset_retries: int = 3
    offset_retry_interval_ms: int = 10
    api_timeout_ms: int = 60_000
    cluster_config: tuple = ()                # ClusterClient keywords, sorted pairs
    isolation_level: int = 0                  # kafka.isolation.level: 0 read_uncommitted, 1 read_committed

    def fetch_config(self) -> FetchConfig:
        return FetchConfig(self.bootstrap, self.include_headers, self.fail_on_data_loss, self.max_partition_bytes,
                           self.max_wait_ms, self.poll_timeout_ms, self.cluster_config, self.isolation_level)


@dataclass(frozen=True)
class SinkOptions:
    bootstrap: str
    topic: str | None = None
    mode: str | None = None                  # TRANSACTIONAL, STAGED, DIRECT; None: the write's default
    producer: tuple = (("compression_type", "none"),)  # AsyncProducer keywords, sorted pairs
    staging_topic: str = STAGING_TOPIC
    commit_topic: str = COMMIT_TOPIC
    txn_id_prefix: str = TXN_ID_PREFIX
    transaction_timeout_ms: int = 900_000
    failpoint: str | None = None             # tests only: see ``failpoints``

    @property
    def compression(self) -> str:
        return dict(self.producer).get("compression_type", "none")

    @property
    def max_block_ms(self) -> int:
        """``kafka.max.block.ms``: how long the sink waits for the cluster (default 60000)."""
        return dict(self.producer).get("max_block_ms", 60_000)


def _lower(options) -> dict[str, str]:
    return {str(k).lower(): str(v) for k, v in dict(options).items()}


def _bootstrap(opts: dict) -> str:
    value = opts.get("kafka.bootstrap.servers") or opts.get("bootstrap.servers")
    if not value:
        raise ValueError("option 'kafka.bootstrap.servers' is required (host:port of odradek brokers)")
    return value


def _bool(opts: dict, name: str, default: bool | None) -> bool | None:
    value = opts.get(name.lower())
    if value is None:
        return default
    if value.strip().lower() not in ("true", "false"):
        raise ValueError(f"option '{name}' must be true or false, got {value!r}")
    return value.strip().lower() == "true"


def _positive(opts: dict, name: str, minimum: int = 1) -> int | None:
    value = opts.get(name.lower())
    if value is None:
        return None
    try:
        number = int(value)
    except ValueError:
        number = minimum - 1
    if number < minimum:
        raise ValueError(f"option '{name}' must be {'a positive' if minimum else 'a non-negative'} integer, "
                         f"got {value!r}")
    return number


def _or(value: int | None, default: int) -> int:
    return default if value is None else value


_DURATION = re.compile(r"\s*(\d+)\s*(us|ms|s|m|min|h|d)?\s*", re.IGNORECASE)
_MS_PER_UNIT = {"us": 0.001, "ms": 1, "s": 1000, "m": 60_000, "min": 60_000, "h": 3_600_000, "d": 86_400_000}


def _duration_ms(opts: dict, name: str, default: int) -> int:
    """A Spark time string (``500ms``, ``30s``, ``5m``, ``1h``, ``1d``; a bare number is ms)."""
    value = opts.get(name.lower())
    if value is None:
        return default
    match = _DURATION.fullmatch(value)
    if match is None:
        raise ValueError(f"option '{name}' must be a duration such as 30s, 5m or 1h, got {value!r}")
    return int(int(match.group(1)) * _MS_PER_UNIT[(match.group(2) or "ms").lower()])


def _timestamp(opts: dict, name: str) -> int | None:
    value = opts.get(name.lower())
    if value is None:
        return None
    try:
        return int(value)
    except ValueError:
        raise ValueError(f"option '{name}' must be a timestamp in milliseconds, got {value!r}") from None


def _subscription(opts: dict) -> dict:
    chosen = [k for k in ("subscribe", "subscribepattern", "assign") if opts.get(k)]
    if len(chosen) != 1:
        raise ValueError("exactly one of the options 'subscribe', 'subscribePattern' or 'assign' is required")
    kind = chosen[0]
    if kind == "subscribe":
        topics = tuple(t.strip() for t in opts["subscribe"].split(",") if t.strip())
        if not topics:
            raise ValueError("option 'subscribe' names no topic")
        return {"subscribe": topics}
    if kind == "subscribepattern":
        try:
            re.compile(opts["subscribepattern"])
        except re.error as e:
            raise ValueError(f"option 'subscribePattern' is not a regular expression: {e}") from None
        return {"pattern": opts["subscribepattern"]}
    return {"assign": tuple(parse_assign(opts["assign"]))}


def _position(opts: dict, prefix: str) -> OffsetSpec | None:
    """``<prefix>Timestamp`` > ``<prefix>OffsetsByTimestamp`` > ``<prefix>Offsets``."""
    stamp = _timestamp(opts, f"{prefix}Timestamp")
    if stamp is not None:
        return OffsetSpec("timestamp", timestamp=stamp)
    by_time = opts.get(f"{prefix}offsetsbytimestamp")
    if by_time is not None:
        return OffsetSpec("timestamps", parse_partition_json(by_time, f"{prefix}OffsetsByTimestamp"))
    text = opts.get(f"{prefix}offsets")
    if text is None:
        return None
    return parse_offset_spec(text, f"{prefix}Offsets", allow_earliest=prefix == "starting")


def parse_source_options(options) -> SourceOptions:
    opts = _lower(options)
    strategy = opts.get("startingoffsetsbytimestampstrategy", "error").strip().lower()
    if strategy not in ("error", "latest"):
        raise ValueError(f"option 'startingOffsetsByTimestampStrategy' must be error or latest, got {strategy!r}")
    ending = _position(opts, "ending") or OffsetSpec("latest")
    kafka = source_params(opts)
    return SourceOptions(
        bootstrap=_bootstrap(opts),
        **_subscription(opts),
        starting=_position(opts, "starting"),
        ending=ending,
        timestamp_strategy=strategy,
        max_offsets_per_trigger=_positive(opts, "maxOffsetsPerTrigger"),
        min_offsets_per_trigger=_positive(opts, "minOffsetsPerTrigger"),
        max_trigger_delay_ms=_duration_ms(opts, "maxTriggerDelay", 15 * 60 * 1000),
        min_partitions=_positive(opts, "minPartitions"),
        max_records_per_partition=_positive(opts, "maxRecordsPerPartition"),
        fail_on_data_loss=_bool(opts, "failOnDataLoss", True),
        include_headers=_bool(opts, "includeHeaders", False),
        max_partition_bytes=kafka["max_partition_bytes"],
        max_wait_ms=kafka["max_wait_ms"],
        poll_timeout_ms=_or(_positive(opts, "kafkaConsumer.pollTimeoutMs"), 120_000),
        offset_retries=_or(_positive(opts, "fetchOffset.numRetries", minimum=0), 3),
        offset_retry_interval_ms=_or(_positive(opts, "fetchOffset.retryIntervalMs", minimum=0), 10),
        api_timeout_ms=kafka["api_timeout_ms"],
        cluster_config=kafka["cluster"],
        isolation_level=kafka["isolation_level"],
    )


def parse_sink_options(options) -> SinkOptions:
    opts = _lower(options)
    return SinkOptions(
        bootstrap=_bootstrap(opts),
        topic=opts.get("topic") or None,
        mode=_sink_mode(opts),
        producer=sink_params(opts),
        staging_topic=opts.get("staging.topic", STAGING_TOPIC),
        commit_topic=opts.get("commit.topic", COMMIT_TOPIC),
        txn_id_prefix=opts.get("transactional.id.prefix", TXN_ID_PREFIX),
        transaction_timeout_ms=transaction_timeout_ms(opts),
        failpoint=opts.get("failpoint") or None,
    )


def _sink_mode(opts: dict) -> str | None:
    value = opts.get("exactlyonce")
    if value is None:
        return None
    mode = SINK_MODES.get(value.strip().lower())
    if mode is None:
        raise ValueError(f"option 'exactlyOnce' must be transactional, staged, true or false, got {value!r}")
    return mode
