"""Which broker configs change at run time, and at which level (Kafka's ``DynamicBrokerConfig``).

A dynamic broker config is set per broker (resource name: the broker id) or as the cluster-wide
default (resource name ""); a broker's own value wins over the default, which wins over
``server.properties``. The names are Kafka 3.x's:

- topic defaults (``DynamicLogConfig``): the first broker synonym of each topic config, e.g.
  ``log.retention.ms`` but not ``log.retention.hours``, ``log.roll.ms`` but not
  ``log.roll.hours``; ``log.message.format.version`` is not among them. odradek applies them
  at once to every topic that has no value of its own.
- the replication throttles (``leader.replication.throttled.rate``, ``follower.replication.throttled.rate``,
  applied on their next check; see ``server/replication_quota_manager.py``);
- the cleaner (``LogCleaner.ReconfigurableConfigs``), thread pools (``DynamicThreadPool``),
  connection limits (``SocketServer``), listeners with their SSL and SASL settings
  (``DynamicListenerConfig``), producer-state expiry, remote-log quotas and metric reporters:
  accepted and kept (DescribeConfigs shows them); odradek applies those it has a feature for.

Everything else is refused as Kafka refuses it, with INVALID_REQUEST and Kafka's message:
"Cannot update these configs dynamically: Set(log.dirs)". odradek is stricter than Kafka in one
case: a name it does not know at all is refused the same way (Kafka stores unknown names).
Password configs (Kafka's PASSWORD type: ``ssl.key.password``, ``sasl.jaas.config``, ...) are
stored encrypted in ZooKeeper with ``password.encoder.secret`` (``DynamicPasswords`` below;
the format is ``server/password_encoder.py``'s), and refused without a secret; the embedded
store keeps them as they are, in files only the broker's user can read (``metadata/journal.py``),
as Kafka in KRaft mode keeps them in its metadata log. SSL keystore and truststore settings may change only per listener
(``listener.name.<listener>.ssl.keystore.location``), and listener and security settings only
per broker, never as the cluster-wide default. Thread counts may at most double or halve in
one change. ``listeners`` changed at run time are bound and closed at once (see
``Broker.update_listeners``), provided ``listener.security.protocol.map`` names them.
"""

from __future__ import annotations

import logging
import re

from odradek.metadata import layout
from odradek.metadata.errors import BadVersionError, NoNodeError
from odradek.protocol.generated.error_codes import ErrorCode
from odradek.server.config import KEYS, ConfigError
from odradek.server.password_encoder import PasswordDecodeError, PasswordEncoder

log = logging.getLogger(__name__)

# ServerTopicConfigSynonyms.TOPIC_CONFIG_SYNONYMS (the first synonym of each topic config)
# without log.message.format.version (DynamicLogConfig.NonReconfigrableLogConfigs).
LOG_KEYS = frozenset({
    "log.segment.bytes", "log.roll.ms", "log.roll.jitter.ms", "log.index.size.max.bytes",
    "log.flush.interval.messages", "log.flush.interval.ms", "log.retention.bytes", "log.retention.ms",
    "message.max.bytes", "log.index.interval.bytes", "log.cleaner.delete.retention.ms",
    "log.cleaner.min.compaction.lag.ms", "log.cleaner.max.compaction.lag.ms", "log.segment.delete.delay.ms",
    "log.cleaner.min.cleanable.ratio", "log.cleanup.policy", "unclean.leader.election.enable",
    "min.insync.replicas", "compression.type", "compression.gzip.level", "compression.lz4.level",
    "compression.zstd.level", "log.preallocate", "log.message.timestamp.type",
    "log.message.timestamp.difference.max.ms", "log.message.timestamp.before.max.ms",
    "log.message.timestamp.after.max.ms", "log.message.downconversion.enable", "log.local.retention.ms",
    "log.local.retention.bytes",
})
CLEANER_KEYS = frozenset({
    "log.cleaner.threads", "log.cleaner.dedupe.buffer.size", "log.cleaner.io.buffer.load.factor",
    "log.cleaner.io.buffer.size", "message.max.bytes", "log.cleaner.io.max.bytes.per.second",
    "log.cleaner.backoff.ms",
})
THREAD_POOL_KEYS = frozenset({"num.io.threads", "num.replica.fetchers", "num.recovery.threads.per.data.dir",
                              "background.threads"})
SOCKET_SERVER_KEYS = frozenset({"max.connections.per.ip", "max.connections.per.ip.overrides", "max.connections",
                                "max.connection.creation.rate"})
