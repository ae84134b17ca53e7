"""``SegmentRoll``: a segment's timestamps and when it rolls (a mixin of ``LogSegment``, kept
apart because it is one concept: Kafka's ``LogSegment.largestTimestamp``,
``rollingBasedTimestamp``, ``timeWaitedForRoll`` and ``shouldRoll``).

The largest timestamp comes from the time index (kept when the cache evicts a sealed
segment's indexes); retention compares it, or the file's modification time when no batch
has one. The roll clock starts at the first batch's timestamp, read once and kept. It uses
the segment's ``size``, ``base_offset``, ``created_ms``, ``roll_jitter_ms``, indexes and
file; see ``segment``.
"""

from __future__ import annotations

import os

from odradek.records.batch import BATCH_HEADER_SIZE, read_header
from odradek.storage.append_info import LogAppendInfo
from odradek.storage.file_records import INT32_MAX


class SegmentRoll:
    """Timestamps and the roll tests of ``LogSegment`` (a mixin: its state is the segment's)."""

    @property
    def max_timestamp(self) -> tuple[int, int]:
        """(largest timestamp, an offset of the batch holding it); (-1, base) when none."""
        index = self._index
        if index is not None:
            return index.max_timestamp
        if self._max_ts is not None:
            return self._max_ts
        return self.index().max_timestamp

    def retention_timestamp(self) -> int:
        """The timestamp retention.ms compares: the largest record timestamp, or the file's
        modification time when no batch carries one (Kafka's ``largestTimestamp``)."""
        ts = self.max_timestamp[0]
        if ts >= 0:
            return ts
        try:
            return os.stat(self.log_path).st_mtime_ns // 1_000_000
        except FileNotFoundError:
            return self.created_ms

    def first_batch_timestamp(self) -> int | None:
        """The first batch's max timestamp (-1 when it has none), None for an empty segment;
        read once and kept (Kafka's ``rollingBasedTimestamp``). The roll clock and the
        cleaner's ``max.compaction.lag.ms`` both start from it."""
        first = self._first_batch_ts
        if first is None and self.size > 0:
            first = read_header(self.handle().read_exact(0, BATCH_HEADER_SIZE)).max_timestamp
            self._first_batch_ts = first
        return first

    def time_waited_for_roll(self, now_ms: int, incoming_max_ts: int) -> int:
        """Kafka's roll clock: time from the first batch's timestamp to the incoming one
        when both are known, else time since the segment was created or loaded."""
        first = self._first_batch_ts  # kept after the first read: no call on every append
        if first is None:
            first = self.first_batch_timestamp()
        if first is not None and first >= 0 and incoming_max_ts >= 0:
            return incoming_max_ts - first
        return now_ms - self.created_ms

    def should_roll(self, size: int, info: LogAppendInfo, segment_bytes: int, segment_ms: int,
                    now_ms: int) -> bool:
        """Whether an append of ``size`` bytes summarized by ``info`` must go to a new
        segment (Kafka's ``LogSegment.shouldRoll``): it would not fit in ``segment_bytes``,
        its offsets would not fit the indexes' 32-bit relative offsets, an index is full, or
        the roll clock (``time_waited_for_roll``) reached ``segment_ms`` (the log passes
        ``LogConfig.max_segment_ms``) less this segment's ``roll_jitter_ms``.

        The time test is ``>=`` where Kafka's is ``>``: one millisecond sooner."""
        if self.size > segment_bytes - size or info.last_offset - self.base_offset > INT32_MAX:
            return True
        index = self._index  # the active segment's index is pinned in memory
        if (index if index is not None else self.index()).is_full:
            return True
        return self.size > 0 and (
            self.time_waited_for_roll(now_ms, info.max_timestamp) >= segment_ms - self.roll_jitter_ms
        )
