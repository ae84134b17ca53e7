"""Kafka's primitive wire types, as small read and write functions for the generated codec.

Reading: every ``read_*`` takes ``(buf, pos)`` where ``buf`` is a memoryview (or bytes) and
returns ``(value, new_pos)``. Lengths and counts are checked against the bytes that remain
before anything is sliced or allocated, so a hostile frame cannot make a reader allocate more
than the frame's own size, loop, or silently read a short slice; every failure raises
``DecodeError``.

Writing: every ``write_*`` appends to an ``EncodeBuffer`` (a bytearray that may also carry
out-of-band record regions, see below).

The compact (varint-prefixed) readers and writers take the common one-byte length inline
and call the general varint code only for longer ones.

Encodings (big-endian):
- STRING: int16 length, UTF-8 bytes; NULLABLE_STRING: length -1 means null.
- BYTES / RECORDS: int32 length, bytes; -1 means null.
- COMPACT_*: the length + 1 as an unsigned varint; 0 means null.
- ARRAY: int32 count (-1 null); COMPACT_ARRAY: count + 1 as unsigned varint (0 null).
- UUID: 16 bytes.
"""

from __future__ import annotations

import struct
import uuid

from odradek.protocol.varint import VarintError, read_uvarint, uvarint_bytes

ZERO_UUID = uuid.UUID(int=0)

INT8 = struct.Struct(">b")
INT16 = struct.Struct(">h")
INT32 = struct.Struct(">i")
INT64 = struct.Struct(">q")
UINT16 = struct.Struct(">H")
UINT32 = struct.Struct(">I")
FLOAT64 = struct.Struct(">d")
BOOL = struct.Struct(">?")

# Records larger than this are not copied into the response buffer: they are kept as a
# region and written separately (a fetch response carrying megabytes of batches should not
# pay for a memcpy of them).
INLINE_RECORDS_LIMIT = 64 * 1024


class DecodeError(ValueError):
    """The bytes are not a valid encoding of the expected message."""


class EncodeBuffer(bytearray):
    """A bytearray being encoded into, plus record regions kept out of line.

    ``regions`` lists ``(position, region)``: the region's bytes belong at ``position`` of the
    final frame, between ``self[:position]`` and ``self[position:]``. A region is either a
    bytes-like object or any object with a ``size`` attribute (e.g. a file region that the
    server sends with sendfile). ``total_size()`` is the length of the whole frame.

    ``regions`` is an empty tuple (the class's) until ``add_region`` makes the list: most
    buffers never get one, and without an ``__init__`` of ours creating a buffer is one C call.
    """

    regions: list[tuple[int, object]] | tuple = ()

    def add_region(self, region) -> None:
        """Put ``region`` at the current end of the buffer."""
        if not self.regions:
            self.regions = []
        self.regions.append((len(self), region))

    def total_size(self) -> int:
        if not self.regions:
            return len(self)
        return len(self) + sum(region_size(r) for _, r in self.regions)

    def parts(self) -> list[object]:
        """The frame as an ordered list of bytes-like pieces and regions."""
        if not self.regions:
            return [self]
        parts: list[object] = []
        view = memoryview(self)
        start = 0
        for position, region in self.regions:
            if position > start:
                parts.append(view[start:position])
            parts.append(region)
            start = position
        if start < len(self):
            parts.append(view[start:])
        return parts

    def to_bytes(self) -> bytes:
        """Flatten into one bytes object (regions must be bytes-like)."""
        if not self.regions:
            return bytes(self)
        return b"".join(bytes(p) for p in self.parts())


def region_size(region) -> int:
    size = getattr(region, "size", None)
    return len(region) if size is None or callable(size) else size


def _need(buf, pos: int, n: int) -> int:
    end = pos + n
    if n < 0 or end > len(buf):
        raise DecodeError(f"need {n} bytes at {pos}, have {len(buf) - pos}")
    return end


# The UUIDs read, by their 16 bytes: topic ids come again in every Fetch a client or follower
# sends (one per topic: 100 a request for a consumer of 100 topics), and building a
# ``uuid.UUID`` costs ~0.8 us where a dict lookup costs ~30 ns. At most ``UUID_CACHE_MAX``
# entries (~3 MB): a peer sending ever new ids only empties it now and then.
UUID_CACHE_MAX = 16_384
_uuids: dict[bytes, uuid.UUID] = {}