# SslConfigs.RECONFIGURABLE_CONFIGS: only with a listener prefix.
SECURITY_KEYS = frozenset({
    "ssl.keystore.type", "ssl.keystore.location", "ssl.keystore.password", "ssl.key.password",
    "ssl.truststore.type", "ssl.truststore.location", "ssl.truststore.password",
    "ssl.keystore.certificate.chain", "ssl.keystore.key", "ssl.truststore.certificates",
})
LISTENER_KEYS = frozenset({
    "advertised.listeners", "listeners", "listener.security.protocol.map", "principal.builder.class",
    "ssl.protocol", "ssl.provider", "ssl.cipher.suites", "ssl.enabled.protocols", "ssl.keystore.type",
    "ssl.keystore.location", "ssl.keystore.password", "ssl.key.password", "ssl.truststore.type",
    "ssl.truststore.location", "ssl.truststore.password", "ssl.keymanager.algorithm",
    "ssl.trustmanager.algorithm", "ssl.endpoint.identification.algorithm", "ssl.secure.random.implementation",
    "ssl.client.auth", "ssl.engine.factory.class", "sasl.mechanism.inter.broker.protocol", "sasl.jaas.config",
    "sasl.enabled.mechanisms", "sasl.kerberos.service.name", "sasl.kerberos.kinit.cmd",
    "sasl.kerberos.ticket.renew.window.factor", "sasl.kerberos.ticket.renew.jitter",
    "sasl.kerberos.min.time.before.relogin", "sasl.kerberos.principal.to.local.rules",
    "sasl.login.refresh.window.factor", "sasl.login.refresh.window.jitter", "sasl.login.refresh.min.period.seconds",
    "sasl.login.refresh.buffer.seconds", "max.connections", "max.connection.creation.rate", "num.network.threads",
})
OTHER_KEYS = frozenset({
    "metric.reporters", "producer.id.expiration.ms", "transaction.partition.verification.enable",
    "remote.log.index.file.cache.total.size.bytes", "remote.fetch.max.wait.ms",
    "remote.log.manager.copy.max.bytes.per.second", "remote.log.manager.fetch.max.bytes.per.second",
    "remote.list.offsets.request.timeout.ms",
})
# Kafka's DynamicConfig.Broker: the replication throttles (server/replication_quota_manager.py).
REPLICATION_QUOTA_KEYS = frozenset({"leader.replication.throttled.rate", "follower.replication.throttled.rate",
                                    "replica.alter.log.dirs.io.max.bytes.per.second"})
ALL_KEYS = (LOG_KEYS | CLEANER_KEYS | THREAD_POOL_KEYS | SOCKET_SERVER_KEYS | SECURITY_KEYS | LISTENER_KEYS | OTHER_KEYS
            | REPLICATION_QUOTA_KEYS)
_CLUSTER_LEVEL_LISTENER_KEYS = frozenset({"max.connections", "max.connection.creation.rate", "num.network.threads"})
PER_BROKER_KEYS = (SECURITY_KEYS | LISTENER_KEYS) - _CLUSTER_LEVEL_LISTENER_KEYS
# Kafka's PASSWORD-typed dynamic configs: described with a null value, as sensitive.
SENSITIVE_SUFFIXES = ("ssl.keystore.password", "ssl.key.password", "ssl.truststore.password", "ssl.keystore.key",
                      "ssl.keystore.certificate.chain", "ssl.truststore.certificates", "sasl.jaas.config")

_LISTENER_PREFIXED = re.compile(r"listener\.name\.[^.]*\.(.*)")


class DynamicConfigError(ValueError):
    """A dynamic broker config change Kafka refuses; ``error`` is the code it answers."""

    def __init__(self, message: str, error: ErrorCode = ErrorCode.INVALID_REQUEST) -> None:
        super().__init__(message)
        self.error = error


def is_password(name: str) -> bool:
    """A dynamic config of Kafka's PASSWORD type, listener-prefixed or not
    (``DynamicBrokerConfig.isPasswordConfig``): stored encoded in ZooKeeper."""
    return name.endswith(SENSITIVE_SUFFIXES)


def is_sensitive(name: str) -> bool:
    """Described without its value: the dynamic passwords and every static key of the PASSWORD
    type (``password.encoder.secret`` too)."""
    key = KEYS.get(name)
    return is_password(name) or (key is not None and key.type == "password")


