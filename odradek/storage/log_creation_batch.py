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

from dataclasses import dataclass, field

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
