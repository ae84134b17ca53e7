"""Broker configuration under Kafka's own names (``server.properties`` + ``--override``).

``BrokerConfig.load(path, overrides)`` reads a Java-properties file, applies ``key=value``
overrides, validates every known key and returns the config. Unknown keys are kept and
reported in ``unknown`` (the CLI warns about them); a value that does not parse or is out of
range raises ``ConfigError`` naming the key. Topic-level defaults (``log.segment.bytes`` and
friends) are validated by ``LogConfig`` from the same properties.
"""

from __future__ import annotations

import os
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from odradek.storage.config import TOPIC_CONFIG_NAMES, LogConfig
from odradek.storage.errors import InvalidConfigError

LONG_MAX = 2**63 - 1


class ConfigError(ValueError):
    """A configuration value is invalid."""


@dataclass(frozen=True)
class Key:
    name: str
    type: str  # int | long | bool | string | list | double | password
    default: Any
    low: float | None = None
    high: float | None = None
    doc: str = ""


def _k(name, type_, default, low=None, high=None, doc=""):
    return Key(name, type_, default, low, high, doc)


# The broker-level keys odradek understands, with Kafka's defaults except where noted.
KEYS: dict[str, Key] = {k.name: k for k in [
    _k("node.id", "int", 1, 0, 2**31 - 1, "this broker's id (synonym: broker.id)"),
    _k("broker.id", "int", None, 0, 2**31 - 1, "synonym of node.id"),
    _k("listeners", "list", "PLAINTEXT://127.0.0.1:9092", doc="where the broker listens"),
    _k("advertised.listeners", "list", None, doc="what clients are told; default: listeners"),
    _k("listener.security.protocol.map", "string",
       "PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL"),
    _k("broker.rack", "string", None),
    _k("replica.selector.class", "string", None,
       doc="KIP-392: the replica consumers read from (server/replica_selector.py); unset = the leader"),
    _k("log.dirs", "list", None, doc="data directories (synonym: log.dir)"),
    _k("log.dir", "string", os.path.join(tempfile.gettempdir(), "odradek-logs")),
    _k("zookeeper.connect", "string", None, doc="ZooKeeper hosts[/chroot]; unset = embedded metadata"),
    _k("zookeeper.session.timeout.ms", "int", 18000, 1),
    _k("zookeeper.connection.timeout.ms", "int", None, 1, doc="default: zookeeper.session.timeout.ms"),
    _k("num.partitions", "int", 1, 1),
    _k("default.replication.factor", "int", 1, 1),
    _k("auto.create.topics.enable", "bool", True),
    _k("delete.topic.enable", "bool", True),
    _k("message.max.bytes", "int", 1048588, 0),
    _k("socket.request.max.bytes", "int", 104857600, 1),
    _k("socket.send.buffer.bytes", "int", -1, -1, doc="odradek: -1, the OS's, grown with the traffic (Kafka: 102400)"),
    _k("socket.receive.buffer.bytes", "int", -1, -1, doc="odradek: -1, the OS's (Kafka: 102400)"),
    _k("connections.max.idle.ms", "long", 600000, -1),
    _k("queued.max.requests", "int", 500, 1, doc="requests in flight per connection"),
    _k("queued.max.request.bytes", "long", -1, -1,
       doc="bytes of requests being received or handled, across the broker; -1: unbounded"),
    _k("num.network.threads", "int", 3, 1, doc="accepted for compatibility; asyncio edge"),
    _k("num.io.threads", "int", 8, 1, doc="accepted for compatibility"),
    _k("num.recovery.threads.per.data.dir", "int", 1, 1, doc="accepted for compatibility; logs load in one thread"),
    _k("num.replica.fetchers", "int", 1, 1, doc="fetcher tasks per source broker"),
    _k("background.threads", "int", 10, 1, doc="accepted for compatibility; one event loop"),
    _k("max.connections", "int", 2**31 - 1, 0, doc="new connections over it are closed (Kafka waits)"),
    _k("max.connections.per.ip", "int", 2**31 - 1, 0),
    _k("max.connections.per.ip.overrides", "string", "", doc="host:count,host:count"),
    _k("max.connection.creation.rate", "int", 2**31 - 1, 0, doc="accepted; not enforced yet"),
    _k("metric.reporters", "list", "", doc="accepted for compatibility"),
    _k("http.listeners", "list", "", doc="odradek: http://host:port,... serving /metrics (Prometheus) and "
       "/v1/status/ready, /v1/status/live (server/metrics/http_listener.py); unset: none"),
    _k("authorizer.class.name", "string", "",
       doc="kafka.security.authorizer.AclAuthorizer or org.apache.kafka.metadata.authorizer.StandardAuthorizer; "
           "unset: no authorization"),
    _k("super.users", "string", "", doc="principals allowed everything, User:admin;User:broker"),
    _k("allow.everyone.if.no.acl.found", "bool", False),
    _k("log.segment.bytes", "int", 1073741824, 14),
    _k("log.roll.ms", "long", None, 1),
    _k("log.roll.hours", "int", 168, 1),
    _k("log.roll.jitter.ms", "long", None, 0),
    _k("log.roll.jitter.hours", "int", 0, 0),
    _k("log.retention.ms", "long", None, -1),
    _k("log.retention.minutes", "int", None, -1),
    _k("log.retention.hours", "int", 168, -1),
    _k("log.retention.bytes", "long", -1),
    _k("log.retention.check.interval.ms", "long", 300000, 1),
    _k("log.segment.delete.delay.ms", "long", 60000, 0),
    _k("log.flush.interval.messages", "long", LONG_MAX, 1),
    _k("log.flush.interval.ms", "long", None, 0),
    _k("log.flush.scheduler.interval.ms", "long", 1000, 1, doc="odradek: 1 s (Kafka: never)"),
    _k("log.flush.offset.checkpoint.interval.ms", "int", 60000, 0),
    _k("log.index.interval.bytes", "int", 4096, 0),
    _k("log.index.size.max.bytes", "int", 10485760, 4),
    _k("log.cleanup.policy", "list", "delete"),
    _k("log.cleaner.enable", "bool", True),
    _k("log.cleaner.backoff.ms", "long", 15000, 0),
    _k("log.cleaner.threads", "int", 1, 0, doc="accepted for compatibility; one cleaner"),
    _k("log.cleaner.dedupe.buffer.size", "long", 134217728, doc="accepted for compatibility"),
    _k("log.cleaner.io.buffer.size", "int", 524288, 0, doc="accepted for compatibility"),
    _k("log.cleaner.io.buffer.load.factor", "double", 0.9, doc="accepted for compatibility"),
    _k("log.cleaner.io.max.bytes.per.second", "double", 1.7976931348623157e308, doc="accepted; not enforced yet"),
    _k("log.cleaner.delete.retention.ms", "long", 86400000, 0),
    _k("log.cleaner.min.compaction.lag.ms", "long", 0, 0),
    _k("log.cleaner.max.compaction.lag.ms", "long", LONG_MAX, 1),
    _k("log.cleaner.min.cleanable.ratio", "double", 0.5, 0, 1),
    _k("log.message.timestamp.type", "string", "CreateTime"),
    _k("log.message.format.version", "string", "3.0-IV1", doc="deprecated (KIP-724): accepted and ignored"),
    _k("log.preallocate", "bool", False, doc="accepted for compatibility"),
    _k("log.message.downconversion.enable", "bool", True,
       doc="Fetch v0-v3 answered in message format v0/v1; off: UNSUPPORTED_VERSION"),
    _k("log.message.timestamp.difference.max.ms", "long", LONG_MAX, 0,
       doc="deprecated (Kafka 3.6): the default of the two below"),
    _k("log.message.timestamp.before.max.ms", "long", LONG_MAX, 0),
    _k("log.message.timestamp.after.max.ms", "long", LONG_MAX, 0),
    _k("offsets.topic.num.partitions", "int", 50, 1),
    _k("offsets.topic.replication.factor", "int", 3, 1, doc="capped at the live brokers"),
    _k("offsets.topic.segment.bytes", "int", 104857600, 1),
    _k("offsets.retention.minutes", "int", 10080, 1),
    _k("offsets.retention.check.interval.ms", "long", 600000, 1),
    _k("offsets.commit.timeout.ms", "int", 5000, 1),
    _k("group.initial.rebalance.delay.ms", "int", 3000, 0),
    _k("group.min.session.timeout.ms", "int", 6000, 0),
    _k("group.max.session.timeout.ms", "int", 1800000, 0),
    _k("group.max.size", "int", 2147483647, 1),
    _k("group.share.session.timeout.ms", "int", 45000, 1, doc="KIP-932 share groups"),
    _k("group.share.heartbeat.interval.ms", "int", 5000, 1),
    _k("group.share.max.size", "int", 200, 1, 1000),
    _k("group.share.record.lock.duration.ms", "int", 30000, 1000, 3600000),
    _k("group.share.delivery.count.limit", "int", 5, 2, 10),
    _k("group.share.partition.max.record.locks", "int", 2000, 100, 10000),
    _k("group.share.max.share.sessions", "int", 2000, 1, doc="share sessions per broker (ShareFetch)"),
    # Bounds of the group configs (server/group_configs.py) share.* and consumer.*
    _k("group.share.min.session.timeout.ms", "int", 45000, 1),
    _k("group.share.max.session.timeout.ms", "int", 60000, 1),
    _k("group.share.min.heartbeat.interval.ms", "int", 5000, 1),
    _k("group.share.max.heartbeat.interval.ms", "int", 15000, 1),
    _k("group.share.min.record.lock.duration.ms", "int", 15000, 1000, 30000),
    _k("group.share.max.record.lock.duration.ms", "int", 60000, 30000, 3600000),
    _k("group.consumer.min.session.timeout.ms", "int", 45000, 1),
    _k("group.consumer.max.session.timeout.ms", "int", 60000, 1),
    _k("group.consumer.min.heartbeat.interval.ms", "int", 5000, 1),
    _k("group.consumer.max.heartbeat.interval.ms", "int", 15000, 1),
    _k("group.consumer.session.timeout.ms", "int", 45000, 1, doc="KIP-848 consumer groups"),
    _k("group.consumer.heartbeat.interval.ms", "int", 5000, 1),
    _k("group.consumer.max.size", "int", 2147483647, 1),
    _k("group.consumer.assignors", "list", "uniform,range", doc="server assignor names, the first the default"),
    _k("group.consumer.migration.policy", "string", "bidirectional",
       doc="online classic<->consumer group migration: bidirectional, upgrade, downgrade, disabled"),
    _k("group.coordinator.rebalance.protocols", "list", "classic,consumer",
       doc="without consumer, ConsumerGroupHeartbeat and ConsumerGroupDescribe answer UNSUPPORTED_VERSION; "
           "a list without classic is refused"),
    _k("share.coordinator.state.topic.num.partitions", "int", 50, 1, doc="KIP-932: __share_group_state"),
    _k("share.coordinator.state.topic.replication.factor", "int", 3, 1, doc="capped at the live brokers"),
    _k("share.coordinator.state.topic.min.isr", "int", 2, 1),
    _k("share.coordinator.state.topic.segment.bytes", "int", 104857600, 1),
    _k("share.coordinator.snapshot.update.records.per.snapshot", "int", 500, 0),
    _k("share.coordinator.write.timeout.ms", "int", 5000, 1),
    _k("producer.id.expiration.ms", "int", 86400000, 1),
    _k("producer.id.expiration.check.interval.ms", "int", 600000, 1),
    _k("transaction.partition.verification.enable", "bool", True,
       doc="partition leaders verify a transaction's first batch in a partition with its coordinator "
       "(KIP-890, server/txn_verification.py)"),
    _k("transactional.id.expiration.ms", "int", 604800000, 1),
    _k("transaction.state.log.num.partitions", "int", 50, 1),
    _k("transaction.state.log.replication.factor", "int", 3, 1, doc="capped at the live brokers"),
    _k("transaction.state.log.min.isr", "int", 2, 1),
    _k("transaction.state.log.segment.bytes", "int", 104857600, 1),
    _k("transaction.max.timeout.ms", "int", 900000, 1),
    _k("transaction.abort.timed.out.transaction.cleanup.interval.ms", "int", 10000, 1),
    _k("transaction.remove.expired.transaction.cleanup.interval.ms", "int", 3600000, 1),
    _k("min.insync.replicas", "int", 1, 1),
    _k("unclean.leader.election.enable", "bool", False),
    _k("replica.lag.time.max.ms", "long", 30000, 0),
    _k("replica.fetch.max.bytes", "int", 1048576, 0),
    _k("replica.fetch.response.max.bytes", "int", 10485760, 0),
    _k("replica.fetch.min.bytes", "int", 1, 1),
    _k("replica.fetch.wait.max.ms", "int", 500, 0),
    _k("replica.fetch.backoff.ms", "int", 1000, 0),
    _k("max.incremental.fetch.session.cache.slots", "int", 1000, 0, doc="KIP-227 fetch sessions per broker"),
    _k("min.incremental.fetch.session.eviction.ms", "int", 120000, 0),
    _k("replica.socket.timeout.ms", "int", 30000, 1),
    _k("replica.high.watermark.checkpoint.interval.ms", "long", 5000, 1),
    _k("leader.replication.throttled.rate", "long", LONG_MAX, 0,
       doc="bytes/s a leader sends for throttled replicas (dynamic; see replication_quota_manager)"),
    _k("follower.replication.throttled.rate", "long", LONG_MAX, 0,
       doc="bytes/s a follower fetches for throttled replicas (dynamic)"),
    _k("replica.alter.log.dirs.io.max.bytes.per.second", "long", LONG_MAX, 0,
       doc="accepted for compatibility; replicas do not move between log dirs"),
    _k("replication.quota.window.num", "int", 11, 1),
    _k("replication.quota.window.size.seconds", "int", 1, 1),
    _k("quota.window.num", "int", 11, 1, doc="samples of the client quotas' rates (client_quota_manager)"),
    _k("quota.window.size.seconds", "int", 1, 1),
    _k("controlled.shutdown.enable", "bool", True),
    _k("controlled.shutdown.max.retries", "int", 3, 0),
    _k("controlled.shutdown.retry.backoff.ms", "long", 5000, 0),
    _k("controller.socket.timeout.ms", "int", 30000, 1),
    _k("auto.leader.rebalance.enable", "bool", True),
    _k("leader.imbalance.check.interval.seconds", "long", 300, 1),
    _k("leader.imbalance.per.broker.percentage", "int", 10, 0, 100),
    _k("compression.type", "string", "producer", doc="validated by LogConfig (Kafka's BrokerCompressionType)"),
    _k("compression.gzip.level", "int", -1, -1, 9, doc="-1 or 1-9 (KIP-390)"),
    _k("compression.lz4.level", "int", 9, 1, 17, doc="KIP-390"),
    _k("compression.zstd.level", "int", 3, -131072, 22, doc="KIP-390"),
    _k("process.roles", "string", None, doc="accepted for compatibility (KRaft); ignored"),
    _k("controller.quorum.voters", "string", None, doc="accepted for compatibility; ignored"),
    _k("controller.listener.names", "string", None, doc="accepted for compatibility; ignored"),
    _k("inter.broker.listener.name", "string", None,
       doc="the listener brokers use to reach each other; default: the first of listeners"),
    _k("security.inter.broker.protocol", "string", None,
       doc="the inter-broker listener is the first with this protocol (when inter.broker.listener.name is unset)"),
    # TLS (odradek/client/ssl_factory.py); each also per listener: listener.name.<name>.ssl.*
    _k("ssl.keystore.type", "string", "PEM", doc="PEM, PKCS12, or JKS for a PKCS12 file (Java's JKS format refused)"),
    _k("ssl.keystore.location", "string", None, doc="PEM file (private key and chain) or PKCS12 keystore"),
    _k("ssl.keystore.key", "password", None, doc="inline PEM private key"),
    _k("ssl.keystore.certificate.chain", "password", None, doc="inline PEM certificate chain"),
    _k("ssl.keystore.password", "password", None, doc="opens a PKCS12 keystore; PEM keys use ssl.key.password"),
    _k("ssl.key.password", "password", None),
    _k("ssl.truststore.type", "string", "PEM", doc="PEM, PKCS12, or JKS for a PKCS12 file (Java's JKS format refused)"),
    _k("ssl.truststore.location", "string", None),
    _k("ssl.truststore.certificates", "password", None, doc="inline PEM CA certificates"),
    _k("ssl.truststore.password", "password", None, doc="opens a PKCS12 truststore; PEM truststores have none"),
    _k("ssl.client.auth", "string", "none", doc="none, requested or required"),
    _k("ssl.principal.mapping.rules", "string", "DEFAULT"),
    _k("ssl.enabled.protocols", "list", "TLSv1.2,TLSv1.3"),
    _k("ssl.cipher.suites", "list", ""),
    _k("ssl.protocol", "string", "TLSv1.3", doc="accepted; ssl.enabled.protocols bounds the versions"),
    _k("ssl.endpoint.identification.algorithm", "string", "https", doc="inter-broker connections"),
    # SASL (odradek/server/sasl_authenticator.py); also per listener: listener.name.<name>.sasl.*,
    # and PLAIN users in listener.name.<name>.plain.sasl.jaas.config
    _k("sasl.enabled.mechanisms", "list", "GSSAPI", doc="of these odradek serves PLAIN, SCRAM-SHA-256, SCRAM-SHA-512"),
    _k("sasl.mechanism.inter.broker.protocol", "string", "GSSAPI"),
    _k("sasl.jaas.config", "password", None, doc="per listener and mechanism"),
    _k("connections.max.reauth.ms", "long", 0, 0, doc="a SASL session's lifetime; 0: no re-authentication"),
    _k("sasl.server.max.receive.size", "int", 524288, 0,
       doc="the largest request a SASL listener reads before authentication (and during re-authentication)"),
    _k("connection.failed.authentication.delay.ms", "int", 100, 0,
       doc="how long a failed authentication's answer and close are held back"),
    # Dynamic password configs kept in ZooKeeper (odradek/server/password_encoder.py; Kafka's
    # PasswordEncoderConfigs); the embedded store keeps them unencoded in 0600 files, as KRaft
    _k("password.encoder.secret", "password", None, doc="encrypts dynamic passwords stored in ZooKeeper"),
    _k("password.encoder.old.secret", "password", None,
       doc="the previous secret: passwords it encoded are re-encoded with password.encoder.secret at start"),
    _k("password.encoder.keyfactory.algorithm", "string", None, doc="default PBKDF2WithHmacSHA512"),
    _k("password.encoder.cipher.algorithm", "string", "AES/CBC/PKCS5Padding", doc="or AES/GCM/NoPadding"),
    _k("password.encoder.key.length", "int", 128, 8),
    _k("password.encoder.iterations", "int", 4096, 1024),
]}


