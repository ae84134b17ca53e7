"""Fetched record batches turned into Arrow columns.

The records are located by ``odradek.records.record_spans`` (a few vectorised numpy passes
over all batches of a fetch, no Python object per record); keys and values are then copied
into Arrow buffers by Arrow's ``take`` in C++, straight from the spans. About 1 µs per
100-byte record in all (``bench/bench_spark.py``), where building ``Record`` objects would
cap a two-core scan far below the 500k rows/s Spark needs.

Input: the ``records`` field of a fetch response, a run of batches (``records.batch``),
each validated (length, magic, CRC-32C) before its records are touched.

Contracts:
- only records with ``start <= offset < end`` are returned; control batches are skipped;
- read_committed: ``aborted`` is the fetch answer's aborted transactions (producer id and
  first offset, ascending). As Java's ``Fetcher``, a transactional batch of a producer whose
  aborted transaction began at or before the batch's last offset is dropped, until that
  producer's ABORT marker; read_uncommitted passes ``aborted=None`` and keeps every batch;
- a partial batch at the end of the buffer is left for the next fetch;
- a malformed record raises ``CorruptRecordError`` (``record_spans``' checks); header
  bytes become a column only when ``include_headers`` asks;
- legacy message sets (magic 0/1) take the per-record decoder, as they are rare.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from odradek.records.batch import MAGIC_OFFSET, iter_batch_positions
from odradek.records.control import ABORT
from odradek.records.errors import CorruptRecordError
from odradek.records.reader import RecordBatch, read_batch
from odradek.records.record_spans import RecordSpans, locate_records

__all__ = ["HEADERS_TYPE", "RecordColumns", "decode_fetched", "next_offset_after"]

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


def decode_fetched(buf, start: int, end: int, include_headers: bool = False,
                   aborted=None) -> tuple[RecordColumns | None, int]:
    """Columns of the records of ``buf`` with ``start <= offset < end`` (None when there are
    none) and the offset to fetch next (``start`` when ``buf`` held no complete batch).
    ``aborted``: the answer's aborted transactions under read_committed (see above)."""
    batches, next_offset, legacy = _walk(buf, start, end, _AbortFilter(aborted) if aborted else None)
    if legacy:
        return _decode_slowly(buf, start, end, include_headers), next_offset
    if not batches:
        return None, next_offset
    columns = _columns(locate_records(batches), start, end, include_headers)
    return (columns if len(columns) else None), next_offset


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


class _AbortFilter:
    """Which batches belong to aborted transactions, walking batches in offset order."""

    def __init__(self, aborted) -> None:
        self.pending = sorted(((a.first_offset, a.producer_id) for a in aborted), reverse=True)
        self.aborting: set[int] = set()

    def skip(self, batch: RecordBatch) -> bool:
        """Whether to drop ``batch`` (a data batch of an aborted transaction), updating
        the producers in an aborted transaction (control batches are dropped anyway)."""
        header = batch.header
        while self.pending and self.pending[-1][0] <= header.last_offset:
            self.aborting.add(self.pending.pop()[1])
        if header.is_control:
            if header.producer_id in self.aborting and _is_abort(batch):
                self.aborting.discard(header.producer_id)
            return False
        return header.is_transactional and header.producer_id in self.aborting


def _is_abort(batch: RecordBatch) -> bool:
    try:
        return batch.end_txn_marker().type == ABORT
    except (CorruptRecordError, ValueError, AttributeError):
        return False


def _walk(buf, start: int, end: int, aborts: _AbortFilter | None = None) -> tuple[list[RecordBatch], int, bool]:
    """The v2 batches of ``buf`` that may hold records in ``[start, end)``, validated and
    not aborted; the offset after the last complete batch seen; and whether a legacy entry
    was seen."""
    batches, next_offset, legacy = [], start, False
    for pos, size in iter_batch_positions(buf):
        if buf[pos + MAGIC_OFFSET] != 2:
            legacy = True
            next_offset = max(next_offset, read_batch(buf, pos, size).next_offset)
            continue
        batch = RecordBatch(buf, pos, size)
        header = batch.header
        if header.base_offset >= end:
            break
        next_offset = max(next_offset, header.next_offset)
        if aborts is not None and aborts.skip(batch):
            continue
        if not (header.is_control or header.next_offset <= start or header.records_count == 0):
            batches.append(batch)
    return batches, next_offset, legacy


def _columns(spans: RecordSpans, start: int, end: int, include_headers: bool) -> RecordColumns:
    offsets = spans.offsets
    keep = (offsets >= start) & (offsets < end)
    if not keep.all():
        spans = spans.select(keep)
    buffer = pa.py_buffer(spans.data)
    headers = _headers(spans) if include_headers else None
    return RecordColumns(spans.offsets, spans.timestamps, spans.timestamp_types.astype(np.int32),
                         _binary_spans(buffer, spans.key_at, spans.key_len),
                         _binary_spans(buffer, spans.value_at, spans.value_len), headers)


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


def _headers(spans: RecordSpans) -> pa.Array:
    """The headers column: null for records without headers (as Spark's Kafka source
    gives), else a list of (key, value) structs."""
    keys: list = []
    values: list = []
    per_record = spans.headers()
    for pairs in per_record:
        for key, value in pairs:
            keys.append(key if key.isascii() else _lenient(key))
            values.append(value)
    count = spans.header_count
    offsets = np.zeros(len(count) + 1, dtype=np.int64)
    np.cumsum(count, out=offsets[1:])
    if offsets[-1] >= 2**31:
        raise CorruptRecordError("too many headers for one column")
    struct = pa.StructArray.from_arrays(
        [pa.array(keys, pa.string()), pa.array(values, pa.binary())], fields=list(HEADERS_TYPE.value_type))
    mask = pa.array(count == 0)
    return pa.ListArray.from_arrays(pa.array(offsets.astype(np.int32)), struct, type=HEADERS_TYPE, mask=mask)


def _lenient(key: str) -> str:
    """A header key as valid UTF-8 for Arrow: bytes that are not UTF-8 (kept by the decoder
    as surrogate escapes) become U+FFFD."""
    return key.encode("utf-8", "surrogateescape").decode("utf-8", "replace")


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
