"""Creating many logs with one directory fsync per log directory (`LogCreationBatch`).

A new log's directory entry is made durable by fsyncing its log directory (the parent of
``<topic>-<partition>``). One at a time that is one fsync per log: a LeaderAndIsr giving a
broker 10,000 new partitions spent most of its time there, longer than the controller's
request timeout. Inside ``LogManager.creation_batch()`` (on the creating thread only) the logs
created only note their log directory here, and the batch fsyncs each noted directory once
when it ends, before the caller acknowledges any of them (``replication/state_change.py``
answers LeaderAndIsr only after the batch). Durability is the same as one at a time: no log
is reported created before its directory entry is on disk.

Files the batch's thread writes with ``file_ops.replace_durably`` (the new leaders'
leader-epoch-checkpoints) are made durable with their log directory at the end as well
(``deferred_sync``: one ``syncfs`` per directory instead of two fsyncs per file).

A directory whose sync fails fails the logs created in it by the batch (``failed``): the
manager abandons them and forgets them, as a failed creation of one log does, and reports the
error to the ``LogDirFailureChannel``; logs that existed and were only opened in it are in
``failed`` too (their checkpoint may not be on disk), not forgotten.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

from odradek.storage import deferred_sync
from odradek.storage.checkpoint import TopicPartition


@dataclass
class LogCreationBatch:
    """Logs created in a batch, by log directory, and those whose directory fsync failed
    (with the error)."""

    pending: dict[str, list[TopicPartition]] = field(default_factory=dict)
    touched: dict[str, list[TopicPartition]] = field(default_factory=dict)  # logs that existed
    failed: dict[TopicPartition, OSError] = field(default_factory=dict)

    def add(self, directory: str, tp: TopicPartition) -> None:
        self.pending.setdefault(directory, []).append(tp)

    def touch(self, directory: str, tp: TopicPartition) -> None:
        self.touched.setdefault(directory, []).append(tp)


class LogCreationBatching:
    """The batches of `LogManager` (a part of it: it provides ``_batch`` (a thread-local
    holding the current batch), ``_lock``, ``_logs``, ``_dir_of``, ``_topic_ids``,
    ``all_log_dirs`` and ``failure_channel``)."""

    @contextmanager
    def creation_batch(self) -> Iterator[LogCreationBatch]:
        """Logs created by this thread inside the block share one fsync per log directory,
        done when the block ends (``log_creation_batch``); the batch's ``failed`` then holds
        those whose directory fsync failed, abandoned and forgotten (absent from this manager)."""
        batch = self._batch.current = LogCreationBatch()
        noted: list[str] = []
        try:
            with deferred_sync.deferring() as noted:
                yield batch
        finally:
            self._batch.current = None
            self._sync_batch(batch, noted)

    def _sync_batch(self, batch: LogCreationBatch, noted: list[str]) -> None:
        """Make a batch durable (`sync_written`: its new logs' entries and the files written
        in it); a directory that fails fails the batch's logs in it."""
        failed = self.sync_written(noted, (*batch.pending, *batch.touched), report=False)
        for directory, e in failed.items():
            batch.failed.update((tp, e) for tp in batch.touched.get(directory, ()))
            self._forget_created(directory, batch.pending.get(directory, []), e, batch)

    def sync_written(self, noted: list[str], dirs=(), report: bool = True) -> dict[str, OSError]:
        """Make durable the paths ``deferred_sync.deferring`` noted (checkpoints written in
        the partition directories) and the log directories ``dirs`` (entries created in
        them): one sync per log directory. The log directories whose sync failed, with the
        error (reported to the ``LogDirFailureChannel`` when ``report``)."""
        by_dir: dict[str, list[str]] = {os.path.abspath(d): [] for d in dirs}
        elsewhere = []
        for path in noted:
            full = os.path.abspath(path)
            inside = next((d for d in (*by_dir, *self.all_log_dirs) if full.startswith(d + os.sep)), None)
            (by_dir.setdefault(inside, []) if inside is not None else elsewhere).append(path)
        failed = {}
        for directory, paths in by_dir.items():
            try:
                deferred_sync.sync_paths(paths + [directory])
            except OSError as e:
                failed[directory] = e
                if report:
                    self.failure_channel.report(directory, f"syncing {len(paths)} file(s)", e)
        for path in elsewhere:  # none expected: written by this thread outside the logs
            deferred_sync.sync_paths([path])
        return failed

    def _forget_created(self, directory: str, created: list[TopicPartition], error: OSError,
                        batch: LogCreationBatch) -> None:
        """A batch's logs whose directory could not be fsynced: abandoned, as one failed
        creation (their directories are moved away by the next attempt)."""
        with self._lock:
            for tp in created:
                log = self._logs.pop(tp, None)
                self._dir_of.pop(tp, None)
                self._topic_ids.pop(tp, None)
                if log is not None:
                    log.abandon()
                batch.failed[tp] = error
        self.failure_channel.report(directory, f"creating {len(created)} log(s)", error)
