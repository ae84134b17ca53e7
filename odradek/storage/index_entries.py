"""``IndexEntries``: what the offset index and the time index share.

Both keep their entries in a ``bytearray`` in their file format (fixed-size, big-endian
entries in ascending order) and have a capacity, from ``segment.index.bytes``, that forces a
segment roll when reached. Subclasses set ``ENTRY_SIZE`` and give the entries meaning.
"""

from __future__ import annotations


class IndexEntries:
    __slots__ = ("_buf", "base_offset", "max_entries")
    ENTRY_SIZE = 0  # bytes per entry, set by each subclass

    def __init__(self, base_offset: int, max_entries: int, data: bytes = b"") -> None:
        self.base_offset = base_offset
        self.max_entries = max_entries
        self._buf = bytearray(data)

    def __len__(self) -> int:
        return len(self._buf) // self.ENTRY_SIZE

    @property
    def is_full(self) -> bool:
        # Asked several times per append: computed here rather than through __len__.
        return len(self._buf) >= self.max_entries * self.ENTRY_SIZE

    def to_bytes(self) -> bytes:
        return bytes(self._buf)
