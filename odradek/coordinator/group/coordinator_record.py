"""The records of ``__consumer_offsets``: what the group coordinator writes and replays.

Each record's key and value are ``int16 version`` followed by the struct of that version
(``coordinator.versioned_message``; Kafka's schemas in ``kafka-protocol/records``, generated
into ``protocol.generated``), so tools that read Kafka's offsets topic read ours::

    key version 0 or 1: OffsetCommitKey   group string, topic string, partition int32
    key version 2:      GroupMetadataKey  group string
    value (offset):     OffsetCommitValue v1 when the commit carries its own expire
                        timestamp, else v3 (offset int64, leaderEpoch int32, metadata string,
                        commitTimestamp int64) -- what Kafka writes
    value (group):      GroupMetadataValue v3 (protocol type, generation, protocol, leader,
                        current state timestamp, members with group.instance.id)
    a null value is a tombstone: the offset or the group is gone

Worked example, the key of group "g", topic "t", partition 3 (key version 1)::

    00 01 | 00 01 67 | 00 01 74 | 00 00 00 03

Key versions 3 to 8 are KIP-848 consumer groups' records (``consumer.consumer_group_records``),
10 to 15 KIP-932 share groups' (``share.share_group_records``); others (9, streams groups, ...)
decode to None so a loader can skip them.
"""

from __future__ import annotations

from dataclasses import dataclass

from odradek.coordinator import versioned_message
from odradek.coordinator.group.consumer.consumer_group_records import KEY_VERSIONS, decode_consumer_record
from odradek.coordinator.group.offset_and_metadata import OffsetAndMetadata
from odradek.coordinator.group.share.share_group_records import KEY_VERSIONS as SHARE_KEY_VERSIONS
from odradek.coordinator.group.share.share_group_records import decode_share_record
from odradek.protocol.generated import (
    group_metadata_key,
    group_metadata_value,
    offset_commit_key,
    offset_commit_value,
)
from odradek.protocol.generated.group_metadata_value import GroupMetadataValue

OFFSET_KEY_VERSION = 1
GROUP_KEY_VERSION = 2
OFFSET_VALUE_VERSION = 3
OFFSET_VALUE_VERSION_WITH_EXPIRY = 1
GROUP_VALUE_VERSION = 3


class CoordinatorRecordError(ValueError):
    """A record of the offsets topic that does not decode."""


@dataclass(frozen=True, slots=True)
class OffsetCommitRecord:
    """A committed offset (``offset`` None: a tombstone, the offset was deleted or expired)."""

    group_id: str
    topic: str
    partition: int
    offset: OffsetAndMetadata | None

    def key_bytes(self) -> bytes:
        key = offset_commit_key.OffsetCommitKey(group=self.group_id, topic=self.topic, partition=self.partition)
        return versioned_message.encode(offset_commit_key, OFFSET_KEY_VERSION, key)

    def value_bytes(self) -> bytes | None:
        o = self.offset
        if o is None:
            return None
        value = offset_commit_value.OffsetCommitValue(
            offset=o.offset, leader_epoch=o.leader_epoch, metadata=o.metadata,
            commit_timestamp=o.commit_timestamp_ms,
            expire_timestamp=-1 if o.expire_timestamp_ms is None else o.expire_timestamp_ms,
        )
        version = OFFSET_VALUE_VERSION if o.expire_timestamp_ms is None else OFFSET_VALUE_VERSION_WITH_EXPIRY
        return versioned_message.encode(offset_commit_value, version, value)


@dataclass(frozen=True, slots=True)
class GroupMetadataRecord:
    """A group's membership at a generation (``value`` None: a tombstone, the group is gone)."""

    group_id: str
    value: GroupMetadataValue | None

    def key_bytes(self) -> bytes:
        key = group_metadata_key.GroupMetadataKey(group=self.group_id)
        return versioned_message.encode(group_metadata_key, GROUP_KEY_VERSION, key)

    def value_bytes(self) -> bytes | None:
        if self.value is None:
            return None
        return versioned_message.encode(group_metadata_value, GROUP_VALUE_VERSION, self.value)


CoordinatorRecord = OffsetCommitRecord | GroupMetadataRecord


def decode_record(key, value) -> CoordinatorRecord | None:
    """The record with these key and value bytes (``value`` None for a tombstone); None for
    record types this coordinator does not know. Raises CoordinatorRecordError when the bytes
    are malformed."""
    version = versioned_message.read_version(key, CoordinatorRecordError, "key")
    if version in (0, 1):
        k = _decode(offset_commit_key, version, key)
        return OffsetCommitRecord(k.group, k.topic, k.partition, None if value is None else _offset_value(value))
    if version == GROUP_KEY_VERSION:
        k = _decode(group_metadata_key, version, key)
        return GroupMetadataRecord(k.group, None if value is None else _group_value(value))
    if version < 0:
        raise CoordinatorRecordError(f"negative key version {version}")
    if version in KEY_VERSIONS:
        try:
            return decode_consumer_record(version, key, value, _decode)
        except ValueError as e:  # a value shorter than its version
            raise CoordinatorRecordError(str(e)) from None
    if version in SHARE_KEY_VERSIONS:
        try:
            return decode_share_record(version, key, value, _decode)
        except ValueError as e:
            raise CoordinatorRecordError(str(e)) from None
    return None


def _decode(module, version: int, data):
    return versioned_message.decode(module, version, data, CoordinatorRecordError)


def _value_version(value) -> int:
    return versioned_message.read_version(value, CoordinatorRecordError, "value")


def _offset_value(data) -> OffsetAndMetadata:
    v = _decode(offset_commit_value, _value_version(data), data)
    expire = v.expire_timestamp if v.expire_timestamp >= 0 else None
    return OffsetAndMetadata(v.offset, v.leader_epoch, v.metadata, v.commit_timestamp, expire)


def _group_value(data) -> GroupMetadataValue:
    v = _decode(group_metadata_value, _value_version(data), data)
    for m in v.members:  # decoded bytes are views into ``data``: own them
        m.subscription = bytes(m.subscription)
        m.assignment = bytes(m.assignment)
    return v