def _convert(key: Key, raw: Any) -> Any:
    if raw is None:
        return None
    text = str(raw).strip()
    try:
        if key.type in ("int", "long"):
            value = int(text)
        elif key.type == "double":
            value = float(text)
        elif key.type == "bool":
            if text.lower() not in ("true", "false"):
                raise ValueError(text)
            return text.lower() == "true"
        elif key.type == "list":
            return [item.strip() for item in text.split(",") if item.strip()]
        else:
            return text
    except ValueError:
        raise ConfigError(f"{key.name}: invalid {key.type} value {raw!r}") from None
    if key.low is not None and value < key.low or key.high is not None and value > key.high:
        raise ConfigError(f"{key.name}: {value} is {_bounds(key)}")
    return value


def _bounds(key: Key) -> str:
    """What a value outside ``key``'s range should have been, in words."""
    low, high = (None if b is None else int(b) if float(b).is_integer() else b for b in (key.low, key.high))
    if high is None:
        return f"below its minimum, {low}"
    if low is None:
        return f"above its maximum, {high}"
    return f"outside [{low}, {high}]"


def read_properties(path: str | Path) -> dict[str, str]:
    """Parse a Java-style properties file (``key=value`` or ``key: value``, ``#`` comments)."""
    props: dict[str, str] = {}
    for raw in Path(path).read_text().splitlines():
        line = raw.strip()
        if not line or line[0] in "#!":
            continue
        sep = min((i for i in (line.find("="), line.find(":")) if i >= 0), default=-1)
        if sep < 0:
            raise ConfigError(f"{path}: cannot parse line {raw!r}")
        props[line[:sep].strip()] = line[sep + 1 :].strip()
    return props


