"""``FileRegion``: the answer to a read, a run of whole batches inside one segment file.

The region names bytes, it does not copy them: the broker sends ``length`` bytes from
``position`` of ``file`` with ``os.sendfile`` (or ``os.pread`` where sendfile is not
possible). ``file`` is a ``SegmentFile``: it keeps its descriptor open for as long as the
region (or anything else) holds it, even when the segment is deleted or its descriptor is
evicted from the handle cache in the meantime, so keep the region alive while using ``fd``.
"""

from __future__ import annotations

from dataclasses import dataclass

from odradek.storage.file_handle_cache import SegmentFile


@dataclass(frozen=True, slots=True)
class FileRegion:
    """``length`` bytes at ``position`` of ``file``: whole v2 batches, in offset order.

    ``first_offset`` is the base offset of the first batch (-1 for an empty region).
    """

    file: SegmentFile | None
    position: int
    length: int
    first_offset: int = -1

    @property
    def fd(self) -> int:
        """The open descriptor (valid while this region is referenced)."""
        if self.file is None:
            raise ValueError("an empty region has no file")
        return self.file.fd

    def __len__(self) -> int:
        return self.length

    def read(self) -> bytes:
        """Copy the region's bytes (for followers' tests, tools and non-sendfile paths)."""
        if self.length == 0 or self.file is None:
            return b""
        return self.file.read_exact(self.position, self.length)


EMPTY_REGION = FileRegion(None, 0, 0)
