"""The ``kafka.*`` options: Kafka client settings for the clients the source and sink use.

As in Spark's Kafka connector, an option ``kafka.<name>`` is the Kafka client setting
``<name>``. Those odradek's clients understand pass through to them, their values checked
here; the settings Spark's connector refuses are refused with its reasons; any other
``kafka.*`` option is refused as unknown, so that no setting is silently ignored (a
``kafka.security.protocol=SSL`` read must not quietly run over plaintext).

Source: the driver's admin client (partitions and offsets) and the executors' fetch clients.
    client.id, request.timeout.ms, socket.connection.setup.timeout.ms, retry.backoff.ms,
    retry.backoff.max.ms, metadata.max.age.ms    both
    default.api.timeout.ms                        each offset lookup of the driver
    max.partition.fetch.bytes, fetch.max.wait.ms  the executors' Fetch requests
    isolation.level                               read_uncommitted (default, as Spark's Kafka
                                                  source) | read_committed: offsets end at the
                                                  last stable offset, aborted transactions'
                                                  records are skipped
    group.id                                      accepted with a warning, as Spark 3+ does:
                                                  the source never joins or commits to a group
Sink: the producer.
    client.id, acks, compression.type, compression.level, linger.ms, batch.size,
    max.request.size, buffer.memory, enable.idempotence, retries, delivery.timeout.ms,
    request.timeout.ms, max.in.flight.requests.per.connection, retry.backoff.ms,
    retry.backoff.max.ms, metadata.max.age.ms, max.block.ms
    transaction.timeout.ms (the transactional sink's transactions; default 900000, the
    broker's default transaction.max.timeout.ms; see ``txn_sink``); transactional.id is
    refused: ids are derived per task from the ``transactional.id.prefix`` option
Both: bootstrap.servers (see ``options``); security.protocol (PLAINTEXT, SSL, SASL_PLAINTEXT,
SASL_SSL) with the ssl.* settings (PEM or PKCS12 stores: ``client/ssl_factory.py``)
and the sasl.* ones (``client/sasl_authenticator.py``). They travel to the executors as pairs
of text (``security``), each process building its TLS context from them: the files named by
ssl.truststore.location and ssl.keystore.location must be readable where the executors run,
as with Spark's Kafka connector.
"""

from __future__ import annotations

import logging

from odradek.client.client_security import CLIENT_SSL_KEYS, connection_settings, is_security_property

__all__ = ["source_params", "sink_params", "transaction_timeout_ms", "SourceParams"]

_log = logging.getLogger("odradek.spark")

_OFFSETS_IN_CHECKPOINT = "Spark tracks the offsets a query has read in its checkpoint, not in a consumer group"
# Settings Spark's Kafka connector refuses, and why (what to do instead).
_REFUSED_SOURCE = {
    "auto.offset.reset": "set the source option 'startingOffsets' to 'earliest' or 'latest' instead; "
                         + _OFFSETS_IN_CHECKPOINT,
    "enable.auto.commit": "the source commits no offsets; " + _OFFSETS_IN_CHECKPOINT,
    "key.deserializer": "keys are always read as bytes (a binary column): deserialize them with DataFrame "
                        "operations, e.g. CAST(key AS STRING)",
    "value.deserializer": "values are always read as bytes (a binary column): deserialize them with DataFrame "
                          "operations, e.g. CAST(value AS STRING)",
    "interceptor.classes": "consumer interceptors are not supported: records are read as bytes and handed to "
                           "Spark, transform them with DataFrame operations",
}
_REFUSED_SINK = {
    "transactional.id": "the transactional sink derives one transactional id per task, query and batch; "
                        "set the sink option 'transactional.id.prefix' to choose their prefix",
    "key.serializer": "keys are written as bytes: serialize them with DataFrame operations before writing "
                      "(a string or binary 'key' column)",
    "value.serializer": "values are written as bytes: serialize them with DataFrame operations before writing "
                        "(a string or binary 'value' column)",
    "interceptor.classes": "producer interceptors are not supported",
}

# Kafka setting -> (keyword of odradek's client, type). Types: int (>= 0), str, bool.
_CLUSTER = {
    "client.id": ("client_id", str),
    "request.timeout.ms": ("request_timeout_ms", int),
    "socket.connection.setup.timeout.ms": ("connect_timeout_ms", int),
    "retry.backoff.ms": ("retry_backoff_ms", int),
    "retry.backoff.max.ms": ("retry_backoff_max_ms", int),
    "metadata.max.age.ms": ("metadata_max_age_ms", int),
}
_SOURCE_OWN = ("default.api.timeout.ms", "max.partition.fetch.bytes", "fetch.max.wait.ms", "isolation.level",
               "group.id", "bootstrap.servers")
_PRODUCER = {
    "client.id": ("client_id", str),
    "acks": ("acks", str),
    "compression.type": ("compression_type", str),
    "compression.level": ("compression_level", int),
    "linger.ms": ("linger_ms", int),
    "batch.size": ("batch_size", int),
    "max.request.size": ("max_request_size", int),
    "buffer.memory": ("buffer_memory", int),
    "enable.idempotence": ("enable_idempotence", bool),
    "retries": ("retries", int),
    "delivery.timeout.ms": ("delivery_timeout_ms", int),
    "request.timeout.ms": ("request_timeout_ms", int),
    "max.in.flight.requests.per.connection": ("max_in_flight_requests_per_connection", int),
    "retry.backoff.ms": ("retry_backoff_ms", int),
    "retry.backoff.max.ms": ("retry_backoff_max_ms", int),
    "metadata.max.age.ms": ("metadata_max_age_ms", int),
    "max.block.ms": ("max_block_ms", int),
}
_SINK_OWN = ("transaction.timeout.ms", "bootstrap.servers")
_SECURITY = ("security.protocol", *CLIENT_SSL_KEYS, "sasl.mechanism", "sasl.jaas.config", "sasl.username",
             "sasl.password")
