"""Group configs (Kafka 4's ConfigResource type GROUP, KIP-848 and KIP-932): per-group overrides
of the consumer and share group settings, as Kafka's ``GroupConfig`` and ``GroupConfigManager``.

Keys, with the broker config that gives the default of a group without its own value::

    consumer.session.timeout.ms     group.consumer.session.timeout.ms    INT, at least 1
    consumer.heartbeat.interval.ms  group.consumer.heartbeat.interval.ms INT, at least 1
    share.session.timeout.ms        group.share.session.timeout.ms       INT, at least 1
    share.heartbeat.interval.ms     group.share.heartbeat.interval.ms    INT, at least 1
    share.record.lock.duration.ms   group.share.record.lock.duration.ms  INT, at least 1000
    share.auto.offset.reset         (latest)            latest | earliest | by_duration:<ISO-8601>
    share.isolation.level           (read_uncommitted)  read_uncommitted | read_committed

A change is validated as Kafka's ``GroupConfigManager.validate``: the broker's defaults overlaid
with the group's new overrides, every name known, every value parsed, the timeouts and the lock
duration within the broker's ``group.{consumer,share}.{min,max}.*`` bounds, a session timeout
above its heartbeat interval. Any failure is Kafka's InvalidConfigurationException, answered
INVALID_CONFIG. One difference: a broker whose own default lies outside Kafka's default bounds
(a test broker with a 6 s session timeout) widens the bound to that default, where Kafka would
refuse to start.

Storage. Kafka 4 keeps group configs in the KRaft metadata log; ZooKeeper-mode Kafka had none.
odradek keeps them where ZooKeeper-mode Kafka keeps topic configs, on both metadata stores (the
embedded store has the same znode layout)::

    /config/groups/<sanitized group id>   {"version":1,"config":{"share.auto.offset.reset":"earliest"}}

``<sanitized group id>`` is Kafka's ``Sanitizer.sanitize`` (URL-encoding, as for users'
quota znodes), since a group id may hold any character. After a write the broker announces
``groups/<sanitized group id>`` through ``/config/changes`` (``ConfigChangeListener``), and
every broker re-reads that group's overrides into its cache. Readers on the hot paths (the
group coordinator's heartbeats, the share partitions) read the cache only, never the store.
"""

from __future__ import annotations

import re
from urllib.parse import unquote

from odradek.metadata import layout
from odradek.metadata.errors import NoNodeError, NodeExistsError
from odradek.server.scram_credentials import sanitize

GROUPS = "/config/groups"

CONSUMER_SESSION_TIMEOUT = "consumer.session.timeout.ms"
CONSUMER_HEARTBEAT_INTERVAL = "consumer.heartbeat.interval.ms"
SHARE_SESSION_TIMEOUT = "share.session.timeout.ms"
SHARE_HEARTBEAT_INTERVAL = "share.heartbeat.interval.ms"
SHARE_RECORD_LOCK_DURATION = "share.record.lock.duration.ms"
SHARE_AUTO_OFFSET_RESET = "share.auto.offset.reset"
SHARE_ISOLATION_LEVEL = "share.isolation.level"

# int config -> (broker config of its default, lowest value, broker configs of its bounds)
INT_KEYS: dict[str, tuple[str, int, str | None, str | None]] = {
    CONSUMER_SESSION_TIMEOUT: ("group.consumer.session.timeout.ms", 1,
                               "group.consumer.min.session.timeout.ms", "group.consumer.max.session.timeout.ms"),
    CONSUMER_HEARTBEAT_INTERVAL: ("group.consumer.heartbeat.interval.ms", 1,
                                  "group.consumer.min.heartbeat.interval.ms", "group.consumer.max.heartbeat.interval.ms"),
    SHARE_SESSION_TIMEOUT: ("group.share.session.timeout.ms", 1,
                            "group.share.min.session.timeout.ms", "group.share.max.session.timeout.ms"),
    SHARE_HEARTBEAT_INTERVAL: ("group.share.heartbeat.interval.ms", 1,
                               "group.share.min.heartbeat.interval.ms", "group.share.max.heartbeat.interval.ms"),
    SHARE_RECORD_LOCK_DURATION: ("group.share.record.lock.duration.ms", 1000,
                                 "group.share.min.record.lock.duration.ms", "group.share.max.record.lock.duration.ms"),
}
STRING_DEFAULTS = {SHARE_AUTO_OFFSET_RESET: "latest", SHARE_ISOLATION_LEVEL: "read_uncommitted"}
NAMES = tuple(sorted([*INT_KEYS, *STRING_DEFAULTS]))
ISOLATION_LEVELS = ("read_uncommitted", "read_committed")

