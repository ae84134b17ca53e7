"""``SegmentList``: the copy-on-write list of a log's segments (Kafka's documentation,
'Log', on deletes).

Deletes and swaps must not lock out readers, so the list is immutable: every change builds
a new ``SegmentList`` and the log replaces its reference in one assignment. A reader takes
the current reference once and binary-searches that static snapshot while deletes proceed;
the segments it finds stay readable (see ``Log`` and ``FileHandleCache``).
"""

from __future__ import annotations

from bisect import bisect_right
from dataclasses import dataclass

from odradek.storage.segment import LogSegment


@dataclass(frozen=True, slots=True)
class SegmentList:
    """Segments in base offset order (the last one is active), with their base offsets."""

    segments: tuple[LogSegment, ...]
    bases: tuple[int, ...]

    @classmethod
    def of(cls, segments) -> SegmentList:
        segments = tuple(segments)
        return cls(segments, tuple(s.base_offset for s in segments))

    def __len__(self) -> int:
        return len(self.segments)

    def floor(self, offset: int) -> int:
        """Index of the segment whose range holds ``offset`` (0 if below all)."""
        return max(bisect_right(self.bases, offset) - 1, 0)

    def next_bases(self, end: int | None = None) -> list[int | None]:
        """For each segment the base offset of the next one (``end`` for the last)."""
        return list(self.bases[1:]) + [end]

    def wholly_below(self, offset: int) -> int:
        """How many leading inactive segments hold only offsets below ``offset``."""
        count = 0
        while count < len(self.segments) - 1 and self.bases[count + 1] <= offset:
            count += 1
        return count