def read_uuid(buf, pos: int) -> tuple[uuid.UUID, int]:
    end = _need(buf, pos, 16)
    raw = bytes(buf[pos:end])
    value = _uuids.get(raw)
    if value is None:
        if len(_uuids) >= UUID_CACHE_MAX:
            _uuids.clear()
        value = _uuids[raw] = uuid.UUID(bytes=raw)
    return value, end


def write_uuid(out: EncodeBuffer, value: uuid.UUID) -> None:
    out += value.bytes


def _decode_text(buf, pos: int, end: int) -> str:
    try:
        return str(buf[pos:end], "utf-8")
    except UnicodeDecodeError as e:
        raise DecodeError(f"invalid UTF-8 in string at {pos}") from e


# --- strings -----------------------------------------------------------------------------


def read_string(buf, pos: int) -> tuple[str, int]:
    (n,) = INT16.unpack_from(buf, pos)
    pos += 2
    if n < 0:
        raise DecodeError("null string where a string is required")
    end = _need(buf, pos, n)
    return _decode_text(buf, pos, end), end


def read_nullable_string(buf, pos: int) -> tuple[str | None, int]:
    (n,) = INT16.unpack_from(buf, pos)
    pos += 2
    if n == -1:
        return None, pos
    end = _need(buf, pos, n)
    return _decode_text(buf, pos, end), end


def read_compact_string(buf, pos: int) -> tuple[str, int]:
    value, pos = read_compact_nullable_string(buf, pos)
    if value is None:
        raise DecodeError("null compact string where a string is required")
    return value, pos


def read_compact_nullable_string(buf, pos: int) -> tuple[str | None, int]:
    n = buf[pos] if pos < len(buf) else 0x80  # (past the end: _uvarint says truncated)
    if n < 0x80:
        pos += 1
    else:
        n, pos = _uvarint(buf, pos)
    if n == 0:
        return None, pos
    end = _need(buf, pos, n - 1)
    return _decode_text(buf, pos, end), end


def write_string(out: EncodeBuffer, value: str) -> None:
    data = value.encode()
    out += INT16.pack(len(data))
    out += data


def write_nullable_string(out: EncodeBuffer, value: str | None) -> None:
    if value is None:
        out += b"\xff\xff"
    else:
        write_string(out, value)


def write_compact_string(out: EncodeBuffer, value: str) -> None:
    data = value.encode()
    n = len(data) + 1
    if n < 0x80:
        out.append(n)
    else:
        out += uvarint_bytes(n)
    out += data


def write_compact_nullable_string(out: EncodeBuffer, value: str | None) -> None:
    if value is None:
        out.append(0)
    else:
        write_compact_string(out, value)


# --- bytes and records -------------------------------------------------------------------


def read_bytes(buf, pos: int) -> tuple[bytes, int]:
    value, pos = read_nullable_bytes(buf, pos)
    if value is None:
        raise DecodeError("null bytes where bytes are required")
    return value, pos


def read_nullable_bytes(buf, pos: int) -> tuple[bytes | None, int]:
    (n,) = INT32.unpack_from(buf, pos)
    pos += 4
    if n == -1:
        return None, pos
    end = _need(buf, pos, n)
    return bytes(buf[pos:end]), end


def read_compact_bytes(buf, pos: int) -> tuple[bytes, int]:
    value, pos = read_compact_nullable_bytes(buf, pos)
    if value is None:
        raise DecodeError("null compact bytes where bytes are required")
    return value, pos


def read_compact_nullable_bytes(buf, pos: int) -> tuple[bytes | None, int]:
    n, pos = _uvarint(buf, pos)
    if n == 0:
        return None, pos
    end = _need(buf, pos, n - 1)
    return bytes(buf[pos:end]), end


def read_records(buf, pos: int) -> tuple[memoryview | None, int]:
    """Records are returned as a memoryview into the frame: never copied."""
    (n,) = INT32.unpack_from(buf, pos)
    pos += 4
    if n == -1:
        return None, pos
    end = _need(buf, pos, n)
    return memoryview(buf)[pos:end], end


def read_compact_records(buf, pos: int) -> tuple[memoryview | None, int]:
    n = buf[pos] if pos < len(buf) else 0x80  # (past the end: _uvarint says truncated)
    if n < 0x80:
        pos += 1
    else:
        n, pos = _uvarint(buf, pos)
    if n == 0:
        return None, pos
    end = pos + n - 1
    if end > len(buf):
        _need(buf, pos, n - 1)
    return memoryview(buf)[pos:end], end


def write_bytes(out: EncodeBuffer, value) -> None:
    out += INT32.pack(len(value))
    out += value


