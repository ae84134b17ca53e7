"""Where every record of a run of v2 batches lies, found with a few vectorised numpy passes.

What a consumer does with a fetch: ``decode_records`` (``records.record``) walks one record
at a time through nine fields, about 4 µs of Python per 100-byte record on this machine.
Here the only per-record Python step is one hop from record to record by its ``length``
varint (about 0.3 µs); every other field is read for all records of all batches at once,
as numpy arrays of positions and values. What the caller needs is made from those arrays in
bulk: ``records()`` builds ``Record`` tuples with ``map`` (slices for keys and values,
``tuple.__new__`` for the records: no Python frame per record), and the Spark source hands
the key and value spans to Arrow.

Record layout (``records.record``)::

    length varint | attributes int8 | timestampDelta varlong | offsetDelta varint |
    keyLength varint | key | valueLength varint | value | headerCount varint | headers

Input: validated v2 batches (``reader.RecordBatch``, CRC already checked), in log order;
compressed ones are decompressed as one block each (output bounded by ``max_decompressed``).
Their record sections are joined into one ``bytes`` (about 0.02 µs per 100-byte record, and
the keys and values returned are slices of it).

Contracts, the same as ``decode_records``: each batch's records fill its section exactly
and number ``records_count``; every length is -1 or more and every field ends within its
record, so a malformed record raises ``CorruptRecordError`` and nothing is read past the
buffer or allocated beyond it. LogAppendTime batches give every record the batch's max
timestamp. Header keys decode from UTF-8 with ``surrogateescape``.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, fields
from functools import partial

import numpy as np

from odradek.protocol.varint import VarintError, read_varint
from odradek.records import compression as codecs
from odradek.records.builder import LOG_APPEND_TIME
from odradek.records.errors import CorruptRecordError
from odradek.records.record import MIN_RECORD_BODY, Header, Record, read_record_headers

__all__ = ["PendingRecords", "RecordSpans", "decode_batches", "locate_records"]

_new_record = partial(tuple.__new__, Record)
_NO_HEADERS: tuple[Header, ...] = ()


@dataclass(slots=True)
class RecordSpans:
    """The records of some batches as int64 columns over ``data``.

    Per record: its offset, timestamp (ms) and timestamp type (0 create, 1 log append);
    where its key and value start and their lengths (-1: null); where its header count
    starts, how many headers follow, and where the record ends; and its headers, parsed
    (and so checked) when the records were located.
    """

    data: bytes
    offsets: np.ndarray
    timestamps: np.ndarray
    timestamp_types: np.ndarray
    key_at: np.ndarray
    key_len: np.ndarray
    value_at: np.ndarray
    value_len: np.ndarray
    header_at: np.ndarray
    header_count: np.ndarray
    end: np.ndarray
    parsed_headers: np.ndarray | None  # object array of header tuples; None when no record has any

    def __len__(self) -> int:
        return len(self.offsets)

    def select(self, rows) -> RecordSpans:
        """The records picked by ``rows`` (a slice, boolean mask or indexes), in order."""
        headers = None if self.parsed_headers is None else self.parsed_headers[rows]
        return RecordSpans(self.data, *(getattr(self, f.name)[rows] for f in fields(self)[1:-1]), headers)

    def keys(self) -> list[bytes | None]:
        return _slices(self.data, self.key_at, self.key_len)

    def values(self) -> list[bytes | None]:
        return _slices(self.data, self.value_at, self.value_len)

    def headers(self) -> list[tuple[Header, ...]]:
        """Each record's headers as ``(key, value)`` pairs (``()`` for none)."""
        if self.parsed_headers is None:
            return [_NO_HEADERS] * len(self)
        return self.parsed_headers.tolist()

    def records(self) -> list[Record]:
        """One ``Record`` per record, in order."""
        return list(map(_new_record, zip(
            self.offsets.tolist(), self.timestamps.tolist(), self.keys(), self.values(), self.headers())))


def locate_records(batches: Sequence, max_decompressed: int = codecs.DEFAULT_MAX_DECOMPRESSED) -> RecordSpans:
    """The spans of every record of ``batches`` (validated v2 ``RecordBatch``es, in order).
    Raises CorruptRecordError when any record is malformed."""
    sections = [batch.records_bytes(max_decompressed) for batch in batches]
    data = sections[0] if len(sections) == 1 and type(sections[0]) is bytes else b"".join(sections)
    headers = [batch.header for batch in batches]
    counts = np.fromiter((h.records_count for h in headers), dtype=np.int64, count=len(headers))
    B = np.frombuffer(data, dtype=np.uint8)
    length_at = _record_positions(data, B, sections, counts)
    length, size = _zigzag_at(B, length_at)
    if (length < MIN_RECORD_BODY).any():
        raise CorruptRecordError("record length out of range")
    start = length_at + size          # the record body: its attributes byte
    end = start + length
    ts_delta, size = _zigzag_at(B, start + 1)
    p = start + 1 + size
    offset_delta, size = _zigzag_at(B, p)
    p += size
    key_len, size = _zigzag_at(B, p)
    key_at = p + size
    _check_fits(key_at, key_len, end)
    p = key_at + np.maximum(key_len, 0)
    value_len, size = _zigzag_at(B, p)
    value_at = p + size
    _check_fits(value_at, value_len, end - 1)  # the header count takes at least one byte
    header_at = value_at + np.maximum(value_len, 0)
    header_count, size = _zigzag_at(B, header_at)
    if (header_count < 0).any() or ((header_count == 0) & (header_at + size != end)).any():
        raise CorruptRecordError("record fields do not fill its length")
    types = np.repeat(np.fromiter((h.timestamp_type for h in headers), dtype=np.int64), counts)
    offsets = np.repeat(np.fromiter((h.base_offset for h in headers), dtype=np.int64), counts) + offset_delta
    base_ts = np.repeat(np.fromiter(
        (h.max_timestamp if h.timestamp_type == LOG_APPEND_TIME else h.base_timestamp for h in headers),
        dtype=np.int64), counts)
    timestamps = np.where(types == LOG_APPEND_TIME, base_ts, base_ts + ts_delta)
    return RecordSpans(data, offsets, timestamps, types, key_at, key_len, value_at, value_len,
                       header_at, header_count, end, _all_headers(data, header_at, header_count, end))


