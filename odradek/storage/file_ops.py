"""Small filesystem steps the storage layer repeats: whole-file reads and writes, durable
replacement of a whole file (checkpoints), fsync of a file by path or of a directory (which
makes creations and renames in it durable), and disk space reserved ahead of appends."""

from __future__ import annotations

import contextlib
import ctypes
import os
import threading
from collections.abc import Iterator

from odradek.storage import deferred_sync
from odradek.storage.deferred_sync import fsync_path  # noqa: F401 (file_ops' name for it)

_FALLOC_FL_KEEP_SIZE = 0x01


def _libc_fallocate():
    """libc's ``fallocate(fd, mode, offset, len)``, or None where there is none."""
    try:
        fallocate = ctypes.CDLL(None, use_errno=True).fallocate
    except (AttributeError, OSError):
        return None
    fallocate.argtypes = (ctypes.c_int, ctypes.c_int, ctypes.c_int64, ctypes.c_int64)
    fallocate.restype = ctypes.c_int
    return fallocate


_fallocate = _libc_fallocate()


def read_file(path: str) -> bytes:
    with open(path, "rb") as f:
        return f.read()


def write_file(path: str, data: bytes) -> None:
    """Replace the content of ``path`` with ``data`` (no fsync)."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o644)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
    finally:
        os.close(fd)


class _PathLocks:
    """One lock per file path (as `os.path.abspath` spells it), made on first use and dropped
    once no thread holds or awaits it, so a partition's leader-epoch checkpoint leaves nothing
    behind when the partition goes."""

    def __init__(self) -> None:
        self._guard = threading.Lock()
        self._locks: dict[str, tuple[threading.Lock, list[int]]] = {}  # path: (lock, [users])

    @contextlib.contextmanager
    def held(self, path: str) -> Iterator[None]:
        key = os.path.abspath(path)
        with self._guard:
            lock, users = self._locks.setdefault(key, (threading.Lock(), [0]))
            users[0] += 1
        try:
            with lock:
                yield
        finally:
            with self._guard:
                users[0] -= 1
                if not users[0]:
                    del self._locks[key]


_replacing = _PathLocks()


def replace_durably(path: str, data: bytes) -> None:
    """Atomically replace ``path`` with ``data``, durably, as Kafka's checkpoint files are
    written: to ``path + ".tmp"``, fsynced, renamed over ``path``, then the directory fsynced
    (so a crash leaves the old file or the new one, never a torn one).

    One writer per path at a time in this process (Kafka's ``CheckpointFile`` holds its lock
    the same way): the lock is held from the creation of the ``.tmp`` file to the directory's
    fsync, so two writers of one checkpoint (the periodic pass and a topic deletion, say)
    never share the ``.tmp`` file, whose rename would otherwise find it gone (ENOENT, which
    takes the log directory offline) or rename the other's half-written content.

    Inside a batch on this thread (``deferred_sync.deferring``: ``LogManager.creation_batch``)
    the two fsyncs are left to the batch, which makes the file durable before it acknowledges."""
    tmp = path + ".tmp"
    with _replacing.held(path):
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o644)
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
            deferred = deferred_sync.defer(path)  # a batch's: synced before it acknowledges
            if not deferred:
                os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, path)
        directory = os.path.dirname(os.path.abspath(path))
        if not (deferred and deferred_sync.defer(directory)):
            fsync_directory(directory)


def fsync_directory(path: str) -> None:
    """fsync a directory, making file creations and renames in it durable."""
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def reserve_space(fd: int, offset: int, length: int) -> bool:
    """Reserve the disk blocks of bytes ``[offset, offset + length)`` of the file without
    changing its size (Linux ``fallocate`` with ``FALLOC_FL_KEEP_SIZE``); whether it did.

    Why: ext4 reserves and maps blocks for every 4 KiB page a buffered write fills (delayed
    allocation); into blocks already reserved the same ``pwrite`` costs ~18% less CPU
    (measured here: 0.26 against 0.215 CPU-s per GB, 560 KB writes). The size is untouched,
    so readers, recovery and crashes see exactly the bytes written; the reserved blocks past
    the end count in the file's ``st_blocks`` until an ``ftruncate`` to its size (or a
    smaller one) frees them. A reservation is only ever a hint: False (another OS, a
    filesystem without ``fallocate``, no space left) changes nothing else.
    """
    if _fallocate is None:
        return False
    return _fallocate(fd, _FALLOC_FL_KEEP_SIZE, offset, length) == 0


def unlink_quietly(path: str) -> None:
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass
