"""Partition assignors of the ``consumer`` group protocol, and the bytes members exchange.

Members of a consumer group send their subscription in JoinGroup and the leader sends each
member its assignment in SyncGroup, both as Kafka's "consumer protocol" structures, encoded as
Kafka encodes them: an int16 version followed by the structure of that version::

    ConsumerProtocolSubscription = version int16, topics [string], user_data nullable bytes,
        (v1+) owned_partitions [topic string, partitions [int32]], (v2+) generation_id int32,
        (v3+) rack_id nullable string
    ConsumerProtocolAssignment = version int16, assigned_partitions [topic string,
        partitions [int32]], user_data nullable bytes

A reader that meets a newer version than it knows decodes it as the newest it knows: newer
versions only append fields, which is why Java, kafka-python and odradek members understand
one another whatever version each writes.

The assignors are those of Kafka's Java client, name for name, so that an odradek member can
share a group with Java, kafka-python or librdkafka members whatever member leads:

- ``range`` (``RangeAssignor``): per topic, the partitions in numeric order are cut into
  contiguous ranges, one per subscribed member in member order; the first
  ``partitions % members`` members get one extra. Worked example: members C0, C1; topics t0
  and t1 with 3 partitions each -> C0: t0-0, t0-1, t1-0, t1-1; C1: t0-2, t1-2.
- ``roundrobin`` (``RoundRobinAssignor``): every partition of every subscribed topic (topics
  sorted by name, partitions in order) is dealt to the members in member order, round and
  round, skipping members that do not subscribe to the partition's topic. Same example ->
  C0: t0-0, t0-2, t1-1; C1: t0-1, t1-0, t1-2.

Member order is Java's ``MemberInfo`` order: static members (those with a
``group.instance.id``) first, by instance id, then dynamic members by member id. Topics that
have no metadata (missing, deleted) are left out of the assignment.
"""

from __future__ import annotations

import logging
import struct
from dataclasses import dataclass
from typing import Protocol

from odradek.client.errors import KafkaError
from odradek.client.topic_partition import TopicPartition
from odradek.protocol import codec
from odradek.protocol.primitives import DecodeError, EncodeBuffer

__all__ = [
    "PROTOCOL_TYPE",
    "MemberSubscription",
    "PartitionAssignor",
    "RangeAssignor",
    "RoundRobinAssignor",
    "assign_encoded",
    "assignor_for",
    "decode_assignment",
    "decode_subscription",
    "encode_assignment",
    "encode_subscription",
    "member_subscriptions",
]

_log = logging.getLogger("odradek.client.consumer")

PROTOCOL_TYPE = "consumer"
_VERSION = struct.Struct(">h")


@dataclass(frozen=True, slots=True)
class MemberSubscription:
    """One member's JoinGroup metadata, as the leader sees it."""

    member_id: str
    group_instance_id: str | None
    topics: tuple[str, ...]
    user_data: bytes | None = None
    owned_partitions: tuple[TopicPartition, ...] = ()
    generation_id: int = -1
    rack_id: str | None = None

    def order(self) -> tuple[int, str]:
        """Java's MemberInfo order: static members by instance id, then dynamic by id."""
        if self.group_instance_id is not None:
            return (0, self.group_instance_id)
        return (1, self.member_id)


# --- bytes ------------------------------------------------------------------------------------
def _encode(name: str, message, version: int | None) -> bytes:
    mod = codec.module(name)
    version = mod.VALID_VERSIONS[1] if version is None else version
    out = EncodeBuffer(_VERSION.pack(version))
    mod.WRITERS[version](message, out)
    return bytes(out)


