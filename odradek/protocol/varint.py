"""Variable-length integers as Kafka encodes them (protobuf style, little-endian groups of 7 bits).

- unsigned varint: the length prefixes of flexible versions (compact strings, arrays, tagged
  fields). At most 5 bytes for 32-bit values.
- signed varint / varlong: zigzag-encoded, used inside v2 records (lengths, deltas, headers);
  at most 5 (int32) and 10 (int64) bytes.

Decoders take ``(buf, pos)`` and return ``(value, new_pos)``; they raise ``VarintError`` on a
value that runs past the buffer or past its maximum width, so a hostile byte string can never
make them loop or allocate.
"""

from __future__ import annotations


class VarintError(ValueError):
    """A varint was truncated or longer than its type allows."""


def read_uvarint(buf, pos: int) -> tuple[int, int]:
    """Unsigned 32-bit varint at ``pos``."""
    try:
        b = buf[pos]
        if b < 0x80:
            return b, pos + 1
        value = b & 0x7F
        shift = 7
        for i in range(pos + 1, pos + 5):
            b = buf[i]
            value |= (b & 0x7F) << shift
            if b < 0x80:
                return value, i + 1
            shift += 7
    except IndexError:
        raise VarintError("varint truncated") from None
    raise VarintError("varint longer than 5 bytes")


def read_uvarlong(buf, pos: int) -> tuple[int, int]:
    """Unsigned 64-bit varint at ``pos``."""
    value = 0
    shift = 0
    try:
        for i in range(pos, pos + 10):
            b = buf[i]
            value |= (b & 0x7F) << shift
            if b < 0x80:
                return value, i + 1
            shift += 7
    except IndexError:
        raise VarintError("varlong truncated") from None
    raise VarintError("varlong longer than 10 bytes")


def read_varint(buf, pos: int) -> tuple[int, int]:
    """Zigzag-encoded signed 32-bit varint at ``pos``."""
    raw, pos = read_uvarint(buf, pos)
    return (raw >> 1) ^ -(raw & 1), pos


def read_varlong(buf, pos: int) -> tuple[int, int]:
    """Zigzag-encoded signed 64-bit varint at ``pos``."""
    raw, pos = read_uvarlong(buf, pos)
    return (raw >> 1) ^ -(raw & 1), pos


# Precomputed encodings of small values: lengths and tag counts are nearly always tiny.
_SMALL = [bytes([i]) for i in range(128)]


def uvarint_bytes(value: int) -> bytes:
    """Encoding of a non-negative integer as an unsigned varint."""
    if value < 128:
        if value < 0:
            raise ValueError(f"unsigned varint cannot hold {value}")
        return _SMALL[value]
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def varint_bytes(value: int) -> bytes:
    """Zigzag encoding of a signed 32-bit integer."""
    return uvarint_bytes(((value << 1) ^ (value >> 31)) & 0xFFFFFFFF)


def varlong_bytes(value: int) -> bytes:
    """Zigzag encoding of a signed 64-bit integer."""
    return uvarint_bytes(((value << 1) ^ (value >> 63)) & 0xFFFFFFFFFFFFFFFF)


def varint_size(value: int) -> int:
    """Bytes that ``varint_bytes(value)`` takes."""
    return len(varint_bytes(value))
