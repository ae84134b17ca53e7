"""Fetched record batches turned into columns with a few vectorised numpy passes.

Why not the client's decoder: ``RecordBatch.records()`` builds one Python object per record,
about 4-5 µs per 100-byte record on this machine (measured on 72k records of a fetch
response; see ``bench/bench_spark.py``), which alone would cap a two-core scan far below
the 500k rows/s Spark needs. Here the only per-record Python work is one loop that hops
from record to record by the ``length`` varint (about 0.4 µs); every other field is read
for all records of a fetch at once, and keys and values are copied into Arrow buffers by
Arrow's ``take`` in C++ (about 1 µs per record in all).

Input: the ``records`` field of a fetch response, a run of batches (``records.batch``).
Every v2 batch is validated (length, magic, CRC-32C) before its records are touched, then
decompressed as one block when its codec is not 0. Record layout (``records.record``)::

    length varint | attributes int8 | timestampDelta varlong | offsetDelta varint |
    keyLength varint | key | valueLength varint | value | headerCount varint | headers

Contracts:
- only records with ``start <= offset < end`` are returned; control batches are skipped
  (odradek has no transactions to abort, so read_uncommitted is all there is);
- a partial batch at the end of the buffer is left for the next fetch;
- every position is checked against its record's end, so a malformed record raises
  ``CorruptRecordError`` and never reads past the buffer; header bytes are only parsed
  when ``include_headers`` asks (the batch CRC already covers them);
- legacy message sets (magic 0/1) take the per-record decoder, as they are rare.
"""

from __future__ import annotations

import struct
from array import array
from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from odradek.protocol.varint import VarintError, read_varint
from odradek.records import compression as codecs
from odradek.records.batch import BATCH_HEADER_SIZE, MAGIC_OFFSET, iter_batch_positions, validate
from odradek.records.builder import LOG_APPEND_TIME
from odradek.records.errors import CorruptRecordError
from odradek.records.reader import read_batch
from odradek.records.record import MIN_RECORD_BODY

__all__ = ["RecordColumns", "decode_fetched", "next_offset_after", "HEADERS_TYPE"]

HEADERS_TYPE = pa.list_(pa.field("element", pa.struct([("key", pa.string()), ("value", pa.binary())])))
_BASE_OFFSET = struct.Struct(">q")
_LAST_OFFSET_DELTA = struct.Struct(">i")


@dataclass
class RecordColumns:
    """The records of one fetch in ``[start, end)``: numpy offsets, timestamps (ms) and
    timestamp types; Arrow keys, values and (when asked) headers."""

    offsets: np.ndarray
    timestamps: np.ndarray
    timestamp_types: np.ndarray
    keys: pa.Array
    values: pa.Array
    headers: pa.Array | None

    def __len__(self) -> int:
        return len(self.offsets)


@dataclass
class _Batches:
    """What the walk over a fetch's batches found: record sections and per-batch fields."""

    pieces: list          # (buffer, start, stop) of each batch's records section
    counts: list[int]
    base_offsets: list[int]
    base_timestamps: list[int]
    timestamp_types: list[int]
    next_offset: int      # the offset after the last complete batch seen
    legacy: bool = False


def decode_fetched(buf, start: int, end: int, include_headers: bool = False) -> tuple[RecordColumns | None, int]:
    """Columns of the records of ``buf`` with ``start <= offset < end`` (None when there are
    none) and the offset to fetch next (``start`` when ``buf`` held no complete batch)."""
    found = _walk(buf, start, end)
    if found.legacy:
        return _decode_slowly(buf, start, end, include_headers), found.next_offset
    if not found.counts:
        return None, found.next_offset
    columns = _decode_v2(found, start, end, include_headers)
    return (columns if len(columns) else None), found.next_offset