def _all_headers(data: bytes, at: np.ndarray, count: np.ndarray, end: np.ndarray) -> np.ndarray | None:
    """Every record's headers (an object array), parsed only where present."""
    with_headers = np.flatnonzero(count)
    if not len(with_headers):
        return None
    out = np.empty(len(count), dtype=object)
    out.fill(_NO_HEADERS)
    for i, pos, stop in zip(with_headers.tolist(), at[with_headers].tolist(), end[with_headers].tolist()):
        out[i] = _parse_headers(data, pos, stop)
    return out


class PendingRecords:
    """Decoded records not yet handed out, taken in order. ``Record`` objects are made only
    for what ``take`` returns: records made ahead would outlive a garbage-collector pass or
    two, and promoting them is what made the collector cost 0.5 µs per record (measured on
    the consumer benchmark, ``bench/bench_client.py``)."""

    __slots__ = ("_at", "_pieces")

    def __init__(self, pieces: list) -> None:
        self._pieces = deque(p for p in pieces if len(p))  # RecordSpans or lists of Record
        self._at = 0  # records of the first piece already taken

    def __bool__(self) -> bool:
        return bool(self._pieces)

    def next_offset(self) -> int | None:
        """The offset of the next record to take (None when none is left)."""
        if not self._pieces:
            return None
        piece = self._pieces[0]
        return int(piece.offsets[self._at]) if isinstance(piece, RecordSpans) else piece[self._at].offset

    def take(self, limit: int) -> list[Record]:
        """Up to ``limit`` of the next records."""
        out: list[Record] = []
        pieces = self._pieces
        while pieces and len(out) < limit:
            piece, at = pieces[0], self._at
            stop = min(len(piece), at + limit - len(out))
            if isinstance(piece, RecordSpans):
                out += piece.select(slice(at, stop)).records() if at or stop < len(piece) else piece.records()
            else:
                out += piece[at:stop]
            if stop == len(piece):
                pieces.popleft()
                stop = 0
            self._at = stop
        return out


def decode_batches(batches: Sequence, position: int = 0) -> tuple[PendingRecords, int, CorruptRecordError | None]:
    """The records at or after ``position`` of validated batches in log order (v2
    ``RecordBatch``es, located together; legacy ones decoded by their own ``records()``).

    Returns ``(records, after, error)``: on success ``after`` is the last batch's next
    offset and ``error`` None. When a batch's records are malformed, the records of the
    batches before it are returned, ``after`` is where they end and ``error`` says why.
    """
    pieces: list = []
    after = position
    run: list = []
    for batch in [*batches, None]:
        if batch is not None and batch.magic == 2:
            run.append(batch)
            continue
        try:
            if run:
                pieces.append(_locate_run(run, position))
            if batch is not None:
                pieces.append([r for r in batch.records() if r.offset >= position])
        except CorruptRecordError:
            return _decode_one_by_one(run + [batch] if batch is not None else run, position, pieces, after)
        after = (batch or run[-1]).next_offset
        run = []
    return PendingRecords(pieces), after, None


def _locate_run(run: list, position: int) -> RecordSpans:
    spans = locate_records(run)
    if len(spans) and spans.offsets[0] < position:
        spans = spans.select(spans.offsets >= position)
    return spans


def _decode_one_by_one(batches: list, position: int, pieces: list, after: int):
    """Decode ``batches`` one at a time until the bad one, for the records before it."""
    for batch in batches:
        try:
            decoded = batch.records()
        except CorruptRecordError as e:
            return PendingRecords(pieces), after, e
        pieces.append([r for r in decoded if r.offset >= position])
        after = batch.next_offset
    return PendingRecords(pieces), after, None  # only the vectorised pass objected


