"""``replication-offset-checkpoint``: the high watermarks of the partitions of each log directory.

Kafka's ``ReplicaManager`` keeps one such file per log directory, in the format of the other
offset checkpoints (``storage/checkpoint.py``: version 0, the entry count, then one
``topic partition offset`` line each), written atomically every
``replica.high.watermark.checkpoint.interval.ms`` and at shutdown, and read at start-up. The
periodic write and the shutdown's may overlap: each file has one writer at a time
(``file_ops.replace_durably``).

Why it matters with replicas: a leader's high watermark is what it has told consumers and
acks=all producers is committed. A broker that restarts and leads again (or follows, then is
elected) must not answer with a high watermark of zero, nor with its log end offset, which
may hold records no other replica has: it starts from the checkpointed value (never beyond its
log end offset) and moves it up as followers fetch. A partition missing from the file starts
at zero, as in Kafka; a single replica partition's leader moves it to its log end at once.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterable

from odradek.storage.checkpoint import OffsetCheckpointFile
from odradek.storage.errors import CheckpointError

log = logging.getLogger("odradek.replication")

HIGH_WATERMARK_CHECKPOINT = "replication-offset-checkpoint"

TopicPartition = tuple[str, int]


def checkpoint_file(log_dir: str) -> OffsetCheckpointFile:
    return OffsetCheckpointFile(os.path.join(log_dir, HIGH_WATERMARK_CHECKPOINT))


def read_high_watermarks(log_dirs: Iterable[str]) -> dict[TopicPartition, int]:
    """Every log directory's checkpointed high watermarks, together (a partition lives in one
    directory). A malformed file counts as empty, with a warning: those partitions start at 0."""
    out: dict[TopicPartition, int] = {}
    for log_dir in log_dirs:
        try:
            out.update(checkpoint_file(log_dir).read())
        except (CheckpointError, OSError) as e:
            log.warning("ignoring %s: %s", HIGH_WATERMARK_CHECKPOINT, e)
    return out


def initial_high_watermark(checkpointed: int | None, log_start_offset: int, log_end_offset: int) -> int:
    """Where a partition's high watermark starts: the checkpointed one, within the log's
    offsets (Kafka's ``Log.updateHighWatermark`` bounds); 0 or the log start offset unknown."""
    return max(log_start_offset, min(checkpointed or 0, log_end_offset))


def write_high_watermarks(log_dirs: Iterable[str],
                          partitions: Iterable[tuple[TopicPartition, str, int]]) -> dict[str, OSError]:
    """Write each log directory's file from ``(key, log_dir, high_watermark)`` entries
    (taken on the event loop; the writing, with its fsyncs, may run on a worker thread).
    A directory without partitions gets an empty file, so an old one does not linger.
    Returns the directories whose file could not be written, with the error: one failing
    disk does not keep the others' checkpoints from being written."""
    by_dir: dict[str, dict[TopicPartition, int]] = {d: {} for d in log_dirs}
    for key, log_dir, hw in partitions:
        by_dir.setdefault(log_dir, {})[key] = hw
    failures: dict[str, OSError] = {}
    for log_dir, offsets in by_dir.items():
        try:
            checkpoint_file(log_dir).write(offsets)
        except OSError as e:
            failures[log_dir] = e
    return failures
