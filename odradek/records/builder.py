"""Building v2 record batches: header fields, record encoding, compression and CRC-32C.

A batch is assembled as (layout in ``batch.py``)::

    61-byte header | records, each as in record.py, compressed as one block when the codec
                     is not 0 (the header itself is never compressed)

``base_timestamp`` is the first record's timestamp and ``max_timestamp`` the largest, as the
Java producer writes them; ``last_offset_delta`` is the last record's offset delta. The CRC is
computed last, over attributes..end, so the base offset and leader epoch can still be patched.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Iterable

from odradek.records import compression as codecs
from odradek.records.batch import (
    BATCH_HEADER_SIZE,
    CONTROL_BIT,
    LOG_OVERHEAD,
    NO_PARTITION_LEADER_EPOCH,
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    NO_SEQUENCE,
    NO_TIMESTAMP,
    TRANSACTIONAL_BIT,
    BatchHeader,
    update_crc,
    write_header,
)
from odradek.records.record import Record, encode_record

CREATE_TIME = 0
LOG_APPEND_TIME = 1

_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1


@dataclass(frozen=True, slots=True)
class BatchSpec:
    """The header fields of a batch that its records do not determine."""

    base_offset: int = 0
    compression: int = codecs.NONE
    compression_level: int | None = None
    timestamp_type: int = CREATE_TIME
    producer_id: int = NO_PRODUCER_ID
    producer_epoch: int = NO_PRODUCER_EPOCH
    base_sequence: int = NO_SEQUENCE
    transactional: bool = False
    control: bool = False
    partition_leader_epoch: int = NO_PARTITION_LEADER_EPOCH
    # Kafka's names for the two bits (``isTransactional``/``isControlBatch``): either spelling
    # sets the bit, and both read the same after construction.
    is_transactional: bool = False
    is_control: bool = False

    def __post_init__(self) -> None:
        transactional = self.transactional or self.is_transactional
        control = self.control or self.is_control
        for name, value in (("transactional", transactional), ("is_transactional", transactional),
                            ("control", control), ("is_control", control)):
            object.__setattr__(self, name, value)

    @property
    def attributes(self) -> int:
        """The attributes field: codec, timestamp type, transactional and control bits."""
        if self.compression not in codecs.CODEC_NAMES:
            raise ValueError(f"unknown compression codec {self.compression}")
        if self.timestamp_type not in (CREATE_TIME, LOG_APPEND_TIME):
            raise ValueError(f"unknown timestamp type {self.timestamp_type}")
        return (
            self.compression
            | self.timestamp_type << 3
            | (TRANSACTIONAL_BIT if self.transactional else 0)
            | (CONTROL_BIT if self.control else 0)
        )


class BatchBuilder:
    """Accumulates records and builds one v2 batch.

    Offsets default to consecutive ones from ``spec.base_offset``; explicit offsets must
    increase (gaps are allowed, as in compacted batches) and stay within an int32 delta.
    """

    def __init__(self, spec: BatchSpec = BatchSpec()) -> None:
        self.spec = spec
        self._attributes = spec.attributes  # a bad codec or timestamp type fails here
        self._records = bytearray()
        self._count = 0
        self._last_offset_delta = -1
        self._base_timestamp = NO_TIMESTAMP
        self._max_timestamp = NO_TIMESTAMP

    def __len__(self) -> int:
        return self._count

    @property
    def next_offset(self) -> int:
        """The offset the next record gets when appended without one."""
        return self.spec.base_offset + self._last_offset_delta + 1

    @property
    def uncompressed_size(self) -> int:
        """Bytes of the batch so far without compression (header included)."""
        return BATCH_HEADER_SIZE + len(self._records)

    def append(
        self,
        timestamp: int,
        key: bytes | None,
        value: bytes | None,
        headers: Iterable[tuple[str, bytes | None]] = (),
        offset: int | None = None,
    ) -> int:
        """Add one record; return its offset. Raises ValueError for a bad offset or field."""
        delta = self._last_offset_delta + 1 if offset is None else offset - self.spec.base_offset
        if delta <= self._last_offset_delta:
            raise ValueError(f"offset {offset} not above the previous record's")
        if not _INT64_MIN <= timestamp <= _INT64_MAX:
            raise ValueError(f"timestamp {timestamp} does not fit an int64")
        first = self._count == 0
        base_timestamp = timestamp if first else self._base_timestamp
        if not _INT64_MIN <= timestamp - base_timestamp <= _INT64_MAX:
            raise ValueError(f"timestamp {timestamp} too far from the batch's {base_timestamp}")
        self._records += encode_record(
            delta, timestamp - base_timestamp, key, value, tuple(headers)
        )
        self._base_timestamp = base_timestamp
        self._max_timestamp = timestamp if first else max(self._max_timestamp, timestamp)
        self._count += 1
        self._last_offset_delta = delta
        return self.spec.base_offset + delta

    def build(self, last_offset_delta: int | None = None) -> bytes:
        """The finished batch. ``last_offset_delta`` overrides the last record's delta (a
        compacted batch keeps its original last offset); it cannot be below it."""
        if last_offset_delta is None:
            last_offset_delta = max(self._last_offset_delta, 0)
        elif last_offset_delta < self._last_offset_delta:
            raise ValueError("last offset delta below the last record's")
        spec = self.spec
        body = codecs.compress(spec.compression, self._records, spec.compression_level)
        out = bytearray(BATCH_HEADER_SIZE)
        out += body
        header = BatchHeader(
            base_offset=spec.base_offset,
            batch_length=len(out) - LOG_OVERHEAD,
            partition_leader_epoch=spec.partition_leader_epoch,
            magic=2,
            crc=0,
            attributes=self._attributes,
            last_offset_delta=last_offset_delta,
            base_timestamp=self._base_timestamp,
            max_timestamp=self._max_timestamp,
            producer_id=spec.producer_id,
            producer_epoch=spec.producer_epoch,
            base_sequence=spec.base_sequence,
            records_count=self._count,
        )
        try:
            write_header(out, 0, header)
        except struct.error as exc:
            raise ValueError(f"batch header field out of range: {exc}") from None
        update_crc(out, 0, len(out))
        return bytes(out)


def build_batch(records: Iterable[Record], spec: BatchSpec = BatchSpec()) -> bytes:
    """One batch holding ``records`` (their offsets and timestamps kept as given)."""
    builder = BatchBuilder(spec)
    for record in records:
        builder.append(record.timestamp, record.key, record.value, record.headers, record.offset)
    return builder.build()
