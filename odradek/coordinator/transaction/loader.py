"""Loading a shard: replay a ``__transaction_state`` partition from its log start to its end.

A coordinator takes up a partition this way after a restart or when it becomes its leader;
until it is done, requests for its transactional ids answer COORDINATOR_LOAD_IN_PROGRESS.
Later records of an id replace earlier ones; a tombstone forgets the id. A record that does
not decode is logged and skipped. Transactions found in PrepareCommit or PrepareAbort still
have markers to write: the runtime sends them once the shard is loaded (``preparing``); those
found Ongoing wait for their producer, or their timeout.

The reading (whole batches, ``READ_BYTES`` at a time) is ``coordinator.log_replay``'s.
Plain synchronous code over a ``Log``: the runtime runs it in a worker thread on a shard no
request can see yet.
"""

from __future__ import annotations

import logging

from odradek.coordinator.log_replay import READ_BYTES, LoadStats, replay_log
from odradek.coordinator.transaction.transaction_log import TransactionLogError, decode_record

log = logging.getLogger("odradek.coordinator.transaction")

__all__ = ["READ_BYTES", "LoadStats", "load_shard"]


def load_shard(shard, plog, end_offset: int | None = None) -> LoadStats:
    """Replay ``plog`` (an ``odradek.storage.log.Log``) up to ``end_offset`` (default: its log
    end offset) into ``shard``. Raises CorruptRecordError if a batch is corrupt."""

    def replay_record(batch, record) -> bool:
        try:
            decoded = decode_record(record.key, record.value)
        except TransactionLogError as e:
            log.warning("%s-%d: skipping record at offset %d: %s", "__transaction_state", shard.partition,
                        record.offset, e)
            return False
        shard.replay(decoded.transactional_id, decoded.transit)
        return True

    return replay_log(plog, replay_record, end_offset=end_offset, read_bytes=READ_BYTES)
