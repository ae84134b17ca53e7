"""The producer state of a partition whose log was truncated: rebuilt from a snapshot and the
log, as Kafka's ``UnifiedLog.truncateTo`` -> ``rebuildProducerState`` does.

A follower truncates where ``replication/truncation.py`` says (``ReplicaManager.truncate_to``);
a deposed leader becoming follower cuts batches it appended alone. What each producer's entry
was at the new log end (epoch, last 5 batches, open transaction, coordinator epoch) may lie
further back than anything the entry still holds, so it is not patched but rebuilt:

1. ``ProducerStateManager.reloaded``: the latest in-memory snapshot at or below the new end
   (``coordinator/producer_snapshot.SnapshotList``; snapshots above it are deleted), or an
   empty state at the log start offset when there is none;
2. the log's batches from the snapshot's offset to the new end replayed into it with the
   recovery path of a restart (``transactions.rebuild_producer_state``: headers only, plus
   the marker of each control batch; aborted transactions already in the ``.txnindex`` are
   not added twice);
3. the new state replaces the old one in one assignment;
4. the snapshot file a clean stop wrote (``producer-state.snapshot``) is deleted when it lies
   above the new end: a restart would otherwise load the state of batches no longer there
   once the log grew past its offset again.

Example: a producer's transaction begins at offset 0 and its batches fill offsets 0-5 (its
entry caches the batches at 1-5 only); the log is cut to 1. The snapshot at 0 (empty) plus
the replay of the batch at 0 give the producer back with that batch cached and its
transaction open at 0, so the last stable offset stays at 0.

``reset_producer_state`` is Kafka's ``truncateFullyAndStartAt``: the log emptied and restarted
at an offset, no producer and no snapshot survive.
"""

from __future__ import annotations

import logging
import os

from odradek.coordinator.producer_snapshot import (
    MAP_END_PREFIX_SIZE,
    CorruptSnapshotError,
    map_end_offset_of,
)
from odradek.coordinator.producer_state import ProducerStateManager
from odradek.replication.transactions import rebuild_producer_state

log = logging.getLogger("odradek.replication")


def reload_producer_state(part, snapshot_path: str) -> None:
    """Rebuild ``part``'s producer state (a ``Partition``) for its log, just truncated, and
    delete the snapshot file at ``snapshot_path`` when it lies above the new log end (any,
    when the log is empty)."""
    plog = part.log
    end = plog.log_end_offset
    state, replay_from = part.producer_state.reloaded(end, plog.log_start_offset)
    if replay_from < end:
        rebuild_producer_state(state, plog, replay_from)
    if state.map_end_offset < end:  # cut in a gap of a compacted segment: past its last batch
        state.advance(end)
    part.producer_state = state
    discard_snapshot_file(snapshot_path, end if end > plog.log_start_offset else None)


def reset_producer_state(part, offset: int, snapshot_path: str) -> None:
    """``part``'s log was emptied and restarts at ``offset``: an empty producer state there,
    the snapshot file deleted."""
    part.producer_state = ProducerStateManager(offset)
    discard_snapshot_file(snapshot_path, None)


def discard_snapshot_file(path: str, keep_at_or_below: int | None) -> None:
    """Delete the snapshot file ``path`` unless its ``map_end_offset`` is at or below
    ``keep_at_or_below`` (None: delete it whatever it holds). One whose header is not a
    snapshot's goes too (a restart would ignore it). A failed deletion is logged: the next
    clean stop overwrites the file."""
    if keep_at_or_below is not None:
        try:
            with open(path, "rb") as f:
                header = f.read(MAP_END_PREFIX_SIZE)
        except FileNotFoundError:
            return
        except OSError as e:
            log.error("could not read producer snapshot %s: %s", path, e)
            header = b""
        try:
            if map_end_offset_of(header) <= keep_at_or_below:
                return
        except CorruptSnapshotError:
            pass
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass
    except OSError as e:
        log.error("could not delete producer snapshot %s above offset %s: %s", path, keep_at_or_below, e)