def _decode(name: str, data):
    """``(version, message)``; KafkaError for bytes that are not a message of any version."""
    mod = codec.module(name)
    data = memoryview(bytes(data) if not isinstance(data, (bytes, bytearray, memoryview)) else data)
    if len(data) < _VERSION.size:
        raise KafkaError(f"{name} of {len(data)} bytes is shorter than its version")
    (version,) = _VERSION.unpack_from(data, 0)
    if version < 0:
        raise KafkaError(f"{name} has a negative version {version}")
    try:
        message, _ = mod.READERS[min(version, mod.VALID_VERSIONS[1])](data, _VERSION.size)
    except (DecodeError, struct.error, ValueError, IndexError, UnicodeDecodeError) as e:
        raise KafkaError(f"undecodable {name} v{version}: {e}") from None
    return version, message


def _by_topic(partitions) -> dict[str, list[int]]:
    """Partitions grouped by topic, topics and partitions sorted."""
    out: dict[str, list[int]] = {}
    for topic, partition in sorted(TopicPartition(*tp) for tp in partitions):
        out.setdefault(topic, []).append(partition)
    return out


def encode_subscription(topics, user_data: bytes | None = None, owned_partitions=(), generation_id: int = -1,
                        rack_id: str | None = None, version: int | None = None) -> bytes:
    """A member's JoinGroup metadata (the newest version unless ``version`` is given)."""
    mod = codec.module("ConsumerProtocolSubscription")
    owned = [mod.TopicPartition(t, ps) for t, ps in _by_topic(owned_partitions).items()]
    message = mod.ConsumerProtocolSubscription(topics=sorted(set(topics)), user_data=user_data,
                                               owned_partitions=owned, generation_id=generation_id,
                                               rack_id=rack_id)
    return _encode("ConsumerProtocolSubscription", message, version)


def decode_subscription(member_id: str, group_instance_id: str | None, data) -> MemberSubscription:
    """The subscription in a JoinGroup member's metadata; KafkaError when it is not one."""
    _, m = _decode("ConsumerProtocolSubscription", data)
    owned = tuple(TopicPartition(t.topic, p) for t in m.owned_partitions for p in t.partitions)
    user_data = None if m.user_data is None else bytes(m.user_data)
    return MemberSubscription(member_id, group_instance_id, tuple(m.topics), user_data, owned,
                              m.generation_id, m.rack_id)


def encode_assignment(partitions, user_data: bytes | None = None, version: int | None = None) -> bytes:
    """A member's SyncGroup assignment (the newest version unless ``version`` is given)."""
    mod = codec.module("ConsumerProtocolAssignment")
    assigned = [mod.TopicPartition(t, ps) for t, ps in _by_topic(partitions).items()]
    message = mod.ConsumerProtocolAssignment(assigned_partitions=assigned, user_data=user_data)
    return _encode("ConsumerProtocolAssignment", message, version)


def decode_assignment(data) -> list[TopicPartition]:
    """The partitions of a SyncGroup assignment (empty bytes: none); KafkaError when the
    bytes are not an assignment."""
    if len(data) == 0:
        return []  # what a broker sends a member the leader assigned nothing to
    _, m = _decode("ConsumerProtocolAssignment", data)
    return [TopicPartition(t.topic, p) for t in m.assigned_partitions for p in t.partitions]


# --- assignors -------------------------------------------------------------------------------
class PartitionAssignor(Protocol):
    """What an assignor is: a protocol ``name`` and ``assign``, which the group leader runs.

    ``partitions_per_topic`` maps each subscribed topic that has metadata to its partition
    count; ``subscriptions`` maps member id to ``MemberSubscription``. The answer maps every
    member id to its partitions.
    """

    name: str

    def assign(self, partitions_per_topic: dict[str, int],
               subscriptions: dict[str, MemberSubscription]) -> dict[str, list[TopicPartition]]: ...


def _members_per_topic(subscriptions: dict[str, MemberSubscription]) -> dict[str, list[MemberSubscription]]:
    out: dict[str, list[MemberSubscription]] = {}
    for member in subscriptions.values():
        for topic in dict.fromkeys(member.topics):
            out.setdefault(topic, []).append(member)
    for members in out.values():
        members.sort(key=MemberSubscription.order)
    return out


