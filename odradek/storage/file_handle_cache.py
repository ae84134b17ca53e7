"""Bounding open files: ``SegmentFile`` descriptors and the ``FileHandleCache`` LRU.

A broker with P partitions of S segments each must not hold P x S descriptors (10,000
partitions would exhaust the default ulimit of 1024 before the first fetch). Segments open
their ``.log`` file lazily and register with one shared ``FileHandleCache``; when more than
``max_open`` segments hold resources, the least recently used ones are told to let go of
them (``release_handles``), and reopen on their next use.

Letting go means dropping a reference, not calling ``close``: a ``SegmentFile`` closes its
descriptor when the last reference disappears (CPython frees it at once). A read in flight,
a ``FileRegion`` waiting for ``sendfile``, or a flush thread inside ``fsync`` each hold
their own reference, so eviction or segment deletion can never close a descriptor under
them, nor let the number be reused for another file. Open descriptors are therefore bounded
by ``max_open`` plus those held by operations in flight.

Eviction callbacks run outside the cache's lock and must not take locks themselves (they
only clear attributes), so no lock order exists between segments and the cache.
"""

from __future__ import annotations

import os
import threading
from collections import OrderedDict
from typing import Protocol


class SegmentFile:
    """An open descriptor on a segment's ``.log`` file, closed when no longer referenced."""

    __slots__ = ("__weakref__", "fd", "path")
    _open_count = 0
    _count_lock = threading.Lock()

    def __init__(self, path: str, create: bool = False) -> None:
        flags = os.O_RDWR | os.O_CLOEXEC | (os.O_CREAT if create else 0)
        self.fd = os.open(path, flags, 0o644)
        self.path = path
        with SegmentFile._count_lock:
            SegmentFile._open_count += 1

    def __del__(self) -> None:
        fd = getattr(self, "fd", -1)  # absent when os.open failed in __init__
        self.fd = -1
        if fd >= 0:
            with SegmentFile._count_lock:
                SegmentFile._open_count -= 1
            try:
                os.close(fd)
            except OSError:
                pass

    @classmethod
    def open_count(cls) -> int:
        """Descriptors currently open through this class (for tests and metrics)."""
        return cls._open_count

    def read_exact(self, position: int, length: int) -> bytes:
        """``length`` bytes at ``position``; EOFError when the file is shorter."""
        data = os.pread(self.fd, length, position)
        if len(data) == length:
            return data
        parts = [data]
        got = len(data)
        while got < length:
            more = os.pread(self.fd, length - got, position + got)
            if not more:
                raise EOFError(f"{self.path}: {length} bytes at {position} past end of file")
            parts.append(more)
            got += len(more)
        return b"".join(parts)

    def write_at(self, data, position: int) -> None:
        """Write all of ``data`` at ``position``."""
        written = os.pwrite(self.fd, data, position)  # nearly always all of it at once
        if written == len(data):
            return
        view = memoryview(data)[written:]
        position += written
        while view:
            written = os.pwrite(self.fd, view, position)
            view = view[written:]
            position += written

    def size(self) -> int:
        return os.fstat(self.fd).st_size


class HandleHolder(Protocol):
    def release_handles(self) -> None:
        """Drop open descriptors and reloadable memory; must not block or take locks."""


class FileHandleCache:
    """LRU of the holders (segments) that currently keep files open."""

    def __init__(self, max_open: int = 1024) -> None:
        if max_open < 1:
            raise ValueError("max_open must be at least 1")
        self.max_open = max_open
        self._holders: OrderedDict[HandleHolder, None] = OrderedDict()
        self._lock = threading.Lock()
        # The holder touched last (already at the MRU end): touching it again, as every
        # append to the same active segment does, changes nothing and takes no lock (read-only
        # outside this class: LogSegment.append reads it to skip the call).
        self.last: HandleHolder | None = None

    def __len__(self) -> int:
        return len(self._holders)

    def touch(self, holder: HandleHolder) -> None:
        """Record that ``holder`` holds resources and was just used; evict the oldest."""
        if holder is self.last:
            return
        victims = []
        with self._lock:
            holders = self._holders
            self.last = holder
            if holder in holders:
                holders.move_to_end(holder)
                return
            holders[holder] = None
            while len(holders) > self.max_open:
                victims.append(holders.popitem(last=False)[0])
        for victim in victims:
            victim.release_handles()

    def discard(self, holder: HandleHolder) -> None:
        """Forget ``holder`` (it released its resources itself)."""
        with self._lock:
            self._holders.pop(holder, None)
            if self.last is holder:
                self.last = None
