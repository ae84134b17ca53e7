"""The records of a KIP-932 share group in ``__consumer_offsets`` (Kafka's
``GroupCoordinatorRecordHelpers.newShareGroup*Record``), with Kafka's record types (the key
version), so Kafka's tools read them::

    key 10  ShareGroupMemberMetadata            group, member  value: rack, client id/host,
                                                               subscribed topic names
    key 11  ShareGroupMetadata                  group          value: group epoch, metadata hash
    key 12  ShareGroupTargetAssignmentMetadata  group          value: assignment epoch
    key 13  ShareGroupTargetAssignmentMember    group, member  value: topic id -> partitions
    key 14  ShareGroupCurrentMemberAssignment   group, member  value: member epoch, previous
                                                               member epoch, state, partitions
    key 15  ShareGroupStatePartitionMetadata    group          value: initializing, initialized
                                                               (topic id, name, partitions)
                                                               and deleting (topic id, name)

Key 9 (ShareGroupPartitionMetadata, Kafka 4.0 only) is neither written nor read: since 4.1
the subscribed topics' metadata is a hash in ShareGroupMetadata. Each key and value is
``int16 version`` and the struct (``coordinator.versioned_message``); values are version 0.
A null value is a tombstone. The record objects hold odradek's values
(``ShareGroupMember``, ``TopicPartitions``), None for a tombstone.

The generated modules (``protocol/generated/share_group_*``) are imported when a record is
encoded or decoded, so the group logic runs where they are missing (unit tests).
"""

from __future__ import annotations

import importlib
import uuid
from dataclasses import dataclass

from odradek.coordinator import versioned_message
from odradek.coordinator.group.consumer.assignment import TopicPartitions
from odradek.coordinator.group.share.share_group_member import ShareGroupMember

MEMBER_METADATA, METADATA, TARGET_METADATA, TARGET_MEMBER, CURRENT_ASSIGNMENT, STATE_PARTITION_METADATA = range(10, 16)
KEY_VERSIONS = range(10, 16)

_MODULES = {
    MEMBER_METADATA: "share_group_member_metadata",
    METADATA: "share_group_metadata",
    TARGET_METADATA: "share_group_target_assignment_metadata",
    TARGET_MEMBER: "share_group_target_assignment_member",
    CURRENT_ASSIGNMENT: "share_group_current_member_assignment",
    STATE_PARTITION_METADATA: "share_group_state_partition_metadata",
}


def _module(record_type: int, part: str):
    return importlib.import_module(f"odradek.protocol.generated.{_MODULES[record_type]}_{part}")


def _key(record_type: int, **fields) -> bytes:
    m = _module(record_type, "key")
    return versioned_message.encode(m, record_type, m.MESSAGE(**fields))


def _value(record_type: int, **fields) -> bytes:
    m = _module(record_type, "value")
    names = set(m.MESSAGE.__dataclass_fields__)
    return versioned_message.encode(m, m.VALID_VERSIONS[0], m.MESSAGE(**{k: v for k, v in fields.items() if k in names}))


def _struct(module, *names):
    for name in names:
        cls = getattr(module, name, None)
        if cls is not None:
            return cls
    raise AttributeError(f"{module.__name__} has none of {names}")


def _partitions_out(cls, partitions: TopicPartitions) -> list:
    return [cls(topic_id=t, partitions=sorted(ps)) for t, ps in sorted(partitions.items()) if ps]


def _partitions_in(items) -> dict:
    return {i.topic_id: frozenset(i.partitions) for i in items or () if i.partitions}


@dataclass(frozen=True, slots=True)
class ShareGroupEpochRecord:
    group_id: str
    epoch: int | None
    metadata_hash: int = 0

    def key_bytes(self) -> bytes:
        return _key(METADATA, group_id=self.group_id)

    def value_bytes(self) -> bytes | None:
        if self.epoch is None:
            return None
        return _value(METADATA, epoch=self.epoch, metadata_hash=self.metadata_hash)


@dataclass(frozen=True, slots=True)
class ShareMemberSubscriptionRecord:
    group_id: str
    member_id: str
    member: ShareGroupMember | None

    def key_bytes(self) -> bytes:
        return _key(MEMBER_METADATA, group_id=self.group_id, member_id=self.member_id)

    def value_bytes(self) -> bytes | None:
        m = self.member
        if m is None:
            return None
        return _value(MEMBER_METADATA, rack_id=m.rack_id, client_id=m.client_id, client_host=m.client_host,
                      subscribed_topic_names=list(m.subscribed_topic_names))


@dataclass(frozen=True, slots=True)
class ShareTargetAssignmentEpochRecord:
    group_id: str
    epoch: int | None

    def key_bytes(self) -> bytes:
        return _key(TARGET_METADATA, group_id=self.group_id)

    def value_bytes(self) -> bytes | None:
        return None if self.epoch is None else _value(TARGET_METADATA, assignment_epoch=self.epoch)