def base_name(name: str) -> str:
    """``listener.name.ssl.ssl.keystore.location`` -> ``ssl.keystore.location``."""
    match = _LISTENER_PREFIXED.fullmatch(name)
    return match.group(1) if match else name


def _scala_set(names) -> str:
    return "Set(" + ", ".join(sorted(names)) + ")"


def check_names(names, per_broker: bool) -> None:
    """Refuse the names Kafka does not let change here, with its messages (the first rule
    broken wins, in Kafka's order)."""
    static = [n for n in names if n not in ALL_KEYS and not _LISTENER_PREFIXED.fullmatch(n)]
    if static:
        raise DynamicConfigError(f"Cannot update these configs dynamically: {_scala_set(static)}")
    unprefixed = [n for n in names if n in SECURITY_KEYS]
    if unprefixed:
        raise DynamicConfigError("These security configs can be dynamically updated only per-listener using the "
                                 f"listener prefix: {_scala_set(unprefixed)}")
    if not per_broker:
        broker_only = [n for n in names if n in PER_BROKER_KEYS or (
            _LISTENER_PREFIXED.fullmatch(n) and base_name(n) not in _CLUSTER_LEVEL_LISTENER_KEYS)]
        if broker_only:
            raise DynamicConfigError("Cannot update these configs at default cluster level, broker id must be "
                                     f"specified: {_scala_set(broker_only)}")


def check_thread_counts(current, new) -> None:
    """A thread count may at most double or halve in one change (``DynamicThreadPool`` and
    ``LogCleaner.validateReconfiguration``); ``current`` and ``new`` map names to ints."""
    for name in sorted(THREAD_POOL_KEYS):
        old, value = current.get(name), new.get(name)
        if old is None or value is None or value == old:
            continue
        prefix = f"Dynamic thread count update validation failed for {name}={value}"
        if value <= 0:
            raise DynamicConfigError(f"{prefix}, value should be at least 1")
        if value < old // 2:
            raise DynamicConfigError(f"{prefix}, value should be at least half the current value {old}")
        if value > old * 2:
            raise DynamicConfigError(f"{prefix}, value should not be greater than double the current value {old}")
    old, value = current.get("log.cleaner.threads"), new.get("log.cleaner.threads")
    if old is not None and value is not None and value != old:
        if value < 1:
            raise DynamicConfigError("Log cleaner threads should be at least 1")
        if value < old // 2:
            raise DynamicConfigError(f"Log cleaner threads cannot be reduced to less than half the current value {old}")
        if value > old * 2:
            raise DynamicConfigError(
                f"Log cleaner threads cannot be increased to more than double the current value {old}")


def check_listeners(config) -> None:
    """``advertised.listeners`` name only listeners, and ``listener.security.protocol.map``
    names them all (``DynamicListenerConfig.validateReconfiguration``); ``config`` is the
    ``BrokerConfig`` the change would give."""
    listeners = [listener.name for listener in config.listeners]
    advertised = [listener.name for listener in config.advertised_listeners]
    protocols = [item.split(":", 1)[0].strip().upper() for item in config["listener.security.protocol.map"].split(",")
                 if item.strip()]
    if not set(advertised) <= set(listeners):
        raise DynamicConfigError(f"Advertised listeners '{','.join(advertised)}' must be a subset of listeners "
                                 f"'{','.join(listeners)}'")
    if not set(listeners) <= set(protocols):
        raise DynamicConfigError(f"Listeners '{','.join(listeners)}' must be subset of listener map "
                                 f"'{config['listener.security.protocol.map']}'")


SECRET_NOT_CONFIGURED = "Password encoder secret not configured"