class RangeAssignor:
    """Kafka's ``range`` assignor (see the module docstring)."""

    name = "range"

    def assign(self, partitions_per_topic: dict[str, int],
               subscriptions: dict[str, MemberSubscription]) -> dict[str, list[TopicPartition]]:
        assignment: dict[str, list[TopicPartition]] = {member_id: [] for member_id in subscriptions}
        for topic, members in sorted(_members_per_topic(subscriptions).items()):
            count = partitions_per_topic.get(topic)
            if not count:
                continue
            per_member, with_extra = divmod(count, len(members))
            for i, member in enumerate(members):
                start = per_member * i + min(i, with_extra)
                length = per_member + (1 if i < with_extra else 0)
                assignment[member.member_id].extend(TopicPartition(topic, p) for p in range(start, start + length))
        return assignment


class RoundRobinAssignor:
    """Kafka's ``roundrobin`` assignor (see the module docstring)."""

    name = "roundrobin"

    def assign(self, partitions_per_topic: dict[str, int],
               subscriptions: dict[str, MemberSubscription]) -> dict[str, list[TopicPartition]]:
        assignment: dict[str, list[TopicPartition]] = {member_id: [] for member_id in subscriptions}
        members = sorted(subscriptions.values(), key=MemberSubscription.order)
        if not members:
            return assignment
        subscribed = [frozenset(m.topics) for m in members]
        topics = sorted({t for m in members for t in m.topics if partitions_per_topic.get(t)})
        turn = 0  # the member whose turn it is
        for topic in topics:
            for partition in range(partitions_per_topic[topic]):
                while topic not in subscribed[turn]:
                    turn = (turn + 1) % len(members)
                assignment[members[turn].member_id].append(TopicPartition(topic, partition))
                turn = (turn + 1) % len(members)
        return assignment


def member_subscriptions(members) -> dict[str, MemberSubscription]:
    """The subscriptions of a JoinGroup answer's members (``member_id``, ``group_instance_id``,
    ``metadata``). A member whose metadata does not decode subscribes to nothing: it gets an
    empty assignment rather than stopping the whole group."""
    out: dict[str, MemberSubscription] = {}
    for m in members:
        try:
            out[m.member_id] = decode_subscription(m.member_id, m.group_instance_id, m.metadata)
        except KafkaError as e:
            _log.warning("member %s sent no usable subscription (%s): it gets nothing", m.member_id, e)
            out[m.member_id] = MemberSubscription(m.member_id, m.group_instance_id, ())
    return out


def assign_encoded(assignor: PartitionAssignor, partitions_per_topic: dict[str, int | None],
                   subscriptions: dict[str, MemberSubscription]) -> dict[str, bytes]:
    """Every member's SyncGroup assignment by ``assignor`` (topics with no partition count
    left out)."""
    counts = {t: n for t, n in partitions_per_topic.items() if n}
    assignment = assignor.assign(counts, subscriptions)
    _log.info("%s assigned %s", assignor.name,
              {m: ", ".join(map(str, sorted(ps))) for m, ps in assignment.items()})
    return {member_id: encode_assignment(assignment.get(member_id, ())) for member_id in subscriptions}


_BUILT_IN = {RangeAssignor.name: RangeAssignor, RoundRobinAssignor.name: RoundRobinAssignor}


def assignor_for(spec) -> PartitionAssignor:
    """An assignor from its protocol name (``"range"``, ``"roundrobin"``), an assignor class,
    or an object with ``name`` and ``assign``."""
    if isinstance(spec, str):
        try:
            return _BUILT_IN[spec]()
        except KeyError:
            raise ValueError(f"unknown partition assignor {spec!r}; built in: {sorted(_BUILT_IN)}") from None
    if isinstance(spec, type):
        spec = spec()
    if not isinstance(getattr(spec, "name", None), str) or not callable(getattr(spec, "assign", None)):
        raise TypeError(f"{spec!r} is not a partition assignor (it needs a name and assign())")
    return spec
