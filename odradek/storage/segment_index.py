"""``SegmentIndex``: a segment's offset and time indexes, and how entries get added.

Rule (Kafka's ``LogSegment.append``): after each append of batches, once more than
``index.interval.bytes`` were appended since the last entry, add an offset index entry
(the append's last offset -> the position where the append began) and a time index entry
(the largest timestamp so far -> an offset of the batch holding it) if that timestamp grew.
The first append to a segment never adds an entry: position 0 needs none. When the
segment stops being active, one more time index entry records its largest timestamp.

The same rule applied batch by batch rebuilds the indexes of a segment from its file, so
appends and recovery produce equivalent indexes. Index capacity (``segment.index.bytes``)
bounds the entries; when full, the log rolls before the next append.
"""

from __future__ import annotations

from dataclasses import dataclass

from odradek.records.batch import NO_TIMESTAMP
from odradek.storage.errors import CorruptIndexError
from odradek.storage.file_ops import read_file, write_file
from odradek.storage.offset_index import ENTRY_SIZE as OFFSET_ENTRY_SIZE
from odradek.storage.offset_index import OffsetIndex
from odradek.storage.time_index import ENTRY_SIZE as TIME_ENTRY_SIZE
from odradek.storage.time_index import TimeIndex


@dataclass(frozen=True, slots=True)
class SegmentSettings:
    """What a segment takes from LogConfig when it is created."""

    index_interval_bytes: int = 4096
    index_bytes: int = 10_485_760

    @property
    def max_index_entries(self) -> int:
        return self.index_bytes // OFFSET_ENTRY_SIZE

    @property
    def max_time_index_entries(self) -> int:
        return self.index_bytes // TIME_ENTRY_SIZE


class SegmentIndex:
    """Both indexes of one segment, its largest timestamp, and bytes since the last entry."""

    __slots__ = ("_interval", "bytes_since_entry", "max_timestamp", "offsets", "times")

    def __init__(
        self, base_offset: int, settings: SegmentSettings, offsets=None, times=None
    ) -> None:
        self.offsets = offsets or OffsetIndex(base_offset, settings.max_index_entries)
        self.times = times or TimeIndex(base_offset, settings.max_time_index_entries)
        last = self.times.last_entry()
        # (largest timestamp, an offset of the batch holding it); (-1, base) when none.
        self.max_timestamp: tuple[int, int] = last or (NO_TIMESTAMP, base_offset)
        self.bytes_since_entry = 0
        self._interval = settings.index_interval_bytes

    @classmethod
    def from_files(
        cls,
        base_offset: int,
        settings: SegmentSettings,
        index_path: str,
        time_index_path: str,
        log_size: int,
    ) -> SegmentIndex:
        """Load both index files, sanity-checked; OSError or CorruptIndexError if bad."""
        offsets = OffsetIndex.from_bytes(
            base_offset, settings.max_index_entries, read_file(index_path), log_size
        )
        times = TimeIndex.from_bytes(
            base_offset, settings.max_time_index_entries, read_file(time_index_path)
        )
        if len(times) and times.last_entry()[1] < base_offset:
            raise CorruptIndexError(f"{time_index_path}: offset below the segment")
        return cls(base_offset, settings, offsets, times)

    def write(self, index_path: str, time_index_path: str) -> None:
        """Write both files, trimmed to their entries (no fsync)."""
        write_file(index_path, self.offsets.to_bytes())
        write_file(time_index_path, self.times.to_bytes())

    @property
    def is_full(self) -> bool:
        return self.offsets.is_full or self.times.is_full

    def track(self, position: int, size: int, last_offset: int, max_ts: int, max_ts_offset: int) -> None:
        """Account for ``size`` bytes of batches appended at ``position`` (see module doc)."""
        if max_ts > self.max_timestamp[0]:
            self.max_timestamp = (max_ts, max_ts_offset)
        if self.bytes_since_entry > self._interval and not self.offsets.is_full:
            self.offsets.append(last_offset, position)
            if not self.times.is_full:
                self.times.maybe_append(*self.max_timestamp)
            self.bytes_since_entry = 0
        self.bytes_since_entry += size

    def seal(self) -> None:
        """Record the largest timestamp as the time index's last entry."""
        self.times.maybe_append(*self.max_timestamp, skip_full_check=True)

    def resume(self, size: int) -> None:
        """Continue appending to a segment of ``size`` bytes whose index was loaded."""
        _, position = self.offsets.last_entry()
        self.bytes_since_entry = size - position if len(self.offsets) else size

    def truncate_to(self, offset: int, size: int) -> bool:
        """Drop entries for offsets at or above ``offset`` (the file is now ``size`` bytes);
        return False when the largest timestamp was among the removed records, so the
        caller must recompute it."""
        self.offsets.truncate_to(offset)
        self.times.truncate_to(offset)
        self.resume(size)
        return self.max_timestamp[1] < offset
