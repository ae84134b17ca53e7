"""Control records: the transaction markers a control batch carries (Kafka's documentation,
'Control Batches').

A control batch has the control bit (and, for transaction markers, the transactional bit) set
in its attributes and holds one record whose key and value are::

    key    version int16 (0) | type int16 (0 ABORT, 1 COMMIT; KRaft uses 2 and up)
    value  for ABORT/COMMIT ("EndTxnMarker"): version int16 (0) | coordinator_epoch int32

Consumers read these to drop aborted transactional records; they never reach applications.
Readers accept longer keys and values than these (later versions may append fields).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from odradek.records.batch import NO_PARTITION_LEADER_EPOCH
from odradek.records.builder import BatchBuilder, BatchSpec
from odradek.records.errors import CorruptRecordError
from odradek.records.record import Record

ABORT = 0
COMMIT = 1
CONTROL_KEY_VERSION = 0
END_TXN_MARKER_VERSION = 0

_KEY = struct.Struct(">hh")
_MARKER_VALUE = struct.Struct(">hi")


@dataclass(frozen=True, slots=True)
class ControlKey:
    version: int
    type: int


@dataclass(frozen=True, slots=True)
class EndTransactionMarker:
    """A decoded commit or abort marker."""

    type: int
    coordinator_epoch: int
    version: int = END_TXN_MARKER_VERSION

    @property
    def committed(self) -> bool:
        return self.type == COMMIT


def encode_control_key(control_type: int, version: int = CONTROL_KEY_VERSION) -> bytes:
    return _KEY.pack(version, control_type)


def decode_control_key(key: bytes | None) -> ControlKey:
    """Raises CorruptRecordError for a null key or one shorter than 4 bytes."""
    if key is None or len(key) < _KEY.size:
        raise CorruptRecordError("control record key missing or shorter than 4 bytes")
    return ControlKey(*_KEY.unpack_from(key))


def encode_end_txn_marker_value(
    coordinator_epoch: int, version: int = END_TXN_MARKER_VERSION
) -> bytes:
    return _MARKER_VALUE.pack(version, coordinator_epoch)


def decode_end_txn_marker(record: Record) -> EndTransactionMarker:
    """The marker a control record holds; CorruptRecordError when it holds none."""
    key = decode_control_key(record.key)
    if key.type not in (ABORT, COMMIT):
        raise CorruptRecordError(f"control record type {key.type} is not a transaction marker")
    value = record.value
    if value is None or len(value) < _MARKER_VALUE.size:
        raise CorruptRecordError("transaction marker value missing or shorter than 6 bytes")
    version, epoch = _MARKER_VALUE.unpack_from(value)
    return EndTransactionMarker(type=key.type, coordinator_epoch=epoch, version=version)


def build_end_txn_marker_batch(
    control_type: int,
    coordinator_epoch: int,
    *,
    producer_id: int,
    producer_epoch: int,
    timestamp: int,
    base_offset: int = 0,
    partition_leader_epoch: int = NO_PARTITION_LEADER_EPOCH,
) -> bytes:
    """A control batch with one COMMIT or ABORT marker record, as the coordinator writes."""
    if control_type not in (ABORT, COMMIT):
        raise ValueError(f"control type {control_type} is not ABORT or COMMIT")
    spec = BatchSpec(
        base_offset=base_offset,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        transactional=True,
        control=True,
        partition_leader_epoch=partition_leader_epoch,
    )
    builder = BatchBuilder(spec)
    builder.append(
        timestamp,
        encode_control_key(control_type),
        encode_end_txn_marker_value(coordinator_epoch),
    )
    return builder.build()
