"""The ``.lock`` file of each log directory: one broker process owns a directory at a time.

Kafka's ``LogManager`` takes an exclusive lock on ``<log.dir>/.lock`` for every directory of
``log.dirs`` before it reads anything there, and refuses to start when another process holds
one ("A Kafka instance in another process or thread is using this directory"): two brokers
appending to the same segment files would interleave their batches and corrupt both logs.

The lock is ``flock(LOCK_EX | LOCK_NB)`` on an open descriptor, so it dies with the process
(a broker killed with SIGKILL leaves no stale lock behind), and it belongs to the open file
description: two brokers in one process (tests) exclude each other too.

A directory that cannot be created or opened (a failed disk, a file in its place) is, as in
Kafka, only offline: ``acquire`` returns it and the broker starts with the others (the log
manager counts it failed). Only when no directory can be used does the broker refuse to start.
"""

from __future__ import annotations

import fcntl
import os

LOCK_FILE = ".lock"


class LogDirError(Exception):
    """A directory of ``log.dirs`` cannot be used; the message names it and says why."""


class _UnusableDir(LogDirError):
    """A directory that cannot be created or opened: offline, not fatal by itself."""


class LogDirLocks:
    """The locks of a broker's log directories, created (with the directories) by ``acquire``."""

    def __init__(self, log_dirs: list[str]) -> None:
        self.log_dirs = list(log_dirs)
        self._fds: list[int] = []

    def acquire(self) -> dict[str, str]:
        """Create each directory if missing and lock it; return those that cannot be used
        (an I/O error: ``{path: why}``), which stay unlocked. LogDirError, after releasing
        what was taken, when a directory is in use by another broker or none can be used."""
        unusable: dict[str, str] = {}
        try:
            for path in self.log_dirs:
                try:
                    self._fds.append(_lock(path))
                except _UnusableDir as e:
                    unusable[path] = str(e)
            if unusable and len(unusable) == len(self.log_dirs):
                raise LogDirError(next(iter(unusable.values())))
        except LogDirError:
            self.release()
            raise
        return unusable

    def release(self) -> None:
        fds, self._fds = self._fds, []
        for fd in fds:
            os.close(fd)  # closing the only descriptor of the description drops its flock


def _lock(path: str) -> int:
    try:
        os.makedirs(path, exist_ok=True)
        fd = os.open(os.path.join(path, LOCK_FILE), os.O_RDWR | os.O_CREAT, 0o644)
    except OSError as e:
        raise _UnusableDir(f"log.dirs: cannot use {path}: {e.strerror}") from None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        raise LogDirError(f"log.dirs: {path} is in use by another odradek broker "
                          f"(it holds {os.path.join(path, LOCK_FILE)})") from None
    return fd
