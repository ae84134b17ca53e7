"""What an append tells the log, and what the log answers.

The broker validates each batch and assigns its offsets before calling ``Log.append``; it
passes a ``LogAppendInfo`` summary so the log never re-parses the bytes it is handed.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

from odradek.records.batch import NO_TIMESTAMP, iter_batch_positions, read_header

_new_tuple = tuple.__new__


class _AppendSummary(NamedTuple):
    first_offset: int
    last_offset: int
    max_timestamp: int = NO_TIMESTAMP
    offset_of_max_timestamp: int = -1


class LogAppendInfo(_AppendSummary):
    """Summary of the batches of one append.

    ``first_offset``/``last_offset``: base offset of the first batch and last offset of the
    last batch; ``max_timestamp``: largest batch max timestamp (-1 when none); and
    ``offset_of_max_timestamp``: an offset in the batch that holds it (the time index
    records it, so any offset of that batch at or after the record is correct; Kafka uses the
    batch's last offset).

    An immutable named tuple whose constructor checks the offset range: made once per
    produce request, in one Python call (a frozen dataclass took two, plus a C call per field).
    """

    __slots__ = ()

    def __new__(cls, first_offset: int, last_offset: int, max_timestamp: int = NO_TIMESTAMP,
                offset_of_max_timestamp: int = -1) -> LogAppendInfo:
        if first_offset < 0 or last_offset < first_offset:
            raise ValueError(f"bad offset range [{first_offset}, {last_offset}]")
        return _new_tuple(cls, (first_offset, last_offset, max_timestamp, offset_of_max_timestamp))

    @property
    def offset_count(self) -> int:
        """Offsets covered (messages, for the ``flush.messages`` policy)."""
        return self.last_offset - self.first_offset + 1

    @classmethod
    def from_batches(cls, buf) -> LogAppendInfo:
        """Summarize the already-validated v2 batches filling ``buf`` (headers only).

        For followers, tests and the cleaner; raises ValueError when ``buf`` does not hold
        whole batches.
        """
        first = last = None
        max_ts, max_ts_offset = NO_TIMESTAMP, -1
        end = 0
        for pos, size in iter_batch_positions(buf):
            header = read_header(buf, pos)
            if first is None:
                first = header.base_offset
            last = header.last_offset
            if header.max_timestamp > max_ts:
                max_ts, max_ts_offset = header.max_timestamp, header.last_offset
            end = pos + size
        if first is None or end != len(buf):
            raise ValueError("buffer does not hold whole record batches")
        return cls(first, last, max_ts, max_ts_offset if max_ts_offset >= 0 else last)


class AppendResult(NamedTuple):
    """Where an append landed: its offsets and the log's offsets right after it."""

    first_offset: int
    last_offset: int
    log_start_offset: int
    log_end_offset: int


@dataclass(frozen=True, slots=True)
class TimestampOffset:
    """A (timestamp, offset) pair: the answer of ListOffsets by timestamp."""

    timestamp: int
    offset: int
