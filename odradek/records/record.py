"""One record of a v2 batch: the Record value, its encoding and the decoding loop.

Byte layout of a record (Kafka's documentation, 'Record'; varints are zigzag, as in
``protocol.varint``)::

    length           varint    bytes that follow, up to the end of the headers
    attributes       int8      unused, written 0
    timestampDelta   varlong   timestamp - batch base_timestamp
    offsetDelta      varint    offset - batch base_offset
    keyLength        varint    -1 for a null key
    key              bytes
    valueLength      varint    -1 for a null value
    value            bytes
    headerCount      varint
    headers          [headerKeyLength varint, headerKey utf-8,
                      headerValueLength varint (-1 null), headerValue bytes]

Contracts: a record must end exactly where its length says, lengths are -1 or more (header
keys 0 or more) and nothing is read or allocated beyond the bytes given, so a hostile record
costs at most its own size. Header keys are decoded from UTF-8 with ``surrogateescape``: Java
accepts any bytes there (decoding leniently), and this keeps them byte-exact on re-encoding.
"""

from __future__ import annotations

from typing import NamedTuple

from odradek.protocol.varint import VarintError, read_varint, varint_bytes, varlong_bytes
from odradek.records.errors import CorruptRecordError

Header = tuple[str, "bytes | None"]

# A record with null key and value and no headers: attributes, the two deltas, two -1
# lengths and a zero header count take at least one byte each.
MIN_RECORD_BODY = 6
_NULL = varint_bytes(-1)
_INT32_MIN, _INT32_MAX = -(2**31), 2**31 - 1


class Record(NamedTuple):
    """A decoded record: absolute offset and timestamp, key, value and headers.

    A named tuple: immutable, and decoders build it with ``tuple.__new__`` straight from a
    tuple of fields (no Python ``__init__`` per record; ``record_spans`` builds whole lists
    with ``map`` at C speed).
    """

    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: tuple[Header, ...] = ()


_new = tuple.__new__


def encode_record(
    offset_delta: int,
    timestamp_delta: int,
    key: bytes | None,
    value: bytes | None,
    headers=(),
) -> bytes:
    """The bytes of one record, length prefix included.

    Raises ValueError when the offset delta does not fit an int32 or a header key is null.
    """
    if not _INT32_MIN <= offset_delta <= _INT32_MAX:
        raise ValueError(f"offset delta {offset_delta} does not fit an int32")
    body = bytearray(b"\x00")
    body += varlong_bytes(timestamp_delta)
    body += varint_bytes(offset_delta)
    _append_bytes(body, key)
    _append_bytes(body, value)
    body += varint_bytes(len(headers))
    for header_key, header_value in headers:
        if header_key is None:
            raise ValueError("record header keys cannot be null")
        _append_bytes(body, header_key.encode("utf-8", "surrogateescape"))
        _append_bytes(body, header_value)
    return varint_bytes(len(body)) + body


def _append_bytes(out: bytearray, data) -> None:
    if data is None:
        out += _NULL
    else:
        out += varint_bytes(len(data))
        out += data


