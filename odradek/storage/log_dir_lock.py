"""The ``.lock`` file of each log directory: one broker process owns a directory at a time.

Kafka's ``LogManager`` takes an exclusive lock on ``<log.dir>/.lock`` for every directory of
``log.dirs`` before it reads anything there, and refuses to start when another process holds
one ("A Kafka instance in another process or thread is using this directory"): two brokers
appending to the same segment files would interleave their batches and corrupt both logs.

The lock is ``flock(LOCK_EX | LOCK_NB)`` on an open descriptor, so it dies with the process
(a broker killed with SIGKILL leaves no stale lock behind), and it belongs to the open file
description: two brokers in one process (tests) exclude each other too.
"""

from __future__ import annotations

import fcntl
import os

LOCK_FILE = ".lock"


class LogDirError(Exception):
    """A directory of ``log.dirs`` cannot be used; the message names it and says why."""


class LogDirLocks:
    """The locks of a broker's log directories, created (with the directories) by ``acquire``."""

    def __init__(self, log_dirs: list[str]) -> None:
        self.log_dirs = list(log_dirs)
        self._fds: list[int] = []

    def acquire(self) -> None:
        """Create each directory if missing and lock it; on any failure release what was taken
        and raise LogDirError."""
        try:
            for path in self.log_dirs:
                self._fds.append(_lock(path))
        except LogDirError:
            self.release()
            raise

    def release(self) -> None:
        fds, self._fds = self._fds, []
        for fd in fds:
            os.close(fd)  # closing the only descriptor of the description drops its flock


def _lock(path: str) -> int:
    try:
        os.makedirs(path, exist_ok=True)
        fd = os.open(os.path.join(path, LOCK_FILE), os.O_RDWR | os.O_CREAT, 0o644)
    except OSError as e:
        raise LogDirError(f"log.dirs: cannot use {path}: {e.strerror}") from None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        raise LogDirError(f"log.dirs: {path} is in use by another odradek broker "
                          f"(it holds {os.path.join(path, LOCK_FILE)})") from None
    return fd
