"""``LogDeletion``: partition logs leaving the broker (a mixin of ``LogManager``, kept apart
because it is one concept: Kafka's ``LogManager.asyncDelete`` and the clean-up after it).

A deleted partition's directory is renamed ``<topic>-<partition>.<uuid>-delete`` at once and
erased ``file.delete.delay.ms`` later (``remove_deleted_dirs``); loading erases such
directories, never loads them. A disk error leaves nothing half done: a rename that failed is
retried (``_unrenamed``) and a checkpoint that could not be written is owed
(``_owed_checkpoints``), both settled before a log of the same name is created there. Data
leaving a log that stays (retention, truncation) is ``log_removal``'s.

It uses the manager's lock, log tables, ``clock``, ``default_config`` and ``checkpoint_dir``;
see ``log_manager`` for the rules.
"""

from __future__ import annotations

import logging
import os
import shutil
import uuid
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor

from odradek.storage.checkpoint import TopicPartition
from odradek.storage.errors import StorageError
from odradek.storage.file_ops import fsync_directory
from odradek.storage.log import Log

logger = logging.getLogger("odradek.storage.log_manager")

DELETE_DIR_SUFFIX = "-delete"
ERASE_THREADS = 4
"""Threads erasing deleted directories at once. Erasing waits on the file system, not the CPU:
each unlink may wait for the journal (ext4's jbd2 commits, which other processes' fsyncs force),
and the waits of several threads overlap: 2,000 directories of five files took 0.9-4.7 s in
one thread and 0.3 s in four here, on a disk shared with other work."""


class LogDeletion:
    """Deleted partitions of ``LogManager``: their logs out of service, their directories
    retired and erased (a mixin: its state is the manager's)."""

    def delete_log(self, topic: str, partition: int) -> bool:
        """Remove one partition (``delete_logs``); return whether its log existed."""
        return self.delete_logs([(topic, partition)]) == 1

    def delete_logs(self, partitions: Iterable[TopicPartition]) -> int:
        """Remove partitions (a deleted topic's); return how many had a log.

        Each log leaves service at once (appends get LogClosedError; the caller stopped
        serving its reads), its directory is renamed ``<name>.<uuid>-delete`` and erased
        after ``file.delete.delay.ms``; then each directory touched is checkpointed once
        without them. A disk error stops none of this half-way (Kafka's ``LogManager.asyncDelete``
        also goes on): a checkpoint that cannot be written is owed (written before a log
        of the same name is created there, so a new topic never inherits a deleted one's
        recovery point or log start offset), and a directory that cannot be renamed is
        renamed again before a log of the same name is created, and by every
        ``remove_deleted`` pass. After a restart the broker hands the names of the topics
        still alive to ``delete_stray_logs``, so nothing a deletion left behind is served.
        """
        removed: list[tuple[Log, str]] = []
        with self._lock:
            for tp in partitions:
                log = self._logs.pop(tp, None)
                if log is None:
                    continue
                self._cleaner_offsets.pop(tp, None)
                self._topic_ids.pop(tp, None)
                removed.append((log, self._dir_of.pop(tp)))
        for log, _ in removed:
            log.abandon()
            self._retire_dir(log.directory, log.config.file_delete_delay_ms, sync=False)
        for parent in {os.path.dirname(log.directory) for log, _ in removed}:
            _sync_renames(parent)
        for directory in {d for _, d in removed}:
            self._checkpoint_or_owe(directory)
        return len(removed)

    def delete_stray_logs(self, is_live: Callable[[str, uuid.UUID | None], bool]) -> list[TopicPartition]:
        """Remove (as ``delete_logs``) every log for which ``is_live(topic, recorded topic
        id or None)`` says its topic was deleted; return them. At start-up: a deletion cut
        short by a crash or a disk error left directories that no metadata names any more
        (Kafka removes such stray logs too)."""
        with self._lock:
            stray = [tp for tp in self._logs if not is_live(tp[0], self._topic_ids.get(tp))]
        if stray:
            logger.warning("removing %d log(s) of deleted topics: %s", len(stray),
                           ", ".join(f"{t}-{p}" for t, p in sorted(stray)))
            self.delete_logs(stray)
        return stray

    def remove_deleted_dirs(self, now_ms: int) -> int:
        """Erase the deleted partition directories whose ``file.delete.delay.ms`` has passed
        (and rename those a failed rename left); cheap, so the broker runs it every few
        seconds, not only at retention passes. How many were erased."""
        with self._lock:
            due = [p for t, p in self._pending_dir_deletes if t <= now_ms]
            self._pending_dir_deletes = [(t, p) for t, p in self._pending_dir_deletes if t > now_ms]
        erase_dirs(due)
        with self._lock:
            unrenamed = list(self._unrenamed)
        for path in unrenamed:
            self._retire_dir(path, 0)
        return len(due)

    def _retire_dir(self, path: str, delay_ms: int, sync: bool = True) -> None:
        """Rename a removed log's directory ``<name>.<uuid>-delete`` (loading erases such
        directories, never loads them); erase it after ``delay_ms``. On failure, remember
        the path: it must not be loaded or reused while it holds the old data. ``sync``:
        make the rename durable now; ``delete_logs`` passes False and syncs each parent
        directory once after all its renames (one fsync, not one per partition: 10,000
        partitions of a deleted topic took ~7 s of fsyncs on one broker)."""
        target = f"{path}.{uuid.uuid4().hex}{DELETE_DIR_SUFFIX}"
        try:
            os.rename(path, target)
        except FileNotFoundError:
            return
        except OSError as exc:
            logger.error("could not rename deleted log %s (will retry): %s", path, exc)
            with self._lock:
                self._unrenamed.add(path)
            return
        with self._lock:
            self._unrenamed.discard(path)
            self._pending_dir_deletes.append((self.clock.milliseconds() + delay_ms, target))
        if sync:
            _sync_renames(os.path.dirname(path))

    def _checkpoint_or_owe(self, directory: str) -> None:
        try:
            self.checkpoint_dir(directory)
        except OSError as exc:
            logger.warning("checkpoint of %s after deleting logs failed (owed): %s", directory, exc)
            with self._lock:
                self._owed_checkpoints.add(directory)

    def _clear_leftovers(self, directory: str, path: str) -> None:
        """Before a new log is created at ``path``: rename away a deleted log's directory
        still there, and write the checkpoint its deletion owes (OSError if impossible:
        the new log must not start from the deleted one's checkpointed offsets)."""
        if path in self._unrenamed or os.path.exists(path):
            self._retire_dir(path, self.default_config.file_delete_delay_ms)
            if os.path.exists(path):
                raise StorageError(f"{path} holds a deleted log that cannot be moved away")
        if directory in self._owed_checkpoints:
            self.checkpoint_dir(directory)


def _sync_renames(directory: str) -> None:
    """Make the renames in ``directory`` durable (one fsync of the directory)."""
    try:
        fsync_directory(directory)
    except OSError as exc:  # renamed; should a crash undo it, start-up's stray check removes it
        logger.warning("could not sync %s after deleting logs: %s", directory, exc)


def erase_dirs(paths: list[str]) -> None:
    """Erase the directories ``paths`` (errors ignored: a directory left is erased at the next
    start-up, which never loads a ``-delete`` directory), several at a time (`ERASE_THREADS`)."""
    if len(paths) <= 1:
        for path in paths:
            shutil.rmtree(path, ignore_errors=True)
        return
    with ThreadPoolExecutor(min(ERASE_THREADS, len(paths)), thread_name_prefix="log-erase") as pool:
        for _ in pool.map(lambda path: shutil.rmtree(path, ignore_errors=True), paths):
            pass
