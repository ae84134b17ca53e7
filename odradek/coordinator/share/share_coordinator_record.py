"""The records of ``__share_group_state``: what the share coordinator writes and replays.

Kafka's ShareSnapshot (record type 0) and ShareUpdate (record type 1). As on every coordinator
topic (``coordinator.versioned_message``) a key is ``int16 record type`` then the key struct
(non-flexible), a value ``int16 version`` (0) then the value struct (flexible)::

    key (both types):   group_id string, topic_id uuid, partition int32
    ShareSnapshotValue: snapshot_epoch int32, state_epoch int32, leader_epoch int32,
                        start_offset int64, create_timestamp int64, write_timestamp int64,
                        state_batches compact array, tagged fields
    ShareUpdateValue:   snapshot_epoch int32, leader_epoch int32, start_offset int64
                        (-1: unchanged), state_batches compact array, tagged fields
    state batch:        first_offset int64, last_offset int64, delivery_state int8,
                        delivery_count int16, tagged fields
    both values' tagged fields: tag 0 DeliveryCompleteCount int32 (KIP-1226), written only
                        when not -1 (unknown)
    a null value is a tombstone (Kafka writes it under the ShareSnapshot key)

Worked example, the key of group "g", topic id 0...01, partition 3 (a ShareSnapshot)::

    00 00 | 00 01 67 | 00 .. 00 01 (16 bytes) | 00 00 00 03

The codec is written here by hand (the generated modules for these records are not in
``protocol.generated`` yet); its bytes are Kafka's, so tools that read Kafka's state topic
read ours.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, replace

from uuid import UUID

from odradek.coordinator.share.persister import PersisterStateBatch
from odradek.protocol.primitives import (
    DecodeError,
    EncodeBuffer,
    read_compact_array_length,
    read_string,
    read_unknown_tagged_fields,
    read_uuid,
    write_compact_array_length,
    write_string,
    write_tagged_fields,
    write_unsigned_varint,
    write_uuid,
)

SNAPSHOT_TYPE, UPDATE_TYPE = 0, 1
VALUE_VERSION = 0

_H = struct.Struct(">h")
_I = struct.Struct(">i")
_SNAPSHOT = struct.Struct(">iiiqqq")
_UPDATE = struct.Struct(">iiq")
_BATCH = struct.Struct(">qqbh")
_DELIVERY_COMPLETE_COUNT_TAG = 0


class ShareRecordError(ValueError):
    """A record of ``__share_group_state`` that does not decode."""


@dataclass(frozen=True, slots=True)
class ShareSnapshotValue:
    snapshot_epoch: int
    state_epoch: int
    leader_epoch: int
    start_offset: int
    create_timestamp: int
    write_timestamp: int
    state_batches: tuple[PersisterStateBatch, ...]
    delivery_complete_count: int = -1


@dataclass(frozen=True, slots=True)
class ShareUpdateValue:
    snapshot_epoch: int
    leader_epoch: int
    start_offset: int
    state_batches: tuple[PersisterStateBatch, ...]
    delivery_complete_count: int = -1


@dataclass(frozen=True, slots=True)
class ShareStateRecord:
    """One record: ``record_type`` SNAPSHOT_TYPE or UPDATE_TYPE; ``value`` None: a tombstone."""

    record_type: int
    group_id: str
    topic_id: UUID
    partition: int
    value: ShareSnapshotValue | ShareUpdateValue | None

    @property
    def key(self) -> tuple[str, UUID, int]:
        return self.group_id, self.topic_id, self.partition

    def key_bytes(self) -> bytes:
        out = EncodeBuffer()
        out += _H.pack(self.record_type)
        write_string(out, self.group_id)
        write_uuid(out, self.topic_id)
        out += _I.pack(self.partition)
        return bytes(out)

    def value_bytes(self) -> bytes | None:
        v = self.value
        if v is None:
            return None
        out = EncodeBuffer()
        out += _H.pack(VALUE_VERSION)
        if isinstance(v, ShareSnapshotValue):
            out += _SNAPSHOT.pack(v.snapshot_epoch, v.state_epoch, v.leader_epoch, v.start_offset,
                                  v.create_timestamp, v.write_timestamp)
        else:
            out += _UPDATE.pack(v.snapshot_epoch, v.leader_epoch, v.start_offset)
        write_compact_array_length(out, v.state_batches)
        for b in v.state_batches:
            out += _BATCH.pack(b.first_offset, b.last_offset, b.delivery_state, b.delivery_count)
            write_unsigned_varint(out, 0)
        if v.delivery_complete_count == -1:
            write_unsigned_varint(out, 0)
        else:
            write_tagged_fields(out, [(_DELIVERY_COMPLETE_COUNT_TAG, _I.pack(v.delivery_complete_count))])
        return bytes(out)


def decode_record(key, value) -> ShareStateRecord | None:
    """The record with these key and value bytes (``value`` None: a tombstone); None for a
    record type this coordinator does not know. Raises ShareRecordError for malformed bytes."""
    try:
        return _decode(memoryview(key), None if value is None else memoryview(value))
    except (DecodeError, struct.error, ValueError, IndexError) as e:
        if isinstance(e, ShareRecordError):
            raise
        raise ShareRecordError(f"bad share state record: {e}") from None


def _decode(key: memoryview, value: memoryview | None) -> ShareStateRecord | None:
    (record_type,) = _H.unpack_from(key, 0)
    if record_type not in (SNAPSHOT_TYPE, UPDATE_TYPE):
        return None
    group_id, p = read_string(key, 2)
    topic_id, p = read_uuid(key, p)
    (partition,) = _I.unpack_from(key, p)
    if p + 4 != len(key):
        raise ShareRecordError("trailing bytes after the key")
    if value is None:
        return ShareStateRecord(record_type, group_id, topic_id, partition, None)
    (version,) = _H.unpack_from(value, 0)
    if version != VALUE_VERSION:
        raise ShareRecordError(f"value version {version} is unknown")
    if record_type == SNAPSHOT_TYPE:
        fields = _SNAPSHOT.unpack_from(value, 2)
        batches, p = _read_batches(value, 2 + _SNAPSHOT.size)
        decoded = ShareSnapshotValue(*fields, batches)
    else:
        fields = _UPDATE.unpack_from(value, 2)
        batches, p = _read_batches(value, 2 + _UPDATE.size)
        decoded = ShareUpdateValue(*fields, batches)
    tagged, p = read_unknown_tagged_fields(value, p)
    for tag, payload in tagged or ():
        if tag == _DELIVERY_COMPLETE_COUNT_TAG:
            (count,) = _I.unpack(payload)
            decoded = replace(decoded, delivery_complete_count=count)
    if p != len(value):
        raise ShareRecordError("trailing bytes after the value")
    return ShareStateRecord(record_type, group_id, topic_id, partition, decoded)


def _read_batches(buf: memoryview, p: int) -> tuple[tuple[PersisterStateBatch, ...], int]:
    n, p = read_compact_array_length(buf, p)
    batches = []
    for _ in range(max(n, 0)):
        first, last, state, count = _BATCH.unpack_from(buf, p)
        _, p = read_unknown_tagged_fields(buf, p + _BATCH.size)
        batches.append(PersisterStateBatch(first, last, state, count))
    return tuple(batches), p
