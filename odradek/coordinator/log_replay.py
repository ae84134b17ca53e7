"""Replaying a coordinator state partition's log, batch by batch: the reading both loaders share.

A coordinator (group or transaction) takes up a partition by replaying its log from the log
start offset to its end into a fresh shard (the loaders, ``group.loader`` and
``transaction.loader``, say what a record means). ``replay_log`` does the reading: whole
batches, ``read_bytes`` at a time (at least one batch per read), each batch and record once,
in offset order. A batch whose start lies below the read position (the compacted-away prefix
of the batch holding it) has its records below that position skipped.

Plain synchronous code over a ``Log``; raises CorruptRecordError if a batch is corrupt.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from odradek.records.reader import iter_batches

READ_BYTES = 1 << 20


@dataclass(frozen=True, slots=True)
class LoadStats:
    """What a replay did: the offsets it covered (``end_offset``: the next offset it would
    read) and how many records it replayed or skipped (undecodable, or of no interest)."""

    start_offset: int
    end_offset: int
    records: int
    skipped: int


def replay_log(plog, replay_record: Callable[[object, object], bool],
               replay_control: Callable[[object], None] | None = None, end_offset: int | None = None,
               read_bytes: int = READ_BYTES) -> LoadStats:
    """Read ``plog`` (an ``odradek.storage.log.Log``) up to ``end_offset`` (default: its log
    end offset). Each record of a data batch goes to ``replay_record(batch, record)``, which
    answers whether it was replayed (else it counts as skipped); each control batch goes to
    ``replay_control(batch)`` (ignored when None)."""
    start = offset = plog.log_start_offset
    end = plog.log_end_offset if end_offset is None else end_offset
    replayed = skipped = 0
    while offset < end:
        data = plog.read(offset, read_bytes, max_offset=end, min_one=True).read()
        if not data:
            break
        for batch in iter_batches(data):
            if batch.next_offset <= offset:
                continue  # compacted-away prefix of the batch holding ``offset``
            if batch.is_control:
                if replay_control is not None:
                    replay_control(batch)
            else:
                for record in batch.records():
                    if record.offset < offset:
                        continue
                    if replay_record(batch, record):
                        replayed += 1
                    else:
                        skipped += 1
            offset = batch.next_offset
    return LoadStats(start, offset, replayed, skipped)
