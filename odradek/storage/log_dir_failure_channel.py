"""``LogDirFailureChannel``: the log directories that failed, reported once each (Kafka's
``LogDirFailureChannel``).

Whoever meets an I/O error of a log directory (an append, a flush, a checkpoint, a new log's
directory) hands it to ``report``, then answers its own caller as before (the partition gets
KAFKA_STORAGE_ERROR). The first report of a directory marks it offline and calls the
listener (``set_listener``) with the directory, from the reporting thread: the broker then
takes that directory's partitions offline and tells the controller
(``server/log_dir_failure_handler.py``). Later reports of the same directory only return.

Which errors fail a directory (``is_log_dir_failure``): every ``OSError`` but those that say
nothing about the directory's disk. A full disk (ENOSPC, EDQUOT) is odradek's own choice:
such appends are refused (KAFKA_STORAGE_ERROR) and writes resume by themselves once space
returns, where Kafka takes the directory offline until a restart. Running out of file
descriptors (EMFILE, ENFILE) is the process's limit, not the disk's. A sync that fails
(``SyncFailed``: fsync or fdatasync of a log's files, by a flush) fails the directory
whatever its errno, ENOSPC included: a write refused for space left nothing behind and can be
retried, but data that write() accepted and writeback then could not store may be gone (Linux
can drop those pages and report the error once), so a later sync succeeding would not prove
it durable.
"""

from __future__ import annotations

import errno
import logging
import threading
from collections.abc import Callable

log = logging.getLogger(__name__)

_NOT_THE_DIRECTORY = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EMFILE, errno.ENFILE})


class SyncFailed(OSError):
    """An fsync or fdatasync of a log's data that failed (the errno and text are the sync's):
    always a failure of its directory (see above)."""


def is_log_dir_failure(error: BaseException) -> bool:
    """Whether ``error``, met on a log directory, means the directory failed (see above)."""
    if isinstance(error, SyncFailed):
        return error.errno not in (errno.EMFILE, errno.ENFILE)
    return isinstance(error, OSError) and error.errno not in _NOT_THE_DIRECTORY


class LogDirFailureChannel:
    """Offline log directories, each reported once to the listener. Thread-safe."""

    def __init__(self) -> None:
        self._offline: dict[str, str] = {}  # directory -> the first error's text
        self._lock = threading.Lock()
        self._listener: Callable[[str], None] | None = None

    def set_listener(self, listener: Callable[[str], None] | None) -> None:
        """``listener(directory)`` is called for each newly failed directory, in the thread
        that reported it (directories that failed before are passed at once)."""
        with self._lock:
            self._listener = listener
            already = list(self._offline)
        if listener is not None:
            for directory in already:
                listener(directory)

    def report(self, directory: str, what: str, error: BaseException) -> bool:
        """An I/O ``error`` met doing ``what`` in log directory ``directory``: mark the
        directory offline if the error says it failed (``is_log_dir_failure``); True when
        this report took it offline."""
        if not is_log_dir_failure(error):
            return False
        return self.maybe_add_offline_log_dir(directory, f"error while {what} in dir {directory}: {error}")

    def maybe_add_offline_log_dir(self, directory: str, message: str) -> bool:
        """Kafka's ``maybeAddOfflineLogDir``: True the first time ``directory`` is added."""
        with self._lock:
            if directory in self._offline:
                return False
            self._offline[directory] = message
            listener = self._listener
        log.error("log directory %s failed: %s", directory, message)
        if listener is not None:
            listener(directory)
        return True

    def has_offline_log_dir(self, directory: str) -> bool:
        return directory in self._offline

    @property
    def offline_log_dirs(self) -> list[str]:
        with self._lock:
            return list(self._offline)