def decode_records(
    data: bytes,
    count: int,
    base_offset: int,
    base_timestamp: int,
    fixed_timestamp: int | None = None,
) -> list[Record]:
    """Decode exactly ``count`` records that fill ``data`` exactly.

    Offsets are ``base_offset + offsetDelta``; timestamps ``base_timestamp + timestampDelta``,
    or ``fixed_timestamp`` for every record when given (LogAppendTime batches carry the append
    time as their max timestamp). Raises CorruptRecordError on any malformed record, on fewer
    records than ``count`` or on bytes left over.
    """
    if type(data) is not bytes:
        data = bytes(data)  # slices of bytes are the bytes keys and values we return
    records: list[Record] = []
    append = records.append
    end = len(data)
    pos = 0
    try:
        # One loop with the one-byte varints inlined: it runs once per record consumed.
        for _ in range(count):
            b = data[pos]
            if b < 0x80:
                length, pos = (b >> 1) ^ -(b & 1), pos + 1
            else:
                length, pos = _read_zigzag(data, pos)
            record_end = pos + length
            if length < MIN_RECORD_BODY or record_end > end:
                raise CorruptRecordError(f"record length {length} out of range")
            b = data[pos + 1]  # data[pos] holds the unused attributes
            if b < 0x80:
                timestamp_delta, pos = (b >> 1) ^ -(b & 1), pos + 2
            else:
                timestamp_delta, pos = _read_zigzag(data, pos + 1)
            b = data[pos]
            if b < 0x80:
                offset_delta, pos = (b >> 1) ^ -(b & 1), pos + 1
            else:
                offset_delta, pos = _read_zigzag(data, pos)
            key, pos = _read_bytes(data, pos, record_end)
            value, pos = _read_bytes(data, pos, record_end)
            if data[pos] == 0:
                headers, pos = (), pos + 1
            else:
                headers, pos = read_record_headers(data, pos, record_end)
            if pos != record_end:
                raise CorruptRecordError("record fields do not fill its length")
            timestamp = base_timestamp + timestamp_delta if fixed_timestamp is None else fixed_timestamp
            append(_new(Record, (base_offset + offset_delta, timestamp, key, value, headers)))
    except IndexError:
        raise CorruptRecordError("record truncated") from None
    if pos != end:
        raise CorruptRecordError(f"{end - pos} bytes left after {count} records")
    return records


def _read_zigzag(data: bytes, pos: int) -> tuple[int, int]:
    """A zigzag varint or varlong at ``pos`` (at most 10 bytes), in one call.

    The record fields that Kafka declares varint (int32) are read this way too: a value
    past int32 either fails the length checks or yields an offset delta no batch uses.
    """
    b = data[pos]
    raw = b & 0x7F
    shift = 7
    pos += 1
    while b & 0x80:
        if shift > 63:
            raise CorruptRecordError("varint longer than 10 bytes")
        b = data[pos]
        raw |= (b & 0x7F) << shift
        shift += 7
        pos += 1
    return (raw >> 1) ^ -(raw & 1), pos


def _read_bytes(data: bytes, pos: int, limit: int) -> tuple[bytes | None, int]:
    """A varint-length-prefixed byte string ending at or before ``limit`` (-1: None)."""
    b = data[pos]
    if b < 0x80:
        size, pos = (b >> 1) ^ -(b & 1), pos + 1
    else:
        size, pos = _read_zigzag(data, pos)
    if size < 0:
        if size == -1:
            return None, pos
        raise CorruptRecordError(f"negative length {size}")
    end = pos + size
    if end > limit:
        raise CorruptRecordError(f"length {size} runs past the record")
    return data[pos:end], end


def read_record_headers(data: bytes, pos: int, limit: int) -> tuple[tuple[Header, ...], int]:
    """A record's headers from its header count at ``pos``, each ending by ``limit``: the
    ``(key, value)`` pairs and the position after them. CorruptRecordError when malformed
    (IndexError when the bytes end first)."""
    try:
        count, pos = read_varint(data, pos)
    except VarintError as exc:
        raise CorruptRecordError(f"record header count malformed: {exc}") from None
    # Each header takes at least two bytes (two lengths), which bounds the loop.
    if count < 0 or 2 * count > limit - pos:
        raise CorruptRecordError(f"header count {count} out of range")
    headers = []
    for _ in range(count):
        raw_key, pos = _read_bytes(data, pos, limit)
        if raw_key is None:
            raise CorruptRecordError("null record header key")
        value, pos = _read_bytes(data, pos, limit)
        headers.append((raw_key.decode("utf-8", "surrogateescape"), value))
    return tuple(headers), pos


def decode_record(data: bytes, base_offset: int = 0, base_timestamp: int = 0) -> Record:
    """Decode one record that fills ``data`` exactly (length prefix included)."""
    return decode_records(data, 1, base_offset, base_timestamp)[0]
