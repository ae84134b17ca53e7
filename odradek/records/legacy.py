"""Legacy message sets, magic v0 and v1 (Kafka before 0.11; Kafka's documentation,
'Old Message Format').

A message set is a plain sequence of entries (no count in front)::

    offset        int64
    message_size  int32    bytes that follow
    crc           uint32   CRC-32 (zlib's, not CRC-32C) of magic..end
    magic         int8     0 or 1
    attributes    int8     bits 0-2 codec (0 none, 1 gzip, 2 snappy, 3 lz4), bit 3 (v1 only)
                           timestamp type: 0 CreateTime, 1 LogAppendTime
    timestamp     int64    v1 only
    key           int32 length (-1 null) + bytes
    value         int32 length (-1 null) + bytes

Compression wraps: a "wrapper" message whose codec is not 0 carries, in its value, the
compressed bytes of an inner message set of uncompressed messages of the same magic. The
wrapper's offset is the offset of its last inner message. In v0 the inner offsets are
absolute; in v1 they are relative (0, 1, ...) and the absolute offset of an inner message is
``wrapper.offset - last_inner.offset + inner.offset``, unless that base would be negative
(a producer's unassigned wrapper), when the inner offsets are kept as they are (as Kafka
does). With LogAppendTime on a v1 wrapper, every inner message takes the wrapper's timestamp.

As in magic v2, the offset and message_size fields share their position with a batch's
base_offset and batch_length, and the magic byte sits at offset 16 in both formats.
"""

from __future__ import annotations

import struct
import zlib
from dataclasses import dataclass
from typing import Iterable, Iterator

from odradek.records import compression as codecs
from odradek.records.batch import LOG_OVERHEAD, NO_TIMESTAMP
from odradek.records.errors import CorruptRecordError
from odradek.records.record import Record

LEGACY_CODEC_MASK = 0x07
LEGACY_TIMESTAMP_TYPE_BIT = 0x08
# crc, magic, attributes, key length, value length (+ timestamp in v1)
MIN_MESSAGE_SIZE = {0: 14, 1: 22}
LEGACY_CODECS = (codecs.NONE, codecs.GZIP, codecs.SNAPPY, codecs.LZ4)

_PREFIX = struct.Struct(">qiIbb")  # offset, message_size, crc, magic, attributes
_CRC_START = 16  # the magic byte: the CRC covers magic..end
_INT64 = struct.Struct(">q")
_INT32 = struct.Struct(">i")
_UINT32 = struct.Struct(">I")


@dataclass(frozen=True, slots=True)
class LegacyMessage:
    """One entry of a message set as stored (a wrapper's value is still compressed)."""

    offset: int
    magic: int
    attributes: int
    timestamp: int  # NO_TIMESTAMP (-1) in v0
    key: bytes | None
    value: bytes | None

    @property
    def compression(self) -> int:
        return self.attributes & LEGACY_CODEC_MASK

    @property
    def timestamp_type(self) -> int:
        """0 CreateTime, 1 LogAppendTime (always 0 in v0)."""
        return (self.attributes & LEGACY_TIMESTAMP_TYPE_BIT) >> 3 if self.magic else 0


def read_message(buf, pos: int = 0, size: int | None = None) -> LegacyMessage:
    """Parse and validate the entry at ``pos``, which must take ``size`` bytes when given.

    Checks: the entry fits, magic is 0 or 1, the size covers the fixed fields, the CRC-32
    matches, the codec is one v0/v1 knew, and the key and value fill the message exactly.
    Raises CorruptRecordError otherwise.
    """
    if len(buf) - pos < _PREFIX.size:
        raise CorruptRecordError("legacy message truncated")
    offset, message_size, crc, magic, attributes = _PREFIX.unpack_from(buf, pos)
    if magic not in MIN_MESSAGE_SIZE:
        raise CorruptRecordError(f"unsupported magic {magic} in a legacy message set")
    if message_size < MIN_MESSAGE_SIZE[magic]:
        raise CorruptRecordError(f"legacy message size {message_size} below its fields")
    end = pos + LOG_OVERHEAD + message_size
    if size is not None and LOG_OVERHEAD + message_size != size:
        raise CorruptRecordError(f"legacy message size does not match {size} bytes given")
    if end > len(buf):
        raise CorruptRecordError("legacy message truncated")
    view = memoryview(buf)
    if zlib.crc32(view[pos + _CRC_START : end]) != crc:
        raise CorruptRecordError("legacy message CRC mismatch")
    if attributes & LEGACY_CODEC_MASK not in LEGACY_CODECS:
        raise CorruptRecordError(f"codec {attributes & LEGACY_CODEC_MASK} invalid in magic {magic}")
    at = pos + _PREFIX.size
    timestamp = NO_TIMESTAMP
    if magic == 1:
        timestamp = _INT64.unpack_from(buf, at)[0]
        at += 8
    key, at = _read_bytes32(view, at, end)
    value, at = _read_bytes32(view, at, end)
    if at != end:
        raise CorruptRecordError("legacy message fields do not fill its size")
    return LegacyMessage(offset, magic, attributes, timestamp, key, value)


def _read_bytes32(view: memoryview, pos: int, end: int) -> tuple[bytes | None, int]:
    if end - pos < 4:
        raise CorruptRecordError("legacy message length field truncated")
    length = _INT32.unpack_from(view, pos)[0]
    pos += 4
    if length == -1:
        return None, pos
    if length < 0 or length > end - pos:
        raise CorruptRecordError(f"legacy message length {length} out of range")
    return bytes(view[pos : pos + length]), pos + length


