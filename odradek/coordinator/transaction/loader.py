"""Loading a shard: replay a ``__transaction_state`` partition from its log start to its end.

A coordinator takes up a partition this way after a restart or when it becomes its leader;
until it is done, requests for its transactional ids answer COORDINATOR_LOAD_IN_PROGRESS.
Later records of an id replace earlier ones; a tombstone forgets the id. A record that does
not decode is logged and skipped. Transactions found in PrepareCommit or PrepareAbort still
have markers to write: the runtime sends them once the shard is loaded (``preparing``); those
found Ongoing wait for their producer, or their timeout.

Plain synchronous code over a ``Log``: the runtime runs it in a worker thread on a shard no
request can see yet.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from odradek.coordinator.transaction.transaction_log import TransactionLogError, decode_record
from odradek.records.reader import iter_batches

log = logging.getLogger("odradek.coordinator.transaction")

READ_BYTES = 1 << 20


@dataclass(frozen=True, slots=True)
class LoadStats:
    start_offset: int
    end_offset: int
    records: int
    skipped: int


def load_shard(shard, plog, end_offset: int | None = None) -> LoadStats:
    """Replay ``plog`` (an ``odradek.storage.log.Log``) up to ``end_offset`` (default: its log
    end offset) into ``shard``. Raises CorruptRecordError if a batch is corrupt."""
    start = offset = plog.log_start_offset
    end = plog.log_end_offset if end_offset is None else end_offset
    replayed = skipped = 0
    while offset < end:
        data = plog.read(offset, READ_BYTES, max_offset=end, min_one=True).read()
        if not data:
            break
        for batch in iter_batches(data):
            if batch.next_offset <= offset:
                continue
            if not batch.is_control:
                for record in batch.records():
                    if record.offset < offset:
                        continue
                    try:
                        decoded = decode_record(record.key, record.value)
                    except TransactionLogError as e:
                        log.warning("%s-%d: skipping record at offset %d: %s", "__transaction_state",
                                    shard.partition, record.offset, e)
                        skipped += 1
                        continue
                    shard.replay(decoded.transactional_id, decoded.transit)
                    replayed += 1
            offset = batch.next_offset
    return LoadStats(start, offset, replayed, skipped)