# Java's Duration.parse: PnDTnHnMn.nS (each part optional, signed), case-insensitive.
_DURATION = re.compile(r"([-+]?)P(?:([-+]?\d+)D)?(?:T(?:([-+]?\d+)H)?(?:([-+]?\d+)M)?"
                       r"(?:([-+]?)(\d+)(?:[.,](\d{0,9}))?S)?)?", re.IGNORECASE)


class GroupConfigError(ValueError):
    """Kafka's InvalidConfigurationException (INVALID_CONFIG), with its message."""


def by_duration_ms(value: str) -> int | None:
    """The milliseconds of ``by_duration:<ISO-8601 duration>`` (``by_duration:PT1H`` -> 3600000),
    None for ``latest``/``earliest``. Raises GroupConfigError for anything else, a negative
    duration, or ``PT`` without a part (Java's Duration.parse refuses both)."""
    text = value.strip().lower()
    if text in ("latest", "earliest"):
        return None
    if not text.startswith("by_duration:"):
        raise GroupConfigError(_reset_message(value))
    iso = text[len("by_duration:"):].strip()
    m = _DURATION.fullmatch(iso)
    if m is None or iso.upper().endswith("T") or not any(m.group(i) for i in (2, 3, 4, 6)):
        raise GroupConfigError(_reset_message(value))
    sign, days, hours, minutes, s_sign, seconds, fraction = m.groups()
    total_ms = (int(days or 0) * 86_400_000 + int(hours or 0) * 3_600_000 + int(minutes or 0) * 60_000)
    second_ms = int(seconds or 0) * 1000 + int((fraction or "").ljust(3, "0")[:3] or 0)
    total_ms += -second_ms if s_sign == "-" else second_ms
    if sign == "-":
        total_ms = -total_ms
    if total_ms < 0:
        raise GroupConfigError(_reset_message(value))
    return total_ms


def _reset_message(value: str) -> str:
    return (f"Invalid value `{value}` for configuration {SHARE_AUTO_OFFSET_RESET}. The value must be either "
            "'earliest', 'latest' or of the format 'by_duration:<PnDTnHnMn.nS>'.")


def broker_defaults(broker_config) -> dict[str, str]:
    """The value of every group config for a group without overrides (Kafka's
    ``extractConsumerGroupConfigMap``), as strings."""
    out = {name: str(broker_config[default_key]) for name, (default_key, *_) in INT_KEYS.items()}
    return {**out, **STRING_DEFAULTS}


def effective(overrides: dict[str, str], broker_config) -> dict:
    """Every group config's value for a group with ``overrides`` (already validated; a stored
    value that no longer parses falls back to the default): ints as int, strings lower case."""
    defaults = broker_defaults(broker_config)
    out: dict = {}
    for name in NAMES:
        value = overrides.get(name, defaults[name])
        try:
            out[name] = _parse(name, value)
        except GroupConfigError:
            out[name] = _parse(name, defaults[name])
    return out


def _parse(name: str, value: str):
    if name in INT_KEYS:
        try:
            number = int(str(value).strip())
        except ValueError:
            raise GroupConfigError(f"Invalid value {value} for configuration {name}: Not a number of type INT") from None
        if not -2**31 <= number < 2**31:
            raise GroupConfigError(f"Invalid value {value} for configuration {name}: Not a number of type INT")
        lowest = INT_KEYS[name][1]
        if number < lowest:
            raise GroupConfigError(f"Invalid value {value} for configuration {name}: Value must be at least {lowest}")
        return number
    text = str(value).strip().lower()
    if name == SHARE_AUTO_OFFSET_RESET:
        by_duration_ms(text)
        return text
    if name == SHARE_ISOLATION_LEVEL and text not in ISOLATION_LEVELS:
        raise GroupConfigError(f"Invalid value {value} for configuration {name}: String must be one of: "
                               f"{', '.join(ISOLATION_LEVELS)}")
    return text