def write_nullable_bytes(out: EncodeBuffer, value) -> None:
    if value is None:
        out += b"\xff\xff\xff\xff"
    else:
        write_bytes(out, value)


def write_compact_bytes(out: EncodeBuffer, value) -> None:
    out += uvarint_bytes(len(value) + 1)
    out += value


def write_compact_nullable_bytes(out: EncodeBuffer, value) -> None:
    if value is None:
        out.append(0)
    else:
        write_compact_bytes(out, value)


def _put_records(out: EncodeBuffer, value) -> None:
    if isinstance(value, (bytes, bytearray, memoryview)) and len(value) < INLINE_RECORDS_LIMIT:
        out += value
    else:
        out.add_region(value)


def write_records(out: EncodeBuffer, value) -> None:
    """Records: bytes-like (small ones copied inline) or a region with a ``size``."""
    if value is None:
        out += b"\xff\xff\xff\xff"
        return
    out += INT32.pack(region_size(value))
    _put_records(out, value)


def write_compact_records(out: EncodeBuffer, value) -> None:
    if value is None:
        out.append(0)
        return
    out += uvarint_bytes(region_size(value) + 1)
    _put_records(out, value)


# --- arrays ------------------------------------------------------------------------------


def read_array_length(buf, pos: int) -> tuple[int, int]:
    """Element count of an ARRAY (-1 for null), bounded by the bytes that remain."""
    (n,) = INT32.unpack_from(buf, pos)
    pos += 4
    if n < -1 or n > len(buf) - pos:
        raise DecodeError(f"impossible array length {n} at {pos - 4}")
    return n, pos


def read_compact_array_length(buf, pos: int) -> tuple[int, int]:
    """Element count of a COMPACT_ARRAY (-1 for null), bounded by the bytes that remain."""
    n = buf[pos] if pos < len(buf) else 0x80  # (past the end: _uvarint says truncated)
    if n < 0x80:
        pos += 1
    else:
        n, pos = _uvarint(buf, pos)
    n -= 1
    if n > len(buf) - pos:
        raise DecodeError(f"impossible compact array length {n} at {pos}")
    return n, pos


def write_array_length(out: EncodeBuffer, value) -> None:
    out += INT32.pack(-1 if value is None else len(value))


def write_compact_array_length(out: EncodeBuffer, value) -> None:
    n = 0 if value is None else len(value) + 1
    if n < 0x80:
        out.append(n)
    else:
        out += uvarint_bytes(n)


def read_int_array(buf, pos: int, n: int, code: str, width: int) -> tuple[list, int]:
    """``n`` fixed-width integers of struct code ``code`` in one unpack."""
    end = _need(buf, pos, n * width)
    return list(struct.unpack_from(f">{n}{code}", buf, pos)), end


def write_int_array(out: EncodeBuffer, values, code: str) -> None:
    out += struct.pack(f">{len(values)}{code}", *values)


# --- tagged fields -----------------------------------------------------------------------


def _uvarint(buf, pos: int) -> tuple[int, int]:
    try:
        return read_uvarint(buf, pos)
    except VarintError as e:
        raise DecodeError(str(e)) from None


read_unsigned_varint = _uvarint


def read_tag_header(buf, pos: int) -> tuple[int, int, int]:
    """``(tag, end_of_field, start_of_field)`` of one tagged field."""
    tag, pos = _uvarint(buf, pos)
    size, pos = _uvarint(buf, pos)
    return tag, _need(buf, pos, size), pos


def write_tagged_field(out: EncodeBuffer, tag: int, payload) -> None:
    out += uvarint_bytes(tag)
    out += uvarint_bytes(len(payload))
    out += payload


def write_unsigned_varint(out: EncodeBuffer, value: int) -> None:
    out += uvarint_bytes(value)


def write_tagged_fields(out: EncodeBuffer, tags) -> None:
    """The tagged-field section: a count, then ``(tag, size, payload)`` in tag order."""
    if not tags:
        out.append(0)
        return
    out += uvarint_bytes(len(tags))
    for tag, payload in tags:
        write_tagged_field(out, tag, payload)


def read_unknown_tagged_fields(buf, pos: int) -> tuple[list | None, int]:
    """A tagged-field section where no tag is known: ``[(tag, payload bytes)]`` or None."""
    n, pos = _uvarint(buf, pos)
    if n == 0:
        return None, pos
    unknown = []
    for _ in range(n):
        tag, end, pos = read_tag_header(buf, pos)
        unknown.append((tag, bytes(buf[pos:end])))
        pos = end
    return unknown, pos
