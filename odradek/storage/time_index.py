"""``TimeIndex``: the sparse map from timestamps to offsets in one segment.

File format (``<base offset>.timeindex``), a run of 12-byte entries, big-endian::

    timestamp        int64   the largest timestamp appended to the segment so far
    relative_offset  int32   offset - base offset of the record (or batch) holding it

An entry (t, o) promises that no record at or below offset ``base + o`` has a timestamp
above ``t``. Entries are added alongside offset index entries, only when the segment's
largest timestamp grew, so timestamps strictly increase and offsets never decrease. When a
segment stops being active, one more entry records its largest timestamp (even if that
exceeds ``max_entries`` by one), so the last entry of an inactive segment's index gives the
segment's largest timestamp, which decides its retention (Kafka's
documentation, 'Log', on deletes).

Kept in a ``bytearray`` in file format, for the reasons given in ``offset_index``.
"""

from __future__ import annotations

import struct

from odradek.storage.errors import CorruptIndexError
from odradek.storage.index_entries import IndexEntries

_ENTRY = struct.Struct(">qi")
ENTRY_SIZE = _ENTRY.size
INT32_MAX = 2**31 - 1


class TimeIndex(IndexEntries):
    """The entries of one segment's time index, in memory."""

    __slots__ = ()
    ENTRY_SIZE = ENTRY_SIZE

    def entry(self, n: int) -> tuple[int, int]:
        """The n-th entry as (timestamp, absolute offset)."""
        ts, rel = _ENTRY.unpack_from(self._buf, n * ENTRY_SIZE)
        return ts, self.base_offset + rel

    def last_entry(self) -> tuple[int, int] | None:
        n = len(self)
        return self.entry(n - 1) if n else None

    def maybe_append(self, timestamp: int, offset: int, skip_full_check: bool = False) -> bool:
        """Add (timestamp, offset) if ``timestamp`` is above the last entry's; return whether
        it was added. ValueError if the offset goes backwards or the index is full."""
        rel = offset - self.base_offset
        if not 0 <= rel <= INT32_MAX:
            raise ValueError(f"offset {offset} does not fit the time index")
        buf = self._buf
        if buf:
            last_ts, last_rel = _ENTRY.unpack_from(buf, len(buf) - ENTRY_SIZE)
            if timestamp <= last_ts:
                return False
            if rel < last_rel:
                raise ValueError(f"time index offset {offset} below {self.base_offset + last_rel}")
        elif timestamp < 0:
            return False
        if not skip_full_check and self.is_full:
            raise ValueError("time index is full")
        buf += _ENTRY.pack(timestamp, rel)
        return True

    def lookup_before(self, timestamp: int) -> int:
        """The offset of the last entry with a timestamp strictly below ``timestamp`` (every
        record at or below it is older than ``timestamp``), or the base offset."""
        buf = self._buf
        lo, hi = 0, len(buf) // ENTRY_SIZE
        while lo < hi:
            mid = (lo + hi) // 2
            if _ENTRY.unpack_from(buf, mid * ENTRY_SIZE)[0] < timestamp:
                lo = mid + 1
            else:
                hi = mid
        return self.entry(lo - 1)[1] if lo else self.base_offset

    def truncate_to(self, offset: int) -> None:
        """Remove the entries for offsets at or above ``offset``."""
        n = len(self)
        keep = n
        while keep and self.entry(keep - 1)[1] >= offset:
            keep -= 1
        if keep < n:
            del self._buf[keep * ENTRY_SIZE :]

    @classmethod
    def from_bytes(cls, base_offset: int, max_entries: int, data: bytes) -> TimeIndex:
        """Load and sanity-check a time index file's bytes; CorruptIndexError when the length
        is not whole entries, there are too many, or the order is broken."""
        if len(data) % ENTRY_SIZE:
            raise CorruptIndexError(f"time index length {len(data)} not a multiple of 12")
        count = len(data) // ENTRY_SIZE
        if count > max_entries + 1:
            raise CorruptIndexError(f"time index has {count} entries, limit {max_entries}")
        last_ts, last_rel = None, -1
        for ts, rel in _ENTRY.iter_unpack(data):
            if rel < last_rel or rel < 0 or ts < 0 or (last_ts is not None and ts <= last_ts):
                raise CorruptIndexError(f"bad time index entry ({ts}, {rel})")
            last_ts, last_rel = ts, rel
        return cls(base_offset, max_entries, data)