def iter_messages(buf, pos: int = 0, end: int | None = None) -> Iterator[LegacyMessage]:
    """Every entry of ``buf[pos:end]``, which must hold whole entries only (shallow: wrappers
    are not opened). Raises CorruptRecordError on a bad or partial entry."""
    end = len(buf) if end is None else end
    view = memoryview(buf)[:end]
    while pos < end:
        if end - pos < LOG_OVERHEAD:
            raise CorruptRecordError("legacy message truncated")
        message = read_message(view, pos)
        pos += LOG_OVERHEAD + _INT32.unpack_from(view, pos + 8)[0]
        yield message


class LegacyBatch:
    """One top-level entry of a message set seen as a batch: a plain message (one record)
    or a compressed wrapper (its inner messages). The reader's counterpart of RecordBatch."""

    __slots__ = ("message",)

    def __init__(self, message: LegacyMessage) -> None:
        self.message = message

    @property
    def magic(self) -> int:
        return self.message.magic

    @property
    def compression(self) -> int:
        return self.message.compression

    @property
    def last_offset(self) -> int:
        return self.message.offset

    @property
    def next_offset(self) -> int:
        return self.message.offset + 1

    @property
    def timestamp_type(self) -> int:
        return self.message.timestamp_type

    is_control = False
    is_transactional = False

    def inner_messages(self, max_decompressed: int = codecs.DEFAULT_MAX_DECOMPRESSED):
        """The uncompressed messages (just the message itself when it is not a wrapper)."""
        wrapper = self.message
        if wrapper.compression == codecs.NONE:
            return [wrapper]
        if wrapper.value is None:
            raise CorruptRecordError("compressed legacy message without a value")
        value = wrapper.value
        if wrapper.magic == 0 and wrapper.compression == codecs.LZ4:
            value = codecs.fix_kafka08_lz4_header(value)
        data = codecs.decompress(wrapper.compression, value, max_decompressed)
        inner = list(iter_messages(data))
        if not inner:
            raise CorruptRecordError("compressed legacy message holds no messages")
        for message in inner:
            if message.compression != codecs.NONE:
                raise CorruptRecordError("compressed legacy message inside another")
            if message.magic != wrapper.magic:
                raise CorruptRecordError("inner legacy message magic differs from wrapper's")
        return inner

    def records(self, max_decompressed: int = codecs.DEFAULT_MAX_DECOMPRESSED) -> list[Record]:
        """The records, with absolute offsets and timestamps (see the module docstring)."""
        wrapper = self.message
        inner = self.inner_messages(max_decompressed)
        base = 0
        if wrapper.compression != codecs.NONE and wrapper.magic == 1:
            base = wrapper.offset - inner[-1].offset
            base = base if base >= 0 else 0
        append_time = wrapper.timestamp if wrapper.timestamp_type == 1 else None
        return [
            Record(
                base + m.offset,
                m.timestamp if append_time is None else append_time,
                m.key,
                m.value,
            )
            for m in inner
        ]

    def __iter__(self):
        return iter(self.records())


def encode_message(
    offset: int,
    magic: int,
    attributes: int,
    timestamp: int,
    key: bytes | None,
    value: bytes | None,
) -> bytes:
    """The bytes of one entry, CRC-32 computed. ``timestamp`` is ignored in v0."""
    if magic not in MIN_MESSAGE_SIZE:
        raise ValueError(f"legacy magic must be 0 or 1, not {magic}")
    body = bytearray(struct.pack(">bb", magic, attributes))
    if magic == 1:
        body += _INT64.pack(timestamp)
    for field in (key, value):
        if field is None:
            body += _INT32.pack(-1)
        else:
            body += _INT32.pack(len(field))
            body += field
    crc = zlib.crc32(body)
    return _INT64.pack(offset) + _INT32.pack(4 + len(body)) + _UINT32.pack(crc) + body


def build_message_set(
    records: Iterable[Record],
    magic: int,
    compression: int = codecs.NONE,
    *,
    level: int | None = None,
    timestamp_type: int = 0,
    drop_headers: bool = False,
) -> bytes:
    """A message set of ``records`` (offsets kept); one wrapper when ``compression`` is set.

    Legacy messages have no headers: records with headers raise ValueError unless
    ``drop_headers``. A v1 wrapper gets the largest timestamp and relative inner offsets.
    """
    if compression not in LEGACY_CODECS:
        raise ValueError(f"codec {compression} is not available in magic {magic}")
    records = list(records)
    if not drop_headers and any(r.headers for r in records):
        raise ValueError(f"magic {magic} messages cannot carry record headers")
    type_bit = LEGACY_TIMESTAMP_TYPE_BIT if magic == 1 and timestamp_type == 1 else 0
    if compression == codecs.NONE or not records:
        return b"".join(
            encode_message(r.offset, magic, type_bit, r.timestamp, r.key, r.value)
            for r in records
        )
    first = records[0].offset if magic == 1 else 0
    inner = b"".join(
        encode_message(r.offset - first, magic, 0, r.timestamp, r.key, r.value) for r in records
    )
    value = codecs.compress(compression, inner, level)
    max_timestamp = max(r.timestamp for r in records)
    return encode_message(
        records[-1].offset, magic, compression | type_bit, max_timestamp, None, value
    )
