"""Reading records out of batches: what a consumer does with a fetch response's records.

A fetch response's records field is a run of batches (magic 2) and, from older logs, legacy
message set entries (magic 0/1), each starting with ``offset int64, length int32`` and with
its magic byte at position 16. The broker may cut the last batch short to honour its size
limits, so a partial batch at the end is skipped, as every client does.

Each batch is checked (CRC-32C, or CRC-32 for legacy entries) before its records are
decoded; a compressed batch is decompressed once, as one block, with the output bounded by
``max_decompressed``. Any malformed input raises CorruptRecordError.
"""

from __future__ import annotations

from typing import Iterator

from odradek.records import compression as codecs
from odradek.records.batch import (
    BATCH_HEADER_SIZE,
    MAGIC_OFFSET,
    BatchHeader,
    iter_batch_positions,
    validate,
)
from odradek.records.builder import LOG_APPEND_TIME
from odradek.records.control import EndTransactionMarker, decode_end_txn_marker
from odradek.records.errors import CorruptRecordError
from odradek.records.legacy import LegacyBatch, read_message
from odradek.records.record import Record, decode_records


class RecordBatch:
    """A validated v2 batch in a buffer (no copy): its header, and its records on demand."""

    __slots__ = ("header", "buffer")
    magic = 2

    def __init__(self, buf, pos: int = 0, size: int | None = None) -> None:
        """Validate the batch at ``pos`` (see ``batch.validate``); CorruptRecordError if bad."""
        self.header: BatchHeader = validate(buf, pos, size)
        self.buffer = memoryview(buf)[pos : pos + self.header.size]

    def __repr__(self) -> str:
        h = self.header
        return f"RecordBatch(base_offset={h.base_offset}, count={h.records_count}, size={h.size})"

    @property
    def base_offset(self) -> int:
        return self.header.base_offset

    @property
    def last_offset(self) -> int:
        return self.header.last_offset

    @property
    def next_offset(self) -> int:
        return self.header.next_offset

    @property
    def compression(self) -> int:
        return self.header.compression

    @property
    def timestamp_type(self) -> int:
        return self.header.timestamp_type

    @property
    def is_control(self) -> bool:
        return self.header.is_control

    @property
    def is_transactional(self) -> bool:
        return self.header.is_transactional

    @property
    def producer_id(self) -> int:
        return self.header.producer_id

    def records_bytes(self, max_decompressed: int = codecs.DEFAULT_MAX_DECOMPRESSED) -> bytes:
        """The records section, decompressed when the batch is compressed."""
        body = self.buffer[BATCH_HEADER_SIZE:]
        return codecs.decompress(self.header.compression, body, max_decompressed)

    def records(self, max_decompressed: int = codecs.DEFAULT_MAX_DECOMPRESSED) -> list[Record]:
        """All records, with absolute offsets; a LogAppendTime batch gives every record its
        max timestamp (the append time), as Kafka's clients do."""
        h = self.header
        fixed = h.max_timestamp if h.timestamp_type == LOG_APPEND_TIME else None
        data = self.records_bytes(max_decompressed)
        return decode_records(data, h.records_count, h.base_offset, h.base_timestamp, fixed)

    def __iter__(self) -> Iterator[Record]:
        return iter(self.records())

    def end_txn_marker(self) -> EndTransactionMarker:
        """The commit/abort marker of a control batch; CorruptRecordError if it has none."""
        if not self.is_control:
            raise CorruptRecordError("not a control batch")
        records = self.records()
        if not records:
            raise CorruptRecordError("control batch without a record")
        return decode_end_txn_marker(records[0])


def read_batch(buf, pos: int = 0, size: int | None = None) -> RecordBatch | LegacyBatch:
    """The batch or legacy entry at ``pos`` (of ``size`` bytes when given), validated."""
    if len(buf) - pos <= MAGIC_OFFSET:
        raise CorruptRecordError("batch truncated before its magic byte")
    magic = buf[pos + MAGIC_OFFSET]
    if magic == 2:
        return RecordBatch(buf, pos, size)
    if magic in (0, 1):
        return LegacyBatch(read_message(buf, pos, size))
    raise CorruptRecordError(f"unsupported magic {magic}")


def iter_batches(buf, pos: int = 0, end: int | None = None) -> Iterator[RecordBatch | LegacyBatch]:
    """Every complete batch or legacy entry in ``buf[pos:end]``; a partial one at the end is
    skipped. Raises CorruptRecordError at the first bad one."""
    for at, size in iter_batch_positions(buf, pos, end):
        yield read_batch(buf, at, size)


def iter_records(
    buf,
    pos: int = 0,
    end: int | None = None,
    *,
    include_control: bool = False,
    max_decompressed: int = codecs.DEFAULT_MAX_DECOMPRESSED,
) -> Iterator[Record]:
    """The records of every complete batch in ``buf[pos:end]``, control batches skipped
    unless ``include_control``."""
    for batch in iter_batches(buf, pos, end):
        if batch.is_control and not include_control:
            continue
        yield from batch.records(max_decompressed)
