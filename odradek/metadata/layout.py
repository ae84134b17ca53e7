"""Kafka's znode layout (Kafka 2.x, ZooKeeper mode) and the typed records kept in it.

Paths, each with the JSON it holds (compact JSON, UTF-8; ``ms`` are decimal strings of epoch
milliseconds; ``E`` marks an ephemeral znode, ``S`` a sequential one)::

    /cluster/id                         {"version":"1","id":"<22-char base64 uuid>"}
    /controller                    E    {"version":1,"brokerid":1000,"timestamp":"ms"}
    /controller_epoch                   1            (a decimal number, not JSON object)
    /brokers/ids/<id>              E    {"features":{},"listener_security_protocol_map":
                                         {"PLAINTEXT":"PLAINTEXT"},"endpoints":
                                         ["PLAINTEXT://host:9092"],"jmx_port":-1,"port":9092,
                                         "host":"host","version":5,"timestamp":"ms","rack":null}
    /brokers/topics/<topic>             {"version":3,"partitions":{"0":[1000,1001]},
                                         "topic_id":"<22-char base64 uuid>",
                                         "adding_replicas":{},"removing_replicas":{}}
    /brokers/topics/<topic>/partitions/<p>/state
                                        {"controller_epoch":1,"leader":1000,"version":1,
                                         "leader_epoch":0,"isr":[1000,1001]}
    /brokers/seqid                      (its version hands out broker ids; unused here)
    /config/topics/<topic>              {"version":1,"config":{"retention.ms":"1000"}}
    /config/brokers/<id>|<default>      {"version":1,"config":{...}}
    /config/changes/config_change_<n>  S {"version":2,"entity_path":"topics/<topic>"}
    /admin/delete_topics/<topic>        (empty: the topic is being deleted)
    /isr_change_notification/isr_change_<n>  S
                                        {"version":1,"partitions":[{"topic":"t","partition":0}]}
    /log_dir_event_notification/log_dir_event_<n>  S
                                        {"version":1,"broker":1000,"event":1}
    /latest_producer_id_block           {"version":1,"broker":1000,"block_start":"0",
                                         "block_end":"999"}

Kafka's uuids (topic ids, the cluster id) are written as URL-safe base64 of their 16 bytes
without padding: 22 characters. The zero uuid stands for "no id", as in Kafka's protocol.
Decoders accept what older Kafka versions wrote (broker registrations v1-v5, topics v1-v3)
and raise `MalformedMetadataError` for anything else.
"""

from __future__ import annotations

import base64
import json
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from odradek.metadata.errors import MalformedMetadataError

CLUSTER_ID = "/cluster/id"
CONTROLLER = "/controller"
CONTROLLER_EPOCH = "/controller_epoch"
BROKER_IDS = "/brokers/ids"
BROKER_TOPICS = "/brokers/topics"
BROKER_SEQID = "/brokers/seqid"
CONFIG_CHANGES = "/config/changes"
CONFIG_TOPICS = "/config/topics"
CONFIG_BROKERS = "/config/brokers"
DELETE_TOPICS = "/admin/delete_topics"
ISR_CHANGE_NOTIFICATION = "/isr_change_notification"
LATEST_PRODUCER_ID_BLOCK = "/latest_producer_id_block"
CONFIG_CHANGE_PREFIX = CONFIG_CHANGES + "/config_change_"
ISR_CHANGE_PREFIX = ISR_CHANGE_NOTIFICATION + "/isr_change_"
LOG_DIR_EVENT_NOTIFICATION = "/log_dir_event_notification"
LOG_DIR_EVENT_PREFIX = LOG_DIR_EVENT_NOTIFICATION + "/log_dir_event_"
LOG_DIR_FAILURE_EVENT = 1  # Kafka's LogDirEventNotificationHandler.LogDirFailureEvent
DEFAULT_BROKER_ENTITY = "<default>"

PERSISTENT_PATHS = (
    "/consumers",
    BROKER_IDS,
    BROKER_TOPICS,
    BROKER_SEQID,
    CONFIG_CHANGES,
    CONFIG_TOPICS,
    "/config/clients",
    "/config/users",
    CONFIG_BROKERS,
    "/config/ips",
    DELETE_TOPICS,
    ISR_CHANGE_NOTIFICATION,
    LOG_DIR_EVENT_NOTIFICATION,
)
"""The znodes every broker makes sure exist at startup, as Kafka's ZkData does."""

