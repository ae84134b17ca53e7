"""Record batch v2: a zero-copy header view, validation and in-place offset assignment.

Byte layout of one batch (Kafka's documentation, 'Record Batch'; all integers big-endian)::

    offset  size  field
         0     8  base_offset             first offset of the batch
         8     4  batch_length            bytes that follow this field
        12     4  partition_leader_epoch  not covered by the CRC
        16     1  magic                   2
        17     4  crc                     CRC-32C (Castagnoli) of bytes 21..end
        21     2  attributes              bits 0-2 compression codec, 3 timestamp type,
                                          4 transactional, 5 control, 6 delete horizon set
        23     4  last_offset_delta
        27     8  base_timestamp          ("firstTimestamp")
        35     8  max_timestamp
        43     8  producer_id
        51     2  producer_epoch
        53     4  base_sequence
        57     4  records_count
        61     …  records

The broker never re-encodes records: on produce it reads this header, checks the CRC, walks
the records' framing (``log_validator.py``, ``_log_validator.c``), and patches ``base_offset``
and ``partition_leader_epoch`` in place (the CRC does not cover them, so patching keeps the
batch valid), and ``max_timestamp`` with the CRC where the records say otherwise; fetch hands
out the stored bytes.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from typing import NamedTuple

import crc32c as _crc32c

from odradek.records.errors import CorruptRecordError

# base_offset + batch_length: the part of every batch (and legacy message) that precedes
# what batch_length counts.
LOG_OVERHEAD = 12
BATCH_HEADER_SIZE = 61
MAGIC_OFFSET = 16
CRC_OFFSET = 17
ATTRIBUTES_OFFSET = 21
# The smallest batch_length a v2 batch can have: a header with no records.
MIN_BATCH_LENGTH = BATCH_HEADER_SIZE - LOG_OVERHEAD

COMPRESSION_MASK = 0x07
TIMESTAMP_TYPE_BIT = 0x08
TRANSACTIONAL_BIT = 0x10
CONTROL_BIT = 0x20
DELETE_HORIZON_BIT = 0x40

NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
NO_SEQUENCE = -1
NO_PARTITION_LEADER_EPOCH = -1
NO_TIMESTAMP = -1

_HEADER = struct.Struct(">qiibIhiqqqhii")
_LENGTH_PREFIX = struct.Struct(">qi")
_INT64 = struct.Struct(">q")
_INT32 = struct.Struct(">i")
_new_header = tuple.__new__


class BatchHeader(NamedTuple):
    """The 61-byte header of a v2 batch, decoded.

    A named tuple, so that ``read_header`` builds it in C from the unpacked fields: the
    produce path reads one per batch, and a frozen dataclass spent 13 ``object.__setattr__``
    calls doing the same.
    """

    base_offset: int
    batch_length: int
    partition_leader_epoch: int
    magic: int
    crc: int
    attributes: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    records_count: int

    @property
    def size(self) -> int:
        """Bytes of the whole batch, header included."""
        return LOG_OVERHEAD + self.batch_length

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def next_offset(self) -> int:
        return self.base_offset + self.last_offset_delta + 1

    @property
    def compression(self) -> int:
        return self.attributes & COMPRESSION_MASK

    @property
    def timestamp_type(self) -> int:
        """0 CreateTime, 1 LogAppendTime."""
        return (self.attributes & TIMESTAMP_TYPE_BIT) >> 3

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & TRANSACTIONAL_BIT)

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & CONTROL_BIT)

    @property
    def has_producer_id(self) -> bool:
        return self.producer_id != NO_PRODUCER_ID


def read_header(buf, pos: int = 0) -> BatchHeader:
    """Decode the header of the batch starting at ``pos``; no validation beyond length.

    Raises CorruptRecordError when fewer than 61 bytes remain.
    """
    if len(buf) - pos < BATCH_HEADER_SIZE:
        raise CorruptRecordError("record batch header truncated")
    return _new_header(BatchHeader, _HEADER.unpack_from(buf, pos))


def batch_size_at(buf, pos: int) -> int:
    """Total size of the batch (or legacy message) at ``pos`` from its length field.

    Raises CorruptRecordError when the 12-byte prefix is cut or the length is impossible.
    """
    if len(buf) - pos < LOG_OVERHEAD:
        raise CorruptRecordError("batch length prefix truncated")
    length = _LENGTH_PREFIX.unpack_from(buf, pos)[1]
    if length < 0:
        raise CorruptRecordError(f"negative batch length {length}")
    return LOG_OVERHEAD + length


def validate(buf, pos: int = 0, size: int | None = None) -> BatchHeader:
    """Check the v2 batch at ``pos`` without decoding its records; return its header.

    Checks: the batch fits in ``buf`` (exactly ``size`` bytes when given), magic is 2, the
    length is at least a bare header, the CRC-32C over attributes..end matches, and the
    offset delta and record count are not negative. Raises CorruptRecordError otherwise.
    """
    header = read_header(buf, pos)
    total = LOG_OVERHEAD + header.batch_length
    if header.magic != 2:
        raise CorruptRecordError(f"unsupported magic {header.magic}")
    if header.batch_length < MIN_BATCH_LENGTH:
        raise CorruptRecordError(f"batch length {header.batch_length} below header size")
    if size is not None and total != size:
        raise CorruptRecordError(f"batch length {total} does not match {size} bytes given")
    if pos + total > len(buf):
        raise CorruptRecordError("record batch truncated")
    if header.last_offset_delta < 0 or header.records_count < 0:
        raise CorruptRecordError("negative offset delta or record count")
    view = memoryview(buf)[pos + ATTRIBUTES_OFFSET : pos + total]
    if _crc32c.crc32c(view) != header.crc:
        raise CorruptRecordError("record batch CRC mismatch")
    return header


def compute_crc(buf, pos: int = 0, size: int | None = None) -> int:
    """CRC-32C of the batch at ``pos`` over attributes..end (what the crc field holds)."""
    if size is None:
        size = batch_size_at(buf, pos)
    return _crc32c.crc32c(memoryview(buf)[pos + ATTRIBUTES_OFFSET : pos + size])


def iter_batch_positions(buf, pos: int = 0, end: int | None = None) -> Iterator[tuple[int, int]]:
    """Yield ``(position, size)`` of each complete batch in ``buf[pos:end]``.

    Stops at the first incomplete batch (a partial batch at the end of a fetch response is
    normal, as Kafka's fetch may cut the last one). Sizes are not validated beyond sign.
    """
    end = len(buf) if end is None else end
    while end - pos >= LOG_OVERHEAD:
        size = batch_size_at(buf, pos)
        if pos + size > end:
            return
        yield pos, size
        pos += size


def set_base_offset(buf, pos: int, base_offset: int) -> None:
    """Patch the base offset of the batch at ``pos`` in a writable buffer (CRC unaffected)."""
    _INT64.pack_into(buf, pos, base_offset)


def set_partition_leader_epoch(buf, pos: int, epoch: int) -> None:
    """Patch the partition leader epoch of the batch at ``pos`` (CRC unaffected)."""
    _INT32.pack_into(buf, pos + 12, epoch)


_UINT32 = struct.Struct(">I")


def write_header(buf, pos: int, header: BatchHeader) -> None:
    """Pack ``header`` into the 61 bytes at ``pos`` of a writable buffer, CRC field as given."""
    _HEADER.pack_into(
        buf,
        pos,
        header.base_offset,
        header.batch_length,
        header.partition_leader_epoch,
        header.magic,
        header.crc,
        header.attributes,
        header.last_offset_delta,
        header.base_timestamp,
        header.max_timestamp,
        header.producer_id,
        header.producer_epoch,
        header.base_sequence,
        header.records_count,
    )


def update_crc(buf, pos: int = 0, size: int | None = None) -> int:
    """Compute the CRC-32C of the batch at ``pos`` and store it in its crc field; return it."""
    crc = compute_crc(buf, pos, size)
    _UINT32.pack_into(buf, pos + CRC_OFFSET, crc)
    return crc


_ATTRIBUTES = struct.Struct(">h")


def set_log_append_time(buf, pos: int, size: int, timestamp: int) -> None:
    """Mark the batch at ``pos`` as LogAppendTime with ``max_timestamp = timestamp``.

    The attributes and max timestamp are covered by the CRC, so it is recomputed: a per-batch
    cost, never per record (consumers take every record's timestamp from max_timestamp when
    the LogAppendTime bit is set).
    """
    (attributes,) = _ATTRIBUTES.unpack_from(buf, pos + ATTRIBUTES_OFFSET)
    _ATTRIBUTES.pack_into(buf, pos + ATTRIBUTES_OFFSET, attributes | TIMESTAMP_TYPE_BIT)
    _INT64.pack_into(buf, pos + 35, timestamp)
    struct.pack_into(">I", buf, pos + CRC_OFFSET, compute_crc(buf, pos, size))


def set_max_timestamp(buf, pos: int, size: int, timestamp: int) -> None:
    """Set the max timestamp of the batch at ``pos`` (its records' largest, as Kafka's
    ``setMaxTimestamp`` on append) and recompute its CRC, which covers it."""
    _INT64.pack_into(buf, pos + 35, timestamp)
    _UINT32.pack_into(buf, pos + CRC_OFFSET, compute_crc(buf, pos, size))