@dataclass(frozen=True)
class Listener:
    name: str
    host: str
    port: int


def parse_listener(text: str) -> Listener:
    """``NAME://host:port`` (an empty host means all interfaces)."""
    name, sep, rest = text.partition("://")
    host, colon, port = rest.rpartition(":")
    if not sep or not colon or not port.isdigit():
        raise ConfigError(f"listeners: cannot parse {text!r} (expected NAME://host:port)")
    return Listener(name.upper(), host.strip("[]"), int(port))


@dataclass(frozen=True)
class BrokerConfig:
    """Validated broker configuration; ``props`` holds what was explicitly set."""

    props: dict[str, str] = field(default_factory=dict)
    values: dict[str, Any] = field(default_factory=dict)
    unknown: tuple[str, ...] = ()
    log_config: LogConfig = field(default_factory=LogConfig)

    @classmethod
    def load(cls, path: str | Path | None = None, overrides: dict[str, str] | None = None) -> "BrokerConfig":
        props = read_properties(path) if path else {}
        props.update(overrides or {})
        return cls.from_props(props)

    @classmethod
    def from_props(cls, props: dict[str, Any]) -> "BrokerConfig":
        props = {k: str(v) for k, v in props.items()}
        values = {name: _convert(key, props.get(name, key.default)) for name, key in KEYS.items()}
        unknown = tuple(sorted(k for k in props if k not in KEYS and not _is_topic_key(k)
                               and not _is_listener_key(k)))
        try:
            log_config = LogConfig.from_properties(props)
        except InvalidConfigError as e:
            raise ConfigError(str(e)) from None
        for text in values["listeners"] + (values["advertised.listeners"] or []):
            parse_listener(text)
        return cls(props, values, unknown, log_config)

    def __getitem__(self, name: str) -> Any:
        return self.values[name]

    @property
    def broker_id(self) -> int:
        explicit = self.values["broker.id"]
        return explicit if explicit is not None and "node.id" not in self.props else self.values["node.id"]

    @property
    def log_dirs(self) -> list[str]:
        return self.values["log.dirs"] or [self.values["log.dir"]]

    @property
    def listeners(self) -> list[Listener]:
        return [parse_listener(t) for t in self.values["listeners"]]

    @property
    def advertised_listeners(self) -> list[Listener]:
        advertised = self.values["advertised.listeners"]
        return [parse_listener(t) for t in advertised] if advertised else self.listeners

    def source_of(self, name: str) -> str:
        """``static`` when set in the file or overrides, else ``default``."""
        return "static" if name in self.props else "default"


def _is_topic_key(name: str) -> bool:
    return name in TOPIC_CONFIG_NAMES


def _is_listener_key(name: str) -> bool:
    """``listener.name.<listener>.<key>``: a known key set for one listener only."""
    parts = name.split(".", 3)
    return len(parts) == 4 and parts[:2] == ["listener", "name"] and (
        parts[3] in KEYS or parts[3].partition(".")[2] == "sasl.jaas.config")  # <mechanism>.sasl.jaas.config