def next_offset_after(buf, start: int) -> int:
    """The offset after the last complete batch in ``buf`` (``start`` if none is later),
    from the batch headers alone: cheap, so the next fetch can go out before decoding."""
    after = start
    for pos, _ in iter_batch_positions(buf):
        if buf[pos + MAGIC_OFFSET] == 2:
            base, delta = _BASE_OFFSET.unpack_from(buf, pos)[0], _LAST_OFFSET_DELTA.unpack_from(buf, pos + 23)[0]
            after = max(after, base + delta + 1)
        else:  # a legacy entry's offset is its last (inner) offset
            after = max(after, _BASE_OFFSET.unpack_from(buf, pos)[0] + 1)
    return after


def _walk(buf, start: int, end: int) -> _Batches:
    found = _Batches([], [], [], [], [], start)
    for pos, size in iter_batch_positions(buf):
        if buf[pos + MAGIC_OFFSET] != 2:
            found.legacy = True
            found.next_offset = max(found.next_offset, read_batch(buf, pos, size).next_offset)
            continue
        header = validate(buf, pos, size)
        if header.base_offset >= end:
            break
        found.next_offset = max(found.next_offset, header.next_offset)
        if header.is_control or header.next_offset <= start or header.records_count == 0:
            continue
        if header.compression == codecs.NONE:
            found.pieces.append((buf, pos + BATCH_HEADER_SIZE, pos + size))
        else:
            body = memoryview(buf)[pos + BATCH_HEADER_SIZE:pos + size]
            data = codecs.decompress(header.compression, body)
            found.pieces.append((data, 0, len(data)))
        found.counts.append(header.records_count)
        found.base_offsets.append(header.base_offset)
        found.timestamp_types.append(header.timestamp_type)
        found.base_timestamps.append(
            header.max_timestamp if header.timestamp_type == LOG_APPEND_TIME else header.base_timestamp)
    return found


def _decode_v2(found: _Batches, start: int, end: int, include_headers: bool) -> RecordColumns:
    data, bounds = _one_buffer(found.pieces)
    length_at = array("q")
    for (lo, hi), count in zip(bounds, found.counts, strict=True):
        _record_positions(data, lo, hi, count, length_at.append)
    B = np.frombuffer(data, dtype=np.uint8)
    L = np.frombuffer(length_at, dtype=np.int64)
    counts = np.asarray(found.counts, dtype=np.int64)
    length, size = _zigzag_at(B, L)
    S = L + size                      # record body start (its attributes byte)
    E = S + length                    # record end
    if (length < MIN_RECORD_BODY).any():
        raise CorruptRecordError("record length out of range")
    ts_delta, size = _zigzag_at(B, S + 1)
    p = S + 1 + size
    offset_delta, size = _zigzag_at(B, p)
    p = p + size
    types = np.repeat(np.asarray(found.timestamp_types, dtype=np.int32), counts)
    offsets = np.repeat(np.asarray(found.base_offsets, dtype=np.int64), counts) + offset_delta
    timestamps = np.repeat(np.asarray(found.base_timestamps, dtype=np.int64), counts)
    timestamps = np.where(types == LOG_APPEND_TIME, timestamps, timestamps + ts_delta)
    key_len, size = _zigzag_at(B, p)
    key_at = p + size
    _check_fits(key_at, key_len, E)
    p = key_at + np.maximum(key_len, 0)
    value_len, size = _zigzag_at(B, p)
    value_at = p + size
    _check_fits(value_at, value_len, E - 1)  # the header count takes at least one byte
    p = value_at + np.maximum(value_len, 0)
    header_count, size = _zigzag_at(B, p)
    if (header_count < 0).any() or ((header_count == 0) & (p + size != E)).any():
        raise CorruptRecordError("record fields do not fill its length")
    keep = (offsets >= start) & (offsets < end)
    if not keep.all():
        offsets, timestamps, types, key_at, key_len, value_at, value_len, p, E, header_count = (
            a[keep] for a in (offsets, timestamps, types, key_at, key_len, value_at, value_len, p, E,
                              header_count))
    buffer = pa.py_buffer(data)
    headers = _headers(data, p, E, header_count) if include_headers else None
    return RecordColumns(offsets, timestamps, types, _binary_spans(buffer, key_at, key_len),
                         _binary_spans(buffer, value_at, value_len), headers)


