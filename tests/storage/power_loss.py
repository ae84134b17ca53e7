"""A simulated power cut: what survives is what was fsynced, nothing more.

kill -9 cannot test durability: the page cache outlives the process, so everything written
survives whether it was fsynced or not. ``PowerLoss`` wraps ``os.fsync`` and ``os.fdatasync``
(every durability point of odradek's storage and metadata goes through one of them) and
records, per file (device and inode, so renames keep it), the size the file had when a sync
of it began: those bytes are on disk once the sync returns. ``image(src, dst)`` copies a data
directory as a power cut would leave it: every regular file cut back to its last synced size,
a file never synced left empty.

What it does not model: directory entries (a created or renamed file is assumed to survive
without an fsync of its directory) and overwrites inside the synced size (appends only).
"""

from __future__ import annotations

import os
import shutil
import stat
import threading


class PowerLoss:
    """Install with ``with PowerLoss() as power:``; ``power.image(src, dst)`` at the cut."""

    def __init__(self) -> None:
        self._synced: dict[tuple[int, int], int] = {}
        self._lock = threading.Lock()
        self._originals: tuple | None = None

    def __enter__(self) -> PowerLoss:
        self._originals = (os.fsync, os.fdatasync)
        real_fsync, real_fdatasync = self._originals
        os.fsync = self._wrap(real_fsync)
        os.fdatasync = self._wrap(real_fdatasync)
        return self

    def __exit__(self, *exc) -> None:
        os.fsync, os.fdatasync = self._originals

    def _wrap(self, real):
        def sync(fd) -> None:
            fd = fd if isinstance(fd, int) else fd.fileno()
            st = os.fstat(fd)  # before the sync: bytes appended meanwhile are not covered
            real(fd)
            if stat.S_ISREG(st.st_mode):
                with self._lock:
                    self._synced[(st.st_dev, st.st_ino)] = st.st_size
        return sync

    def synced_size(self, path) -> int:
        st = os.stat(path)
        with self._lock:
            return min(self._synced.get((st.st_dev, st.st_ino), 0), st.st_size)

    def image(self, src, dst) -> None:
        """Copy directory ``src`` to ``dst`` as a power cut now would leave it."""
        for root, _, files in os.walk(src):
            target = os.path.join(dst, os.path.relpath(root, src))
            os.makedirs(target, exist_ok=True)
            for name in files:
                path = os.path.join(root, name)
                try:
                    keep = self.synced_size(path)
                    with open(path, "rb") as f, open(os.path.join(target, name), "wb") as out:
                        shutil.copyfileobj(_Limited(f, keep), out)
                except FileNotFoundError:
                    continue  # deleted while we walked: gone after the cut as well


class _Limited:
    """The first ``n`` bytes of a binary file, for ``copyfileobj``."""

    def __init__(self, f, n: int) -> None:
        self.f, self.n = f, n

    def read(self, size: int = -1) -> bytes:
        size = self.n if size < 0 else min(size, self.n)
        data = self.f.read(size)
        self.n -= len(data)
        return data
