"""Walking the batches of a segment's ``.log`` file (Kafka's ``FileRecords``).

A ``.log`` file is batches verbatim, back to back, exactly as appended (Kafka's documentation,
'Log': the log is "a sequence of log entries"; here each entry is a v2 batch, layout in
``records.batch``). Two walks exist:

- ``iter_headers``: for reads and index lookups over data already known good. Reads the file
  in chunks and decodes only the 61-byte headers; a header that cannot be right (wrong
  magic, impossible length, running past the end) raises CorruptSegmentError rather than
  letting garbage be served.
- ``iter_valid_batches``: for recovery. Reads every byte and checks each batch as Kafka's
  documentation ('Log') says (its size within the file, its CRC) plus that offsets
  increase; it stops, without raising, at the first batch that fails, which is where
  recovery truncates.
"""

from __future__ import annotations

import os
import struct
from collections.abc import Iterator

from odradek.records.batch import (
    BATCH_HEADER_SIZE,
    LOG_OVERHEAD,
    MIN_BATCH_LENGTH,
    BatchHeader,
    batch_size_at,
    read_header,
    validate,
)
from odradek.records.errors import CorruptRecordError
from odradek.storage.errors import CorruptSegmentError
from odradek.storage.file_handle_cache import SegmentFile

# Header scans read this much at a time: two index intervals (4096 bytes by default), so
# one read usually covers the walk from an index entry to the wanted batch.
SCAN_CHUNK = 8 * 1024
# Recovery reads whole batches, 1 MiB at a time (a larger batch is read on its own).
RECOVERY_CHUNK = 1024 * 1024
INT32_MAX = 2**31 - 1
# The header fields a walk needs: base offset, length, (epoch), magic, (crc, attributes),
# last offset delta: the first 27 bytes of a batch.
_BOUNDS = struct.Struct(">qiibIhi")


def iter_headers(
    file: SegmentFile, start: int, end: int, chunk: int = SCAN_CHUNK
) -> Iterator[tuple[int, BatchHeader]]:
    """Yield ``(position, header)`` of each batch in ``[start, end)`` of ``file``.

    ``start`` must be a batch boundary and ``end`` the segment size (or another boundary).
    Raises CorruptSegmentError on a malformed header or bytes that end mid-batch.
    """
    pos = start
    buf = b""
    buf_pos = start
    while pos < end:
        off = pos - buf_pos
        if off + BATCH_HEADER_SIZE > len(buf):
            buf = os.pread(file.fd, max(BATCH_HEADER_SIZE, min(chunk, end - pos)), pos)
            buf_pos, off = pos, 0
            if len(buf) < BATCH_HEADER_SIZE:
                raise CorruptSegmentError(
                    f"{file.path}: {end - pos} bytes at {pos} are not a whole batch"
                )
        header = read_header(buf, off)
        if header.magic != 2 or header.batch_length < MIN_BATCH_LENGTH:
            raise CorruptSegmentError(f"{file.path}: no batch header at position {pos}")
        if pos + header.size > end:
            raise CorruptSegmentError(f"{file.path}: batch at {pos} runs past {end}")
        yield pos, header
        pos += header.size


def iter_bounds(
    file: SegmentFile, start: int, end: int, chunk: int = SCAN_CHUNK
) -> Iterator[tuple[int, int, int, int]]:
    """Like ``iter_headers``, yielding only ``(position, size, base_offset, last_offset)``
    (plain tuples: this walk runs on every read, and a full header costs twice as much)."""
    pos = start
    buf = b""
    buf_pos = start
    unpack_from = _BOUNDS.unpack_from
    while pos < end:
        off = pos - buf_pos
        if off + BATCH_HEADER_SIZE > len(buf):
            buf = os.pread(file.fd, max(BATCH_HEADER_SIZE, min(chunk, end - pos)), pos)
            buf_pos, off = pos, 0
            if len(buf) < BATCH_HEADER_SIZE:
                raise CorruptSegmentError(
                    f"{file.path}: {end - pos} bytes at {pos} are not a whole batch"
                )
        base, length, _, magic, _, _, delta = unpack_from(buf, off)
        size = LOG_OVERHEAD + length
        if magic != 2 or length < MIN_BATCH_LENGTH or pos + size > end:
            raise CorruptSegmentError(f"{file.path}: no valid batch header at position {pos}")
        yield pos, size, base, base + delta
        pos += size


def iter_valid_batches(
    file: SegmentFile, start: int, end: int, base_offset: int
) -> Iterator[tuple[int, BatchHeader]]:
    """Yield ``(position, header)`` of each valid batch from ``start``; stop at the first
    invalid one (recovery truncates there).

    Valid means: a whole header and batch inside ``[start, end)``, magic 2, the CRC-32C
    matching, offsets at or above ``base_offset`` and above the previous batch's, and a last
    offset whose delta from ``base_offset`` fits an int32 (the indexes' relative offsets).
    Memory is bounded by the larger of RECOVERY_CHUNK and one batch, and a batch can never
    claim more than the bytes left in the file.
    """
    pos = start
    buf = b""
    buf_pos = start
    next_min = base_offset
    while end - pos >= LOG_OVERHEAD:
        off = pos - buf_pos
        if off + BATCH_HEADER_SIZE > len(buf):
            buf = os.pread(file.fd, min(RECOVERY_CHUNK, end - pos), pos)
            buf_pos, off = pos, 0
        if len(buf) - off < BATCH_HEADER_SIZE:
            return
        size = _checked_size(buf, off)
        if size is None or pos + size > end:
            return
        if off + size > len(buf):
            buf = os.pread(file.fd, max(size, min(RECOVERY_CHUNK, end - pos)), pos)
            buf_pos, off = pos, 0
            if len(buf) < size:
                return
        try:
            header = validate(buf, off, size)
        except CorruptRecordError:
            return
        if header.base_offset < next_min or header.last_offset - base_offset > INT32_MAX:
            return
        yield pos, header
        next_min = header.next_offset
        pos += size


def _checked_size(buf: bytes, off: int) -> int | None:
    try:
        size = batch_size_at(buf, off)
    except CorruptRecordError:
        return None
    return size if size >= BATCH_HEADER_SIZE else None