def _one_buffer(pieces: list):
    """One buffer holding every records section, and each section's bounds in it: the fetch
    buffer itself when nothing was decompressed (no copy), else a join of the sections."""
    first = pieces[0][0]
    if all(piece[0] is first for piece in pieces):
        return first, [(lo, hi) for _, lo, hi in pieces]
    bounds, at = [], 0
    for _, lo, hi in pieces:
        bounds.append((at, at + hi - lo))
        at += hi - lo
    return b"".join(memoryview(b)[lo:hi] for b, lo, hi in pieces), bounds


def _record_positions(data, pos: int, stop: int, count: int, append) -> None:
    """Append the position of each of ``count`` records' length varint, hopping from one
    record to the next; the records must fill ``data[pos:stop]`` exactly."""
    try:
        for _ in range(count):
            append(pos)
            b = data[pos]
            if b < 0x80:  # one-byte and two-byte lengths inlined: nearly every record
                pos += 1 + ((b >> 1) ^ -(b & 1))
                continue
            b2 = data[pos + 1]
            if b2 < 0x80:
                raw = (b & 0x7F) | (b2 << 7)
                pos += 2 + ((raw >> 1) ^ -(raw & 1))
            else:
                length, pos = read_varint(data, pos)
                pos += length
    except (IndexError, VarintError):
        raise CorruptRecordError("record truncated") from None
    if pos != stop:
        raise CorruptRecordError("records do not fill their batch")


_SHIFTS = (7 * np.arange(10)).astype(np.uint64)