def validate(overrides: dict[str, str], broker_config) -> None:
    """Kafka's ``GroupConfigManager.validate`` of a group's whole set of new overrides.
    Raises GroupConfigError."""
    for name in overrides:
        if name not in NAMES:
            raise GroupConfigError(f"Unknown group config name: {name}")
    values = {name: _parse(name, v) for name, v in {**broker_defaults(broker_config), **overrides}.items()}
    for name, (default_key, _, low_key, high_key) in INT_KEYS.items():
        default = int(broker_config[default_key])
        if values[name] < min(int(broker_config[low_key]), default):
            raise GroupConfigError(f"{name} must be greater than or equal to {low_key}")
        if values[name] > max(int(broker_config[high_key]), default):
            raise GroupConfigError(f"{name} must be less than or equal to {high_key}")
    for session, interval in ((CONSUMER_SESSION_TIMEOUT, CONSUMER_HEARTBEAT_INTERVAL),
                              (SHARE_SESSION_TIMEOUT, SHARE_HEARTBEAT_INTERVAL)):
        if values[session] <= values[interval]:
            raise GroupConfigError(f"{session} must be greater than {interval}")


def group_path(group_id: str) -> str:
    return f"{GROUPS}/{sanitize(group_id)}"


def read_config(store, group_id: str) -> dict[str, str]:
    """A group's stored overrides, {} if none."""
    path = group_path(group_id)
    try:
        return layout.decode_config(store.get(path)[0], path)
    except NoNodeError:
        return {}


def write_config(store, group_id: str, config: dict[str, str]) -> None:
    data = layout.encode_config(config)
    path = group_path(group_id)
    try:
        store.set(path, data)
    except NoNodeError:
        try:
            store.create(path, data, make_parents=True)
        except NodeExistsError:
            store.set(path, data)


def all_configs(store) -> dict[str, dict[str, str]]:
    """Every group's overrides (a broker's start)."""
    try:
        names = store.children(GROUPS)
    except NoNodeError:
        return {}
    out = {}
    for name in names:
        config = read_config(store, unquote(name))
        if config:
            out[unquote(name)] = config
    return out


class GroupConfigs:
    """The broker's view of the group configs: a cache of every group's overrides, filled at
    start (``load``), changed by this broker's writes (``set``) and by other brokers' through
    ``/config/changes`` (``refresh``). ``get`` is what the coordinators and share partitions use."""

    def __init__(self, broker) -> None:
        self.broker = broker
        self._overrides: dict[str, dict[str, str]] = {}

    def _broker_config(self):
        effective_config = getattr(self.broker, "effective_config", None)
        return effective_config() if effective_config is not None else self.broker.config

    def load(self, configs: dict[str, dict[str, str]]) -> None:
        self._overrides = dict(configs)

    def overrides(self, group_id: str) -> dict[str, str]:
        """The group's own values (what DescribeConfigs reports as GROUP_CONFIG)."""
        return dict(self._overrides.get(group_id, {}))

    def get(self, group_id: str) -> dict:
        """Every group config's effective value for ``group_id``: its override, else the
        broker's default (``effective``)."""
        return effective(self._overrides.get(group_id, {}), self._broker_config())

    def validate(self, group_id: str, new: dict[str, str]) -> None:
        if not group_id:
            raise GroupConfigError("Default group resources are not allowed.")
        validate(new, self._broker_config())

    def set(self, group_id: str, new: dict[str, str]) -> None:
        """Store ``new`` as the group's whole set of overrides, use it here at once and
        announce it to the other brokers. A store write: off the hot paths."""
        write_config(self.broker.metadata.store, group_id, new)
        self._put(group_id, new)
        self.broker.config_changes.notify("groups/" + sanitize(group_id))

    def read_change(self, sanitized: str):
        """For ``ConfigChangeListener`` (on its worker): read the group named by a
        notification and return the change that puts it in the cache, on the loop."""
        group_id = unquote(sanitized)
        config = read_config(self.broker.metadata.store, group_id)
        return lambda: self._put(group_id, config)

    def _put(self, group_id: str, config: dict[str, str]) -> None:
        if config:
            self._overrides[group_id] = dict(config)
        else:
            self._overrides.pop(group_id, None)