NO_LEADER = -1
ZERO_UUID = uuid.UUID(int=0)
SECURITY_PROTOCOLS = frozenset({"PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"})


def broker_path(broker_id: int) -> str:
    return f"{BROKER_IDS}/{broker_id}"


def topic_path(topic: str) -> str:
    return f"{BROKER_TOPICS}/{topic}"


def partitions_path(topic: str) -> str:
    return f"{BROKER_TOPICS}/{topic}/partitions"


def partition_path(topic: str, partition: int) -> str:
    return f"{BROKER_TOPICS}/{topic}/partitions/{partition}"


def partition_state_path(topic: str, partition: int) -> str:
    return f"{BROKER_TOPICS}/{topic}/partitions/{partition}/state"


def topic_config_path(topic: str) -> str:
    return f"{CONFIG_TOPICS}/{topic}"


def broker_config_entity(broker_id: int | None) -> str:
    """``"1000"`` for a broker, ``"<default>"`` (None) for the cluster-wide default."""
    return DEFAULT_BROKER_ENTITY if broker_id is None else str(int(broker_id))


def broker_config_path(broker_id: int | None) -> str:
    return f"{CONFIG_BROKERS}/{broker_config_entity(broker_id)}"


def delete_topic_path(topic: str) -> str:
    return f"{DELETE_TOPICS}/{topic}"


# -- JSON and uuid helpers --------------------------------------------------------------------


def to_json(doc: dict) -> bytes:
    return json.dumps(doc, separators=(",", ":")).encode()


def from_json(data: bytes, what: str) -> dict:
    """Parse a znode's JSON object; MalformedMetadataError if it is not one."""
    try:
        doc = json.loads(data)
    except (ValueError, UnicodeDecodeError) as exc:
        raise MalformedMetadataError(f"{what} is not JSON: {data[:80]!r}") from exc
    if not isinstance(doc, dict):
        raise MalformedMetadataError(f"{what} is not a JSON object: {data[:80]!r}")
    return doc


def _field(doc: dict, key: str, kind: type | tuple[type, ...], what: str) -> Any:
    value = doc.get(key)
    if not isinstance(value, kind) or isinstance(value, bool) and kind is not bool:
        raise MalformedMetadataError(f"{what}: field {key!r} is missing or not {kind}")
    return value


def uuid_to_kafka(value: uuid.UUID) -> str:
    """Kafka's text form of a uuid: URL-safe base64 of the 16 bytes, no padding (22 chars)."""
    return base64.urlsafe_b64encode(value.bytes).rstrip(b"=").decode()


def uuid_from_kafka(text: str) -> uuid.UUID:
    """Inverse of `uuid_to_kafka`; MalformedMetadataError for anything but 22 base64 chars."""
    try:
        if not isinstance(text, str) or len(text) != 22:
            raise ValueError("length")
        raw = base64.urlsafe_b64decode(text + "==")
        if uuid_to_kafka(uuid.UUID(bytes=raw)) != text:
            raise ValueError("not canonical")
        return uuid.UUID(bytes=raw)
    except ValueError as exc:
        raise MalformedMetadataError(f"not a Kafka uuid: {text!r}") from exc


def new_kafka_uuid() -> uuid.UUID:
    """A random uuid usable as a Kafka id: as Kafka's Uuid.randomUuid, never the zero uuid,
    never the reserved metadata-topic id (0, 1), never one whose text starts with ``-``
    (it would read as a command-line option)."""
    while True:
        value = uuid.uuid4()
        if value.int > 1 and not uuid_to_kafka(value).startswith("-"):
            return value