def _zigzag_at(B: np.ndarray, P: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The zigzag varints (up to 10 bytes) at positions ``P`` of ``B``: (values, sizes).

    Reads clip at the end of ``B``; callers check that the sizes keep each field within
    its record, so a varint running past the buffer is caught there.
    """
    b0 = np.take(B, P, mode="clip").astype(np.int64)
    long = b0 >= 0x80
    if not long.any():
        return (b0 >> 1) ^ -(b0 & 1), np.ones(len(P), dtype=np.int64)
    b1 = np.take(B, P + 1, mode="clip").astype(np.int64)
    raw = np.where(long, (b0 & 0x7F) | (b1 << 7), b0)
    size = 1 + long
    longer = long & (b1 >= 0x80)
    if longer.any():
        rows = np.nonzero(longer)[0]
        raw[rows], size[rows] = _wide_varints(B, P[rows])
    return (raw >> 1) ^ -(raw & 1), size


def _wide_varints(B: np.ndarray, P: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    window = np.take(B, P[:, None] + np.arange(10), mode="clip")
    last = window < 0x80
    if not last.any(axis=1).all():
        raise CorruptRecordError("varint longer than 10 bytes")
    size = last.argmax(axis=1) + 1
    parts = (window & 0x7F).astype(np.uint64) << _SHIFTS
    parts[np.arange(10) >= size[:, None]] = 0
    return parts.sum(axis=1, dtype=np.uint64).view(np.int64), size


def _check_fits(at: np.ndarray, length: np.ndarray, limit: np.ndarray) -> None:
    """Each field of ``length`` bytes (-1: null) at ``at`` ends by ``limit`` (compared as
    room left, so a huge garbage length cannot overflow)."""
    if (length < -1).any():
        raise CorruptRecordError("negative key or value length")
    if (at > limit).any() or (length > limit - at).any():
        raise CorruptRecordError("record field runs past the record's length")


def _binary_spans(buffer: pa.Buffer, at: np.ndarray, length: np.ndarray) -> pa.Array:
    """A binary array of ``buffer[at:at+length]`` per row (null where length is -1).

    The spans are listed as the even elements of one binary array over the whole buffer
    (the odd ones are the bytes between them; offsets only have to be non-decreasing, and
    records are in buffer order), and Arrow's ``take`` copies them out in C++.
    """
    n = len(at)
    if n == 0:
        return pa.array([], pa.binary())
    valid = length >= 0
    bounds = np.empty(2 * n, dtype=np.int64)
    bounds[0::2] = at
    bounds[1::2] = at + np.where(valid, length, 0)
    if bounds[-1] >= 2**31:
        spans = pa.Array.from_buffers(pa.large_binary(), 2 * n - 1, [None, pa.py_buffer(bounds), buffer])
        taken = spans.take(pa.array(np.arange(0, 2 * n, 2))).cast(pa.binary())
    else:
        spans = pa.Array.from_buffers(pa.binary(), 2 * n - 1, [None, pa.py_buffer(bounds.astype(np.int32)), buffer])
        taken = spans.take(pa.array(np.arange(0, 2 * n, 2)))
    if valid.all():
        return taken
    bits = pa.py_buffer(np.packbits(valid, bitorder="little"))
    _, offsets, data = taken.buffers()
    return pa.Array.from_buffers(pa.binary(), n, [bits, offsets, data], null_count=int(n - valid.sum()))


def _headers(data, at: np.ndarray, stop: np.ndarray, count: np.ndarray) -> pa.Array:
    """The headers column: null for records without headers (as Spark's Kafka source
    gives), else a list of (key, value) structs; parsed per record, only where present."""
    keys: list = []
    values: list = []
    valid = count > 0
    for i in np.nonzero(valid)[0].tolist():
        _parse_headers(data, int(at[i]), int(stop[i]), keys, values)
    offsets = np.zeros(len(count) + 1, dtype=np.int64)
    np.cumsum(np.maximum(count, 0), out=offsets[1:])
    if offsets[-1] != len(keys) or offsets[-1] >= 2**31:
        raise CorruptRecordError("header count does not match the headers")
    struct = pa.StructArray.from_arrays(
        [pa.array(keys, pa.string()), pa.array(values, pa.binary())], fields=list(HEADERS_TYPE.value_type))
    mask = pa.array(~valid)
    return pa.ListArray.from_arrays(pa.array(offsets.astype(np.int32)), struct, type=HEADERS_TYPE, mask=mask)


def _parse_headers(data, pos: int, stop: int, keys: list, values: list) -> None:
    try:
        count, pos = read_varint(data, pos)
        for _ in range(count):
            size, pos = read_varint(data, pos)
            if size < 0 or pos + size > stop:
                raise CorruptRecordError("header key length out of range")
            keys.append(bytes(data[pos:pos + size]).decode("utf-8", "replace"))
            pos += size
            size, pos = read_varint(data, pos)
            if size < -1 or pos + max(size, 0) > stop:
                raise CorruptRecordError("header value length out of range")
            values.append(None if size < 0 else bytes(data[pos:pos + size]))
            pos += max(size, 0)
    except (IndexError, VarintError):
        raise CorruptRecordError("record headers truncated") from None
    if pos != stop:
        raise CorruptRecordError("record headers do not fill the record")


def _decode_slowly(buf, start: int, end: int, include_headers: bool) -> RecordColumns | None:
    """Per-record decoding, for fetches that hold legacy message sets."""
    rows = []
    for pos, size in iter_batch_positions(buf):
        batch = read_batch(buf, pos, size)
        if batch.is_control or batch.next_offset <= start:
            continue
        kind = batch.timestamp_type
        rows.extend((r, kind) for r in batch.records() if start <= r.offset < end)
    if not rows:
        return None
    headers = None
    if include_headers:
        lists = [[{"key": k, "value": v} for k, v in r.headers] or None for r, _ in rows]
        headers = pa.array(lists, HEADERS_TYPE)
    return RecordColumns(
        np.array([r.offset for r, _ in rows], dtype=np.int64),
        np.array([r.timestamp for r, _ in rows], dtype=np.int64),
        np.array([k for _, k in rows], dtype=np.int32),
        pa.array([r.key for r, _ in rows], pa.binary()),
        pa.array([r.value for r, _ in rows], pa.binary()),
        headers)
