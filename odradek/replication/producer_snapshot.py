"""The producer-state snapshot kept next to each log (``producer-state.snapshot``, the
`ProducerStateManager.snapshot` bytes with their CRC): written at a clean stop, read at the
next start so the producer state need not be rebuilt from the whole log.

The log is the truth: a snapshot that is missing, torn (its CRC fails) or beyond the log end
(recovery cut the log below it) is ignored, and the state is rebuilt from the log's batches
from the snapshot's end (or the log start) on.
"""

from __future__ import annotations

import logging
import os

from odradek.coordinator.producer_state import CorruptSnapshotError, ProducerStateManager
from odradek.replication.partition import Partition
from odradek.replication.producer_state_reload import discard_snapshot_file
from odradek.replication.transactions import rebuild_producer_state

log = logging.getLogger("odradek.replication")

PRODUCER_SNAPSHOT = "producer-state.snapshot"


def snapshot_path(part: Partition) -> str:
    return os.path.join(part.log.directory, PRODUCER_SNAPSHOT)


def write_producer_snapshot(part: Partition) -> int:
    """Write the partition's snapshot (a temporary file renamed over the old one); 1 when one
    was written, 0 for an empty log. Not synced: the caller syncs all of them at once. A
    crash before that sync may leave a torn snapshot; its CRC fails at the next start, which
    then ignores it and rebuilds the producer state from the log (the log is the truth)."""
    path = snapshot_path(part)
    if len(part.producer_state) == 0 and part.log.log_end_offset == 0:
        # An empty log: nothing to keep and nothing to rescan at the next start.
        try:
            os.unlink(path)
        except FileNotFoundError:
            pass
        return 0
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(part.producer_state.snapshot())
    os.replace(tmp, path)
    return 1


def restore_producer_state(part: Partition) -> None:
    """Load the snapshot (if any, and not beyond the log end) and replay later batches."""
    state = ProducerStateManager(part.log.log_start_offset)
    try:
        with open(snapshot_path(part), "rb") as f:
            loaded = ProducerStateManager.load(f.read())
        if loaded.map_end_offset <= part.log.log_end_offset:
            state = loaded
        else:  # recovery cut the log below it: a restart after the log regrew must not load it
            discard_snapshot_file(snapshot_path(part), part.log.log_end_offset)
    except FileNotFoundError:
        pass
    except (OSError, CorruptSnapshotError) as e:
        log.warning("ignoring producer snapshot of %s-%d: %s", part.topic, part.index, e)
    start = max(state.map_end_offset, part.log.log_start_offset)
    if start < part.log.log_end_offset:
        rebuild_producer_state(state, part.log, start)
    part.producer_state = state
