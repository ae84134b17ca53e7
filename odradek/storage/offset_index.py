"""``OffsetIndex``: the sparse map from offsets to positions in one segment's ``.log`` file.

File format (``<base offset>.index``), a run of 8-byte entries, big-endian::

    relative_offset  int32   offset - segment base offset
    position         int32   byte position in the .log file of a batch boundary

An entry (o, p) promises that the batch holding offset ``base + o`` starts at or after
position ``p``, and that ``p`` is the start of a batch: reads look up the last entry at or
below the wanted offset and scan batch headers forward from there. Entries strictly increase
in both fields. One entry is added per append once more than ``index.interval.bytes`` were
appended since the previous one (4096 by default: a lookup scans about 4 KiB of headers).

Why no mmap (Kafka maps its indexes): CPython's ``mmap`` keeps a ``dup`` of the descriptor, so
every mapped index would cost a file descriptor on top of its segment's; a mapping cannot be
closed while a memoryview of it exists, and truncating a mapped file raises SIGBUS. The index
lives in a ``bytearray`` instead, in its file format: the active segment's is written out,
trimmed, when it rolls or the log closes; an older segment's is loaded on first use (and
sanity-checked) and dropped again when the handle cache evicts its segment. The
``segment.index.bytes`` limit is kept as the capacity that forces a roll, exactly as the
preallocated size does in Kafka; there is no preallocation on disk to trim. After an unclean
stop the active segment's index is rebuilt from the log, so nothing depends on it being on
disk before then.
"""

from __future__ import annotations

import struct

from odradek.storage.errors import CorruptIndexError
from odradek.storage.index_entries import IndexEntries

_ENTRY = struct.Struct(">ii")
ENTRY_SIZE = _ENTRY.size
INT32_MAX = 2**31 - 1


class OffsetIndex(IndexEntries):
    """The entries of one segment's offset index, in memory."""

    __slots__ = ()
    ENTRY_SIZE = ENTRY_SIZE

    def entry(self, n: int) -> tuple[int, int]:
        """The n-th entry as (absolute offset, position)."""
        rel, pos = _ENTRY.unpack_from(self._buf, n * ENTRY_SIZE)
        return self.base_offset + rel, pos

    def last_entry(self) -> tuple[int, int]:
        """The last entry, or (base offset, 0) when empty."""
        n = len(self)
        return self.entry(n - 1) if n else (self.base_offset, 0)

    def append(self, offset: int, position: int) -> None:
        """Add an entry; offsets and positions must increase. ValueError otherwise."""
        rel = offset - self.base_offset
        if not 0 <= rel <= INT32_MAX or not 0 <= position <= INT32_MAX:
            raise ValueError(f"entry ({offset}, {position}) does not fit the index")
        buf = self._buf
        if buf:
            last_rel, last_position = _ENTRY.unpack_from(buf, len(buf) - ENTRY_SIZE)
            if rel <= last_rel or position <= last_position:
                raise ValueError(f"entry ({offset}, {position}) not after "
                                 f"({self.base_offset + last_rel}, {last_position})")
        if self.is_full:
            raise ValueError("offset index is full")
        buf += _ENTRY.pack(rel, position)

    def lookup(self, offset: int) -> tuple[int, int]:
        """The last entry whose offset is at or below ``offset``, or (base, 0)."""
        rel = offset - self.base_offset
        buf = self._buf
        lo, hi = 0, len(buf) // ENTRY_SIZE  # invariant: entries < lo match, >= hi do not
        while lo < hi:
            mid = (lo + hi) // 2
            if _ENTRY.unpack_from(buf, mid * ENTRY_SIZE)[0] <= rel:
                lo = mid + 1
            else:
                hi = mid
        return self.entry(lo - 1) if lo else (self.base_offset, 0)

    def lookup_position(self, position: int) -> tuple[int, int]:
        """The last entry whose position is at or below ``position``, or (base, 0)."""
        buf = self._buf
        lo, hi = 0, len(buf) // ENTRY_SIZE
        while lo < hi:
            mid = (lo + hi) // 2
            if _ENTRY.unpack_from(buf, mid * ENTRY_SIZE)[1] <= position:
                lo = mid + 1
            else:
                hi = mid
        return self.entry(lo - 1) if lo else (self.base_offset, 0)

    def truncate_to(self, offset: int) -> None:
        """Remove the entries for offsets at or above ``offset``."""
        n = len(self)
        keep = n
        while keep and self.entry(keep - 1)[0] >= offset:
            keep -= 1
        if keep < n:
            del self._buf[keep * ENTRY_SIZE :]

    @classmethod
    def from_bytes(
        cls, base_offset: int, max_entries: int, data: bytes, log_size: int
    ) -> OffsetIndex:
        """Load and sanity-check an index file's bytes against a .log of ``log_size`` bytes.

        Raises CorruptIndexError when the length is not a whole number of entries, there are
        more than ``max_entries``, or entries do not strictly increase or point past the log.
        """
        if len(data) % ENTRY_SIZE:
            raise CorruptIndexError(f"offset index length {len(data)} not a multiple of 8")
        count = len(data) // ENTRY_SIZE
        if count > max_entries:
            raise CorruptIndexError(f"offset index has {count} entries, limit {max_entries}")
        last_rel, last_pos = -1, -1
        for rel, pos in _ENTRY.iter_unpack(data):
            if rel <= last_rel or pos <= last_pos or rel < 0 or pos >= log_size:
                raise CorruptIndexError(f"bad offset index entry ({rel}, {pos})")
            last_rel, last_pos = rel, pos
        return cls(base_offset, max_entries, data)