@dataclass(frozen=True, slots=True)
class ShareTargetAssignmentMemberRecord:
    group_id: str
    member_id: str
    partitions: TopicPartitions | None

    def key_bytes(self) -> bytes:
        return _key(TARGET_MEMBER, group_id=self.group_id, member_id=self.member_id)

    def value_bytes(self) -> bytes | None:
        if self.partitions is None:
            return None
        cls = _struct(_module(TARGET_MEMBER, "value"), "TopicPartition", "TopicPartitions")
        return _value(TARGET_MEMBER, topic_partitions=_partitions_out(cls, self.partitions))


@dataclass(frozen=True, slots=True)
class ShareCurrentAssignmentRecord:
    group_id: str
    member_id: str
    member: ShareGroupMember | None  # its epochs, state and partitions

    def key_bytes(self) -> bytes:
        return _key(CURRENT_ASSIGNMENT, group_id=self.group_id, member_id=self.member_id)

    def value_bytes(self) -> bytes | None:
        m = self.member
        if m is None:
            return None
        cls = _struct(_module(CURRENT_ASSIGNMENT, "value"), "TopicPartitions", "TopicPartition")
        return _value(CURRENT_ASSIGNMENT, member_epoch=m.member_epoch, previous_member_epoch=m.previous_member_epoch,
                      state=m.state, assigned_partitions=_partitions_out(cls, m.assigned_partitions))


@dataclass(frozen=True, slots=True)
class ShareStatePartitionMetadataRecord:
    """``initialized``/``initializing``: topic id -> (name, partitions); ``deleting``: topic id
    -> name. All None: a tombstone."""

    group_id: str
    initialized: dict | None
    initializing: dict | None = None
    deleting: dict | None = None

    def key_bytes(self) -> bytes:
        return _key(STATE_PARTITION_METADATA, group_id=self.group_id)

    def value_bytes(self) -> bytes | None:
        if self.initialized is None:
            return None
        m = _module(STATE_PARTITION_METADATA, "value")
        info, named = _struct(m, "TopicPartitionsInfo"), _struct(m, "TopicInfo")

        def out(topics):
            return [info(topic_id=t, topic_name=n, partitions=sorted(ps)) for t, (n, ps) in sorted(topics.items())]

        return _value(STATE_PARTITION_METADATA, initialized_topics=out(self.initialized),
                      initializing_topics=out(self.initializing or {}),
                      deleting_topics=[named(topic_id=t, topic_name=n) for t, n in sorted((self.deleting or {}).items())])


ShareGroupRecord = (ShareGroupEpochRecord | ShareMemberSubscriptionRecord | ShareTargetAssignmentEpochRecord
                    | ShareTargetAssignmentMemberRecord | ShareCurrentAssignmentRecord
                    | ShareStatePartitionMetadataRecord)


def _topics_in(items) -> dict[uuid.UUID, tuple[str, frozenset[int]]]:
    return {i.topic_id: (i.topic_name, frozenset(i.partitions)) for i in items or ()}


def decode_share_record(version: int, key, value, decode) -> ShareGroupRecord | None:
    """The record of key ``version`` (10-15) with these bytes (``value`` None: a tombstone).
    ``decode(module, version, data)`` decodes one framed message (raising on bad bytes)."""
    k = decode(_module(version, "key"), version, key)

    def val():
        if value is None:
            return None
        return decode(_module(version, "value"), versioned_message.read_version(value, ValueError, "value"), value)

    v = val()
    if version == METADATA:
        return ShareGroupEpochRecord(k.group_id, None if v is None else v.epoch,
                                     0 if v is None else getattr(v, "metadata_hash", 0))
    if version == MEMBER_METADATA:
        member = None if v is None else ShareGroupMember(k.member_id, v.rack_id or None, v.client_id, v.client_host,
                                                         tuple(v.subscribed_topic_names))
        return ShareMemberSubscriptionRecord(k.group_id, k.member_id, member)
    if version == TARGET_METADATA:
        return ShareTargetAssignmentEpochRecord(k.group_id, None if v is None else v.assignment_epoch)
    if version == TARGET_MEMBER:
        return ShareTargetAssignmentMemberRecord(k.group_id, k.member_id,
                                                 None if v is None else _partitions_in(v.topic_partitions))
    if version == CURRENT_ASSIGNMENT:
        member = None if v is None else ShareGroupMember(
            k.member_id, member_epoch=v.member_epoch, previous_member_epoch=v.previous_member_epoch, state=v.state,
            assigned_partitions=_partitions_in(v.assigned_partitions))
        return ShareCurrentAssignmentRecord(k.group_id, k.member_id, member)
    if version == STATE_PARTITION_METADATA:
        if v is None:
            return ShareStatePartitionMetadataRecord(k.group_id, None)
        return ShareStatePartitionMetadataRecord(
            k.group_id, _topics_in(v.initialized_topics), _topics_in(getattr(v, "initializing_topics", None)),
            {i.topic_id: i.topic_name for i in v.deleting_topics or ()})
    return None
