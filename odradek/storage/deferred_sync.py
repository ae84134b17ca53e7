"""fsyncs put off to the end of a batch, on one thread (`deferring`), and made in one go
(`sync_paths`).

``file_ops.replace_durably`` fsyncs the new file and its directory; a LeaderAndIsr making
thousands of new leaders writes a leader-epoch-checkpoint in each new partition directory, two
fsyncs each (most of the time of a 10,000-partition LeaderAndIsr). Inside ``deferring()`` (the
thread of ``LogManager.creation_batch``) those writes still write and rename, but note the file
and its directory here instead of fsyncing them; the batch makes every noted path durable with
`sync_paths` before it acknowledges any of its logs. What a crash before that leaves is what a
crash before the acknowledgement left already: logs the controller was not told of, whose
checkpoints `open_leader_epoch_cache` reads or rebuilds.

`sync_paths` makes many paths of one filesystem durable with one Linux ``syncfs`` (it writes
back every dirty inode of that filesystem, these included, and reports a writeback error since
Linux 5.8), and fsyncs them one by one where there is no ``syncfs``, the paths are few, or the
machine holds much dirty data (``/proc/meminfo``'s ``Dirty``, at least `SYNCFS_DIRTY_MAX`):
a ``syncfs`` writes all of it back, the logs' unflushed segments too, so its time grows with
the produce load, and a new leader's checkpoints are synced on the event loop. Measured on the
2-core test machine (ext4), 500 checkpoints and their directories: ``syncfs`` 8 ms with nothing
else dirty but 295 ms with 1 GiB dirty; one fsync each 83 and 66 ms.
"""

from __future__ import annotations

import contextlib
import errno
import ctypes
import os
import threading
from collections.abc import Iterator

# Fewer paths than this are fsynced one by one (a syncfs also writes others' dirty data).
SYNCFS_FROM = 16
# With this much dirty data or more on the machine, paths are fsynced one by one (see above).
SYNCFS_DIRTY_MAX = 64 << 20

_state = threading.local()


def _libc_syncfs():
    try:
        syncfs = ctypes.CDLL(None, use_errno=True).syncfs
    except (AttributeError, OSError):
        return None
    syncfs.argtypes = (ctypes.c_int,)
    syncfs.restype = ctypes.c_int
    return syncfs


_syncfs = _libc_syncfs()


@contextlib.contextmanager
def deferring() -> Iterator[list[str]]:
    """On this thread, `defer` notes paths in the yielded list instead of fsyncing them; the
    caller must `sync_paths` them before relying on them."""
    noted: list[str] = []
    _state.noted = noted
    try:
        yield noted
    finally:
        _state.noted = None


def defer(*paths: str) -> bool:
    """Note ``paths`` (files or directories) for the batch under way on this thread: True;
    False when none is (the caller fsyncs them itself)."""
    noted = getattr(_state, "noted", None)
    if noted is None:
        return False
    noted.extend(paths)
    return True


def sync_paths(paths: list[str]) -> None:
    """Make ``paths`` (files or directories of one filesystem) durable; OSError if that fails.
    A path gone meanwhile is skipped: deleted (a topic's partition directory, renamed for
    deletion while a follower's sync waited in another thread), it has nothing left to make
    durable, and its absence is no failure of the log directory."""
    if len(paths) >= SYNCFS_FROM and _syncfs is not None and _dirty_bytes() < SYNCFS_DIRTY_MAX:
        fd = _open(paths[-1])
        if fd is not None:
            try:
                if _syncfs(fd) == 0:
                    return
                err = ctypes.get_errno()
                if err != errno.ENOSYS:  # no syncfs after all: fsync them one by one
                    raise OSError(err, os.strerror(err), paths[-1])
            finally:
                os.close(fd)
    for path in paths:
        fsync_path(path)


def fsync_path(path: str) -> None:
    """fsync the file or directory at ``path``; one deleted meanwhile has nothing left to sync.
    (``file_ops`` names it too: it is here because ``file_ops`` imports this module.)"""
    fd = _open(path)
    if fd is None:
        return
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _open(path: str) -> int | None:
    """A read-only descriptor of ``path``; None when it no longer exists."""
    try:
        return os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except FileNotFoundError:
        return None


def _dirty_bytes() -> int:
    """The machine's dirty page-cache bytes (``/proc/meminfo``'s ``Dirty``), 0 when unknown."""
    try:
        with open("/proc/meminfo", "rb") as f:
            for line in f:
                if line.startswith(b"Dirty:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return 0