_ISOLATION = {"read_uncommitted": 0, "read_committed": 1}
_ACKS = {"all": "all", "-1": "all", "0": 0, "1": 1}
_CODECS = ("none", "gzip", "snappy", "lz4", "zstd")


class SourceParams(dict):
    """The source's client settings: ``cluster`` (keywords of ``ClusterClient``, as sorted
    pairs so that they can key a pool and be pickled), ``api_timeout_ms``,
    ``max_partition_bytes``, ``max_wait_ms``, ``isolation_level`` (0 read_uncommitted, 1
    read_committed: Fetch's and ListOffsets' field)."""


def _kafka(opts: dict) -> dict[str, str]:
    """The ``kafka.*`` options without their prefix (keys arrive lowercased from Spark)."""
    return {k[len("kafka."):]: v for k, v in opts.items() if k.startswith("kafka.")}


def _value(name: str, value: str, kind):
    text = value.strip()
    if kind is int:
        try:
            number = int(text)
        except ValueError:
            number = -1
        if number < 0:
            raise ValueError(f"option 'kafka.{name}' must be a non-negative integer, got {value!r}")
        return number
    if kind is bool:
        if text.lower() not in ("true", "false"):
            raise ValueError(f"option 'kafka.{name}' must be true or false, got {value!r}")
        return text.lower() == "true"
    return text


def _common(settings: dict, refused: dict, known, what: str) -> None:
    for name in sorted(settings):
        if name in refused:
            raise ValueError(f"Kafka option 'kafka.{name}' is not supported: {refused[name]}")
    unknown = sorted(n for n in settings if n not in known and n not in _SECURITY)
    if unknown:
        raise ValueError(f"Kafka options {['kafka.' + n for n in unknown]} are not understood by the {what}; "
                         f"it understands kafka.{', kafka.'.join(sorted(known))}")


def _security(settings: dict) -> tuple:
    """The security settings as sorted pairs (empty for PLAINTEXT), checked here so that a bad
    one fails the query's planning, not its tasks (ValueError naming the option)."""
    security = {n: v.strip() for n, v in settings.items() if is_security_property(n)}
    try:
        connection_settings(security)
    except ValueError as e:
        raise ValueError(f"Kafka security options: {e}") from None
    if security.get("security.protocol", "PLAINTEXT").upper() == "PLAINTEXT":
        return ()
    return tuple(sorted(security.items()))


def source_params(opts: dict) -> SourceParams:
    """The source's ``kafka.*`` options, checked (ValueError naming the option)."""
    settings = _kafka(opts)
    _common(settings, _REFUSED_SOURCE, set(_CLUSTER) | set(_SOURCE_OWN), "odradek source")
    level = settings.get("isolation.level", "read_uncommitted").strip().lower()
    if level not in _ISOLATION:
        raise ValueError(f"option 'kafka.isolation.level' must be read_uncommitted or read_committed, "
                         f"got {level!r}")
    if "group.id" in settings:
        _log.warning("Kafka option 'kafka.group.id' is set: the odradek source never joins or commits to a "
                     "consumer group (%s), so the id is not used", _OFFSETS_IN_CHECKPOINT)
    cluster = {kw: _value(n, settings[n], kind) for n, (kw, kind) in _CLUSTER.items() if n in settings}
    if security := _security(settings):
        cluster["security"] = security  # client_pool.cluster makes the TLS context and SASL settings

    def number(name: str, default: int) -> int:
        return _value(name, settings[name], int) if name in settings else default

    return SourceParams(
        cluster=tuple(sorted(cluster.items())),
        api_timeout_ms=number("default.api.timeout.ms", 60_000),
        max_partition_bytes=number("max.partition.fetch.bytes", 8 << 20) or 8 << 20,
        max_wait_ms=number("fetch.max.wait.ms", 100),
        isolation_level=_ISOLATION[level],
    )


def transaction_timeout_ms(opts: dict) -> int:
    """``kafka.transaction.timeout.ms`` of the transactional sink (default 900000)."""
    value = _kafka(opts).get("transaction.timeout.ms")
    timeout = 900_000 if value is None else _value("transaction.timeout.ms", value, int)
    if timeout < 1:
        raise ValueError(f"option 'kafka.transaction.timeout.ms' must be a positive integer, got {value!r}")
    return timeout


def sink_params(opts: dict) -> tuple:
    """The producer's keywords from the sink's ``kafka.*`` options, as sorted pairs."""
    settings = _kafka(opts)
    _common(settings, _REFUSED_SINK, set(_PRODUCER) | set(_SINK_OWN), "odradek sink")
    config = {kw: _value(n, settings[n], kind) for n, (kw, kind) in _PRODUCER.items() if n in settings}
    if "acks" in config:
        if config["acks"] not in _ACKS:
            raise ValueError(f"option 'kafka.acks' must be all, -1, 0 or 1, got {settings['acks']!r}")
        config["acks"] = _ACKS[config["acks"]]
    codec = str(config.get("compression_type", "none")).lower()
    if codec not in _CODECS:
        raise ValueError(f"option 'kafka.compression.type' must be {', '.join(_CODECS)}, got {codec!r}")
    config["compression_type"] = codec
    if security := _security(settings):
        config["security"] = security  # AsyncProducer(security=...) takes the pairs
    return tuple(sorted(config.items()))