def _record_positions(data: bytes, B: np.ndarray, sections: list, counts: np.ndarray) -> np.ndarray:
    """The position of each record's length varint; each section's records must fill it.

    Records of a batch mostly have one length (same-sized values, deltas of one width), so
    positions are guessed a whole stride apart for every section at once and verified in
    one vectorised pass: record ``j``'s guess is right when every record before it in its
    section has the guessed length (by induction from the section's first record, read
    exactly). From each section's first wrong length on, the next round guesses again with
    the actual next position and length. A round costs about what walking 1/16 of its
    guesses in Python would, so when one confirms fewer than that (lengths vary from record
    to record), the rest is walked record by record.
    """
    out = np.empty(int(counts.sum()), dtype=np.int64)
    sizes = np.fromiter(map(len, sections), dtype=np.int64, count=len(sections))
    stops = np.cumsum(sizes)
    pos = stops - sizes               # each section's next unlocated record
    first_out = np.cumsum(counts) - counts
    remaining = counts.copy()
    while remaining.any():
        s = np.flatnonzero(remaining)
        guesses = int(remaining.sum())
        confirmed = _guess_round(B, s, pos, remaining, first_out + counts - remaining, out)
        if 16 * confirmed < guesses:
            for i in np.flatnonzero(remaining).tolist():
                at = int(first_out[i] + counts[i] - remaining[i])
                pos[i] = _hop(data, int(pos[i]), int(remaining[i]), out, at)
            remaining[:] = 0
    if (pos != stops).any():
        raise CorruptRecordError("records do not fill their batch")
    return out


def _guess_round(B: np.ndarray, s: np.ndarray, pos: np.ndarray, remaining: np.ndarray,
                 next_out: np.ndarray, out: np.ndarray) -> int:
    """One round of guesses for sections ``s``; advance their ``pos`` and ``remaining``
    past what it confirmed (at least one record each), and return how many that was."""
    p0, r = pos[s], remaining[s]
    length, size = _zigzag_at(B, p0)
    if (length < MIN_RECORD_BODY).any():
        raise CorruptRecordError("record length out of range")
    stride = np.repeat(size + length, r)
    block = np.repeat(np.cumsum(r) - r, r)
    j = np.arange(len(stride)) - block                  # index within the section's guesses
    guess = np.repeat(p0, r) + j * stride
    length, size = _zigzag_at(B, guess, strict=False)
    wrong = size + length != stride
    first_wrong = np.minimum.reduceat(np.where(wrong, j, np.repeat(r, r)), np.cumsum(r) - r)
    keep = j <= np.repeat(first_wrong, r)               # guesses up to the first wrong length
    out[(np.repeat(next_out[s], r) + j)[keep]] = guess[keep]
    last = np.minimum(first_wrong, r - 1) + np.cumsum(r) - r
    pos[s] = guess[last] + size[last] + length[last]
    taken = np.minimum(first_wrong + 1, r)
    remaining[s] = r - taken
    return int(taken.sum())


def _hop(data: bytes, pos: int, count: int, out: np.ndarray, at: int) -> int:
    """Walk ``count`` records from ``pos`` by their length varints, writing their positions
    to ``out[at:]``; return the position after the last."""
    positions = []
    append = positions.append
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
    out[at:at + count] = positions
    return pos


_SHIFTS = (7 * np.arange(10)).astype(np.uint64)


def _zigzag_at(B: np.ndarray, P: np.ndarray, strict: bool = True) -> tuple[np.ndarray, np.ndarray]:
    """The zigzag varints (up to 10 bytes) at positions ``P`` of ``B``: (values, sizes).

    Reads clip at the end of ``B``; callers check that the sizes keep each field within
    its record, so a varint running past the buffer is caught there. A varint longer than
    10 bytes raises CorruptRecordError, or with ``strict=False`` (guessed positions, which
    may fall anywhere) reads as value 0 of size 0.
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
        raw[rows], size[rows] = _wide_varints(B, P[rows], strict)
    return (raw >> 1) ^ -(raw & 1), size


def _wide_varints(B: np.ndarray, P: np.ndarray, strict: bool) -> tuple[np.ndarray, np.ndarray]:
    window = np.take(B, P[:, None] + np.arange(10), mode="clip")
    last = window < 0x80
    ends = last.any(axis=1)
    if strict and not ends.all():
        raise CorruptRecordError("varint longer than 10 bytes")
    size = np.where(ends, last.argmax(axis=1) + 1, 0)
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


def _slices(data: bytes, at: np.ndarray, length: np.ndarray) -> list[bytes | None]:
    """``data[at:at+length]`` per record, None where the length is -1."""
    null = length < 0
    if null.all():
        return [None] * len(at)
    starts = at.tolist()
    out = [data[a:b] for a, b in zip(starts, (at + length).tolist())]
    if null.any():
        for i in np.flatnonzero(null).tolist():
            out[i] = None
    return out


def _parse_headers(data: bytes, pos: int, stop: int) -> tuple[Header, ...]:
    """The headers of one record, from its header count at ``pos`` to its end ``stop``
    (``records.record``'s reader, which also checks them)."""
    try:
        headers, pos = read_record_headers(data, pos, stop)
    except IndexError:
        raise CorruptRecordError("record headers truncated") from None
    if pos != stop:
        raise CorruptRecordError("record headers do not fill the record")
    return headers