# -- brokers ----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Endpoint:
    """A listener of a broker: ``PLAINTEXT://host:9092`` over ``security_protocol``."""

    listener: str
    host: str
    port: int
    security_protocol: str = "PLAINTEXT"

    def uri(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{self.listener}://{host}:{self.port}"

    @classmethod
    def parse(cls, uri: str, protocol_map: dict[str, str] | None = None) -> Endpoint:
        """Parse ``LISTENER://host:port``; the protocol comes from ``protocol_map`` or, as in
        registrations before listener names, is the listener name itself."""
        listener, sep, rest = uri.partition("://") if isinstance(uri, str) else ("", "", "")
        host, colon, port = rest.rpartition(":")
        if not sep or not listener or not colon or not port.lstrip("-").isdigit():
            raise MalformedMetadataError(f"not an endpoint: {uri!r}")
        if host.startswith("[") and host.endswith("]"):
            host = host[1:-1]
        protocol = (protocol_map or {}).get(listener, listener)
        if protocol not in SECURITY_PROTOCOLS:
            raise MalformedMetadataError(f"unknown security protocol {protocol!r} in {uri!r}")
        return cls(listener, host, int(port), protocol)


@dataclass(frozen=True, slots=True)
class BrokerInfo:
    """A live broker's registration at ``/brokers/ids/<broker_id>``."""

    broker_id: int
    endpoints: tuple[Endpoint, ...]
    rack: str | None = None

    def endpoint(self, listener: str) -> Endpoint | None:
        return next((e for e in self.endpoints if e.listener == listener), None)

    def to_json(self, timestamp_ms: int) -> bytes:
        plain = next((e for e in self.endpoints if e.security_protocol == "PLAINTEXT"), None)
        return to_json(
            {
                "features": {},
                "listener_security_protocol_map": {
                    e.listener: e.security_protocol for e in self.endpoints
                },
                "endpoints": [e.uri() for e in self.endpoints],
                "jmx_port": -1,
                "port": plain.port if plain else -1,
                "host": plain.host if plain else None,
                "version": 5,
                "timestamp": str(int(timestamp_ms)),
                "rack": self.rack,
            }
        )

    @classmethod
    def from_json(cls, broker_id: int, data: bytes) -> BrokerInfo:
        what = f"registration of broker {broker_id}"
        doc = from_json(data, what)
        protocol_map = doc.get("listener_security_protocol_map") or {}
        if not isinstance(protocol_map, dict):
            raise MalformedMetadataError(f"{what}: bad listener_security_protocol_map")
        if "endpoints" in doc:
            uris = _field(doc, "endpoints", list, what)
            endpoints = tuple(Endpoint.parse(u, protocol_map) for u in uris)
        else:  # version 1: host and port only
            host, port = _field(doc, "host", str, what), _field(doc, "port", int, what)
            endpoints = (Endpoint("PLAINTEXT", host, port, "PLAINTEXT"),)
        rack = doc.get("rack")
        if rack is not None and not isinstance(rack, str):
            raise MalformedMetadataError(f"{what}: rack is not a string")
        return cls(broker_id, endpoints, rack)


# -- topics -----------------------------------------------------------------------------------


def _frozen_replicas(mapping: dict) -> MappingProxyType:
    return MappingProxyType({int(p): tuple(int(b) for b in r) for p, r in sorted(mapping.items())})


@dataclass(frozen=True, eq=True)
class TopicAssignment:
    """A topic's id and replica assignment, at ``/brokers/topics/<name>``.

    ``partitions`` maps partition number to its replicas, the preferred leader first. The
    mappings are read-only views, so images holding them can be shared between threads.
    """

    name: str
    topic_id: uuid.UUID
    partitions: Mapping[int, tuple[int, ...]] = field(default_factory=dict)
    adding_replicas: Mapping[int, tuple[int, ...]] = field(default_factory=dict)
    removing_replicas: Mapping[int, tuple[int, ...]] = field(default_factory=dict)
    zk_version: int = field(default=-1, compare=False)

    def __post_init__(self) -> None:
        for name in ("partitions", "adding_replicas", "removing_replicas"):
            object.__setattr__(self, name, _frozen_replicas(dict(getattr(self, name))))

    __hash__ = None  # type: ignore[assignment]  # mappings inside: not hashable

    @property
    def replication_factor(self) -> int:
        return len(self.partitions[0]) if 0 in self.partitions else 0

    def to_json(self) -> bytes:
        def plain(mapping: Mapping[int, tuple[int, ...]]) -> dict:
            return {str(p): list(r) for p, r in mapping.items()}

        doc = {"version": 3, "partitions": plain(self.partitions)}
        if self.topic_id != ZERO_UUID:
            doc["topic_id"] = uuid_to_kafka(self.topic_id)
        doc["adding_replicas"] = plain(self.adding_replicas)
        doc["removing_replicas"] = plain(self.removing_replicas)
        return to_json(doc)

    @classmethod
    def from_json(cls, name: str, data: bytes, zk_version: int = -1) -> TopicAssignment:
        what = f"assignment of topic {name!r}"
        doc = from_json(data, what)
        topic_id = doc.get("topic_id")
        try:
            return cls(
                name,
                ZERO_UUID if topic_id is None else uuid_from_kafka(topic_id),
                _field(doc, "partitions", dict, what),
                doc.get("adding_replicas") or {},
                doc.get("removing_replicas") or {},
                zk_version,
            )
        except (TypeError, ValueError, AttributeError) as exc:
            if isinstance(exc, MalformedMetadataError):
                raise
            raise MalformedMetadataError(f"{what}: {exc}") from exc


@dataclass(frozen=True, slots=True)
class PartitionState:
    """Leader and ISR of a partition, at ``.../partitions/<p>/state``; ``zk_version`` is the
    znode's version, for the compare-and-set with which leaders and the controller update it."""

    leader: int
    leader_epoch: int
    isr: tuple[int, ...]
    controller_epoch: int
    zk_version: int = field(default=-1, compare=False)

    def to_json(self) -> bytes:
        return to_json(
            {
                "controller_epoch": self.controller_epoch,
                "leader": self.leader,
                "version": 1,
                "leader_epoch": self.leader_epoch,
                "isr": list(self.isr),
            }
        )

    @classmethod
    def from_json(
        cls, data: bytes, zk_version: int = -1, what: str = "partition state"
    ) -> PartitionState:
        doc = from_json(data, what)
        isr = _field(doc, "isr", list, what)
        if not all(isinstance(b, int) and not isinstance(b, bool) for b in isr):
            raise MalformedMetadataError(f"{what}: isr is not a list of broker ids")
        return cls(
            _field(doc, "leader", int, what),
            _field(doc, "leader_epoch", int, what),
            tuple(isr),
            _field(doc, "controller_epoch", int, what),
            zk_version,
        )


# -- small documents --------------------------------------------------------------------------


def encode_config(config: dict[str, str]) -> bytes:
    return to_json({"version": 1, "config": dict(config)})


def decode_config(data: bytes, what: str = "config") -> dict[str, str]:
    config = _field(from_json(data, what), "config", dict, what)
    if not all(isinstance(k, str) and isinstance(v, str) for k, v in config.items()):
        raise MalformedMetadataError(f"{what}: entries must be strings")
    return config


def encode_config_change(entity_path: str) -> bytes:
    """A config change notification: ``entity_path`` is ``topics/<t>`` or ``brokers/<id>``."""
    return to_json({"version": 2, "entity_path": entity_path})


def encode_cluster_id(cluster_id: str) -> bytes:
    return to_json({"version": "1", "id": cluster_id})


def decode_cluster_id(data: bytes) -> str:
    return _field(from_json(data, "cluster id"), "id", str, "cluster id")


def encode_controller(broker_id: int, timestamp_ms: int) -> bytes:
    return to_json({"version": 1, "brokerid": broker_id, "timestamp": str(int(timestamp_ms))})


def decode_controller(data: bytes) -> int:
    return _field(from_json(data, "controller"), "brokerid", int, "controller")


def encode_controller_epoch(epoch: int) -> bytes:
    return str(int(epoch)).encode()


def decode_controller_epoch(data: bytes) -> int:
    try:
        return int(data.decode("ascii"))
    except (UnicodeDecodeError, ValueError) as exc:
        raise MalformedMetadataError(f"controller epoch is not a number: {data[:40]!r}") from exc


def encode_isr_change(partitions: list[tuple[str, int]]) -> bytes:
    return to_json(
        {"version": 1, "partitions": [{"topic": t, "partition": p} for t, p in partitions]}
    )


def encode_producer_id_block(broker_id: int, block_start: int, block_end: int) -> bytes:
    return to_json(
        {
            "version": 1,
            "broker": broker_id,
            "block_start": str(block_start),
            "block_end": str(block_end),
        }
    )


def decode_producer_id_block(data: bytes) -> tuple[int, int, int]:
    """``(broker, block_start, block_end)``; the block's ids run from start to end inclusive."""
    what = "producer id block"
    doc = from_json(data, what)
    try:
        return (
            _field(doc, "broker", int, what),
            int(_field(doc, "block_start", (str, int), what)),
            int(_field(doc, "block_end", (str, int), what)),
        )
    except ValueError as exc:
        raise MalformedMetadataError(f"{what}: {exc}") from exc