class DynamicPasswords:
    """How this broker keeps its dynamic password configs in the store: Kafka's
    ``DynamicBrokerConfig.toPersistentProps``, ``fromPersistentProps`` and
    ``maybeReEncodePasswords``.

    On ZooKeeper (``encoding``) every password value is stored as ``encoder`` encodes it
    (``server/password_encoder.py``), so ``/config/brokers/<id>`` never holds one in clear;
    with no ``password.encoder.secret`` a change that would store one is refused with
    INVALID_REQUEST. Reading decodes; a value this secret cannot decode is left out (logged
    once), as Kafka ignores it. With ``password.encoder.old.secret`` set, the broker re-encodes
    at start what the old secret encoded (``rotate``). On the embedded store values pass
    unchanged (KRaft keeps them unencoded in its metadata log, guarded by file permissions).

    ``metadata/cluster_metadata.py`` calls ``to_persistent`` and ``from_persistent`` as its
    ``broker_config_codec``, so every reader of ``broker_config`` sees cleartext and every
    writer stores encoded values."""

    def __init__(self, encoding: bool, encoder: PasswordEncoder | None = None,
                 old_encoder: PasswordEncoder | None = None) -> None:
        self.encoding = encoding
        self.encoder = encoder
        self.old_encoder = old_encoder
        self._reported: set[tuple[str, str]] = set()

    @classmethod
    def from_config(cls, config) -> "DynamicPasswords":
        """From ``password.encoder.*`` of a ``BrokerConfig``; ConfigError for settings the
        encoder cannot use."""
        def encoder(secret_key: str) -> PasswordEncoder | None:
            secret = config[secret_key]
            if secret is None:
                return None
            try:
                return PasswordEncoder(secret, config["password.encoder.keyfactory.algorithm"],
                                       config["password.encoder.cipher.algorithm"],
                                       config["password.encoder.key.length"], config["password.encoder.iterations"])
            except ValueError as e:
                raise ConfigError(f"password.encoder.*: {e}") from None

        return cls(bool(config["zookeeper.connect"]), encoder("password.encoder.secret"),
                   encoder("password.encoder.old.secret"))

    def check(self, configs, broker_id: int | None) -> None:
        """Refuse ``configs`` (the whole set about to be stored) when it holds a password that
        cannot be encoded, with the message of Kafka's ZkAdminManager."""
        if self.encoding and self.encoder is None and any(is_password(n) and v is not None for n, v in configs.items()):
            name = "" if broker_id is None else str(broker_id)
            raise DynamicConfigError(f"Invalid config value for resource ConfigResource(type=BROKER, name='{name}'): "
                                     f"{SECRET_NOT_CONFIGURED}")

    def to_persistent(self, configs: dict[str, str]) -> dict[str, str]:
        """``configs`` as stored: passwords encoded (ZooKeeper). Raises DynamicConfigError
        when one must be encoded and there is no secret."""
        if not self.encoding or not any(is_password(n) for n in configs):
            return dict(configs)
        if self.encoder is None:
            raise DynamicConfigError(SECRET_NOT_CONFIGURED)
        return {n: self.encoder.encode(v) if is_password(n) else v for n, v in configs.items()}

    def from_persistent(self, stored: dict[str, str]) -> dict[str, str]:
        """``stored`` with its passwords decoded; those that cannot be are left out."""
        if not self.encoding:
            return dict(stored)
        out = {}
        for name, value in stored.items():
            if not is_password(name):
                out[name] = value
                continue
            try:
                if self.encoder is None:
                    raise PasswordDecodeError(SECRET_NOT_CONFIGURED)
                out[name] = self.encoder.decode(value)
            except PasswordDecodeError as e:
                if (name, value) not in self._reported:  # read at every describe: say it once
                    self._reported.add((name, value))
                    log.error("Dynamic password config %s could not be decoded, ignoring: %s", name, e)
        return out

    def re_encoded(self, stored: dict[str, str]) -> dict[str, str] | None:
        """``stored`` with the passwords that ``password.encoder.old.secret`` decodes encoded
        again with ``password.encoder.secret``; None when there is none."""
        if not self.encoding or self.old_encoder is None or self.encoder is None:
            return None
        out, changed = dict(stored), False
        for name, value in stored.items():
            if not is_password(name):
                continue
            try:
                password = self.old_encoder.decode(value)
            except PasswordDecodeError:  # already under the new secret (an earlier start)
                continue
            out[name], changed = self.encoder.encode(password), True
        return out if changed else None

    def rotate(self, store, broker_id: int) -> bool:
        """Re-encode this broker's stored passwords under the new secret (``re_encoded``),
        written only over the version read (a concurrent change: read again). Blocking store
        calls. Returns whether anything was rewritten."""
        if not self.encoding or self.old_encoder is None:
            return False
        path = layout.broker_config_path(broker_id)
        while True:
            try:
                data, version = store.get(path)
            except NoNodeError:
                return False
            updated = self.re_encoded(layout.decode_config(data, path))
            if updated is None:
                return False
            try:
                store.set(path, layout.encode_config(updated), version)
            except BadVersionError:
                continue
            log.info("re-encoded the dynamic passwords of broker %d with the new password.encoder.secret", broker_id)
            return True
