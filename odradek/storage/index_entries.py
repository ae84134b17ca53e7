"""``IndexEntries``: what the offset index and the time index share.

Both keep their entries in a ``bytearray`` in their file format (fixed-size, big-endian
entries in ascending order) and have a capacity, from ``segment.index.bytes``, that forces a
segment roll when reached. Subclasses set ``ENTRY_SIZE`` and give the entries meaning.
"""

from __future__ import annotations


class IndexEntries:
    """Entries in ``_buf``; ``is_full`` is a plain attribute (read on every append, by the
    roll check and the index rule), so every change to ``_buf`` goes through ``_changed``."""

    __slots__ = ("_buf", "_limit", "base_offset", "is_full", "max_entries")
    ENTRY_SIZE = 0  # bytes per entry, set by each subclass

    def __init__(self, base_offset: int, max_entries: int, data: bytes = b"") -> None:
        self.base_offset = base_offset
        self.max_entries = max_entries
        self._buf = bytearray(data)
        self._limit = max_entries * self.ENTRY_SIZE
        self._changed()

    def _changed(self) -> None:
        self.is_full = len(self._buf) >= self._limit

    def __len__(self) -> int:
        return len(self._buf) // self.ENTRY_SIZE

    def to_bytes(self) -> bytes:
        return bytes(self._buf)
