"""The consumer embedded protocol as the coordinator reads and writes it for classic-protocol
members of a consumer group (Kafka's ``ConsumerProtocol``): JoinGroup metadata is a
``ConsumerProtocolSubscription``, a SyncGroup assignment a ``ConsumerProtocolAssignment``.

Bytes: ``int16 version`` then the message of that version; a version newer than the newest
known is read as the newest (every version extends the previous ones, as Kafka reads them).
"""

from __future__ import annotations

import struct

from odradek.protocol.generated import consumer_protocol_assignment as assignment_schema
from odradek.protocol.generated import consumer_protocol_subscription as subscription_schema
from odradek.protocol.primitives import DecodeError, EncodeBuffer

_VERSION = struct.Struct(">h")


class MalformedConsumerProtocol(ValueError):
    """Bytes that are not a consumer protocol message (Kafka's ``SchemaException``)."""


def _read(schema, data: bytes):
    data = memoryview(bytes(data))
    if len(data) < _VERSION.size:
        raise MalformedConsumerProtocol(f"{schema.NAME} of {len(data)} bytes")
    (version,) = _VERSION.unpack_from(data, 0)
    if version < 0:
        raise MalformedConsumerProtocol(f"{schema.NAME} with negative version {version}")
    try:
        message, _ = schema.READERS[min(version, schema.VALID_VERSIONS[1])](data, _VERSION.size)
    except (DecodeError, struct.error, ValueError, IndexError, UnicodeDecodeError) as e:
        raise MalformedConsumerProtocol(f"undecodable {schema.NAME} v{version}: {e}") from None
    return version, message


def version_of(data: bytes) -> int:
    """The version a member's subscription is written in (its assignment is answered in it,
    capped at the newest assignment version)."""
    return _VERSION.unpack_from(bytes(data), 0)[0] if len(data) >= _VERSION.size else 0


def decode_subscription(data: bytes):
    """``ConsumerProtocolSubscription`` (topics, owned partitions, rack id, ...)."""
    return _read(subscription_schema, data)[1]


def decode_assignment(data: bytes) -> dict[str, frozenset[int]]:
    """Topic name -> partitions; empty bytes (no assignment yet) are an empty assignment."""
    if not data:
        return {}
    message = _read(assignment_schema, data)[1]
    out: dict[str, set[int]] = {}
    for tp in message.assigned_partitions:
        out.setdefault(tp.topic, set()).update(tp.partitions)
    return {t: frozenset(ps) for t, ps in out.items() if ps}


def encode_assignment(partitions: dict[str, frozenset[int]], version: int) -> bytes:
    """A ``ConsumerProtocolAssignment`` of ``partitions`` (topic name -> partitions), sorted."""
    version = max(0, min(version, assignment_schema.VALID_VERSIONS[1]))
    message = assignment_schema.ConsumerProtocolAssignment(
        assigned_partitions=[assignment_schema.TopicPartition(topic=t, partitions=sorted(ps))
                             for t, ps in sorted(partitions.items())])
    out = EncodeBuffer(_VERSION.pack(version))
    assignment_schema.WRITERS[version](message, out)
    return bytes(out)
