"""Loading a shard: replay a ``__consumer_offsets`` partition from its log start to its end.

This is how a coordinator takes up a partition, after a restart or when it becomes its
leader (Kafka's documentation, 'Consumer Offset Tracking': until it is done, requests for its
groups get COORDINATOR_LOAD_IN_PROGRESS).
It reads whole batches, ``READ_BYTES`` at a time (``coordinator.log_replay``), decodes each
record's key and value and replays it into the shard: later records overwrite earlier ones,
tombstones delete.
Transactions (TxnOffsetCommit) replay as they happened: the records of a transactional batch
are replayed with its producer id (pending offsets), and a control batch's end-transaction
marker ends that producer's transaction on this partition (COMMIT: its pending offsets become
committed; ABORT: dropped), so pending offsets survive a coordinator move through this replay
alone. Control records that are not transaction markers are skipped. A record that does
not decode is logged and skipped, so one bad record cannot keep a coordinator from starting;
record types of newer Kafka group protocols are skipped silently.

Plain synchronous code over a ``Log``: the runtime runs it in a worker thread on a shard no
request can see yet.
"""

from __future__ import annotations

import logging

from odradek.coordinator.group.coordinator_record import (
    CoordinatorRecordError,
    decode_record,
)
from odradek.coordinator.log_replay import READ_BYTES, LoadStats, replay_log
from odradek.records.errors import CorruptRecordError

log = logging.getLogger("odradek.coordinator.group")

NO_PRODUCER_ID = -1


def load_shard(shard, plog, end_offset: int | None = None) -> LoadStats:
    """Replay ``plog`` (an ``odradek.storage.log.Log``) up to ``end_offset`` (default: its log
    end offset) into ``shard``. Raises CorruptRecordError if a batch is corrupt."""

    def replay_record(batch, record) -> bool:
        return _replay_one(shard, record, batch.producer_id if batch.is_transactional else NO_PRODUCER_ID)

    return replay_log(plog, replay_record, lambda batch: _replay_marker(shard, batch), end_offset, READ_BYTES)


def _replay_marker(shard, batch) -> None:
    """End the transaction a control batch's marker ends (other control records: skipped)."""
    try:
        marker = batch.end_txn_marker()
    except CorruptRecordError as e:
        log.warning("partition %d: skipping control batch at offset %d: %s", shard.partition, batch.base_offset, e)
        return
    shard.replay_end_transaction(batch.producer_id, marker.committed)


def _replay_one(shard, record, producer_id: int = NO_PRODUCER_ID) -> bool:
    try:
        decoded = decode_record(record.key, record.value)
    except CoordinatorRecordError as e:
        log.warning("partition %d: skipping record at offset %d: %s", shard.partition, record.offset, e)
        return False
    if decoded is None:
        return False
    shard.replay(decoded, producer_id, record.offset)
    return True


__all__ = ["READ_BYTES", "CorruptRecordError", "LoadStats", "load_shard"]
