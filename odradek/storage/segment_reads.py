"""Reading a ``LogSegment``: offset -> position -> ``FileRegion`` (``SegmentReads``).

A mixin of ``LogSegment`` (``segment``): the lock-free read side. A read takes ``size`` once
(appends grow it only after their bytes are written, so everything below it is whole
batches), looks the offset up in the offset index (the last entry at or below it), then walks
batch headers from there (``file_records.iter_bounds``) to the batch holding the offset.
A stale or damaged index of a sealed segment can send the walk into the middle of a batch:
the indexes are then rebuilt from the log once before the data is called corrupt.
"""

from __future__ import annotations

from collections.abc import Iterator

from odradek.records.batch import BatchHeader
from odradek.storage.errors import CorruptSegmentError
from odradek.storage.file_handle_cache import SegmentFile
from odradek.storage.file_records import SCAN_CHUNK, iter_bounds, iter_headers
from odradek.storage.file_region import EMPTY_REGION, FileRegion


class SegmentReads:
    """Reads of ``LogSegment`` (uses its ``size``, ``index()``, ``handle()``, ``sealed``)."""

    def translate_offset(
        self, offset: int, size: int | None = None
    ) -> tuple[int, int, int, int] | None:
        """The first batch whose last offset is at or above ``offset``, within the first
        ``size`` bytes, as (position, size, base offset, last offset); None if none."""
        size = self.size if size is None else size
        try:
            return self._translate(offset, size)
        except CorruptSegmentError:
            if self._rebuilt_on_error or not self.sealed:
                raise  # the active segment's index is built in memory, never stale
            # A stale or damaged index can send the scan into the middle of a batch:
            # rebuild the indexes from the log once before calling the data corrupt.
            self._rebuilt_on_error = True
            with self._index_lock:
                self._index = self._rebuild_index()
            return self._translate(offset, size)

    def _translate(self, offset: int, size: int) -> tuple[int, int, int, int] | None:
        _, start = self.index().offsets.lookup(offset)
        if start >= size:
            start = 0
        for bounds in iter_bounds(self.handle(), start, size):
            if bounds[3] >= offset:
                return bounds
        return None

    def read(
        self, offset: int, max_bytes: int, max_offset: int | None, min_one: bool
    ) -> FileRegion | None:
        """Whole batches starting with the one holding ``offset`` (or the first after it).

        At most ``max_bytes`` bytes, except one whole first batch when ``min_one``; no batch
        holding an offset at or above ``max_offset``. None when this segment has no batch at
        or after ``offset``; an empty region when a limit leaves nothing.
        """
        size = self.size
        found = self.translate_offset(offset, size)
        if found is None:
            return None
        start, first_size, first_base, first_last = found
        if max_offset is not None and first_last >= max_offset:
            return EMPTY_REGION
        end_limit = size
        if max_offset is not None:
            bound = self.translate_offset(max_offset, size)
            if bound is not None:
                end_limit = bound[0]
        file = self.handle()
        if first_size > max_bytes:
            if not min_one:
                return EMPTY_REGION
            return FileRegion(file, start, first_size, first_base)
        end = self._boundary_at_or_before(file, start + max_bytes, start + first_size, end_limit)
        return FileRegion(file, start, end - start, first_base)

    def _boundary_at_or_before(
        self, file: SegmentFile, limit: int, start: int, end_limit: int
    ) -> int:
        """The last batch boundary in ``[start, min(limit, end_limit)]``; ``start`` is one."""
        if limit >= end_limit:
            return end_limit
        pos = start
        if limit - start > SCAN_CHUNK:  # far away: start from the index, not from `start`
            pos = max(self.index().offsets.lookup_position(limit)[1], start)
        end = pos
        for position, size, _, _ in iter_bounds(file, pos, end_limit):
            if position + size > limit:
                break
            end = position + size
        return end

    def batches_from_timestamp(
        self, timestamp: int, min_offset: int
    ) -> Iterator[tuple[int, BatchHeader]]:
        """Batches, in order, from the first that may hold a record with a timestamp at or
        above ``timestamp`` and an offset at or above ``min_offset``; each yielded batch's
        max timestamp is at or above ``timestamp``."""
        start_offset = max(self.index().times.lookup_before(timestamp), min_offset)
        size = self.size
        found = self.translate_offset(start_offset, size)
        if found is None:
            return
        for position, header in iter_headers(self.handle(), found[0], size):
            if header.max_timestamp >= timestamp and header.last_offset >= min_offset:
                yield position, header

    def iter_batches(self, start: int = 0) -> Iterator[tuple[int, BatchHeader]]:
        """Every batch header from position ``start`` (for the cleaner and tools)."""
        return iter_headers(self.handle(), start, self.size)
