"""The fetch half of ShareFetch: read the log of each share-partition and acquire records,
waiting up to MaxWaitMs while nothing can be acquired (Kafka 4.2's DelayedShareFetch and
SharePartitionManager.fetchMessages).

For each wanted share-partition in turn (``ShareFetchTarget``s, led here and initialized):
read whole batches from ``SharePartition.next_fetch_offset()`` up to the high watermark (the
last stable offset with share.isolation.level read_committed, with the aborted transactions
of the range read), with the log read Fetch uses (``Log.read``: a file region, sent as it lies
on disk, never re-encoded), then ``SharePartition.acquire`` the AVAILABLE records in those
batches for the member. The region answered is cut to the batches holding acquired offsets
(whole batches always; AcquiredRecords says which offsets of them the member holds).

Limits: MaxRecords over the whole request (a soft limit: acquisition takes whole log batches
of new records, as Kafka's batch_optimized mode); MaxBytes over the whole request, except that
the first partition with data gets at least one whole batch; BatchSize is only a hint in
Kafka and is not used here.

Waiting: while nothing was acquired and MaxWaitMs has not passed, wait for an append to one
of the partitions (``ReplicaManager.wait_for_appends``, as a waiting Fetch) or for records
released in one of the share-partitions (``SharePartitionManager.wait_for_release``: an
acknowledgement, a lock expiry, a closed session), then try again. Once anything is acquired
the fetch answers (holding acquired records while waiting for MinBytes would only keep them
from other members).
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

from odradek.protocol.generated.error_codes import ErrorCode
from odradek.replication.transactions import aborted_transactions, fetched_upper_bound
from odradek.server.share.share_partition import SharePartition
from odradek.server.share.share_partition_manager import ShareKey, SharePartitionManager
from odradek.server.share.share_types import AcquiredRecords
from odradek.storage.errors import OffsetOutOfRangeError
from odradek.storage.file_records import iter_headers
from odradek.storage.file_region import EMPTY_REGION, FileRegion

__all__ = ["ShareFetchTarget", "ShareFetchLimits", "fetch_and_acquire"]


@dataclass(slots=True)
class ShareFetchTarget:
    """One share-partition to fetch: ``part`` the led partition, ``sp`` its share-partition.
    Filled by the fetch: ``records`` and ``acquired``, or ``error``."""

    key: ShareKey
    topic: str
    part: object
    sp: SharePartition
    records: FileRegion = EMPTY_REGION
    acquired: list[AcquiredRecords] = field(default_factory=list)
    error: ErrorCode = ErrorCode.NONE


@dataclass(frozen=True, slots=True)
class ShareFetchLimits:
    max_wait_ms: int
    max_bytes: int
    max_records: int
    read_committed: bool = False


async def fetch_and_acquire(manager: SharePartitionManager, replica_manager, loop_time, member_id: str,
                            targets: list[ShareFetchTarget], limits: ShareFetchLimits) -> None:
    """Fill ``targets`` (module docstring), waiting at most ``limits.max_wait_ms``."""
    if not targets:
        return
    deadline = loop_time() + limits.max_wait_ms / 1000
    log_keys = [(t.topic, t.key[2]) for t in targets]
    share_keys = [t.key for t in targets]
    while True:
        if _acquire_all(member_id, targets, limits) or any(t.error for t in targets):
            return
        remaining = deadline - loop_time()
        if remaining <= 0 or manager.broker.stopping:
            return
        waits = [asyncio.ensure_future(replica_manager.wait_for_appends(log_keys, remaining)),
                 asyncio.ensure_future(manager.wait_for_release(share_keys, remaining))]
        try:
            await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for w in waits:
                w.cancel()
            await asyncio.gather(*waits, return_exceptions=True)


def _acquire_all(member_id: str, targets: list[ShareFetchTarget], limits: ShareFetchLimits) -> int:
    """One pass over ``targets``; the records acquired in it."""
    records_left = limits.max_records
    bytes_left = limits.max_bytes
    taken = 0
    for t in targets:
        if records_left <= 0:
            break
        if t.error or t.acquired or not t.sp.can_acquire_records():
            continue
        _acquire_one(member_id, t, records_left, max(bytes_left, 0), taken == 0, limits.read_committed)
        count = sum(a.last_offset - a.first_offset + 1 for a in t.acquired)
        taken += count
        records_left -= count
        bytes_left -= len(t.records)
    return taken


def _acquire_one(member_id: str, t: ShareFetchTarget, max_records: int, max_bytes: int, first: bool,
                 read_committed: bool) -> None:
    part, sp = t.part, t.sp
    if part.log_start_offset > sp.start_offset:
        sp.update_log_start_offset(part.log_start_offset)
    limit = part.last_stable_offset() if read_committed else part.high_watermark
    offset = sp.next_fetch_offset()
    if offset >= limit:
        return
    try:
        region = part.log.read(offset, max_bytes, max_offset=limit, min_one=first)
    except OffsetOutOfRangeError:  # retention moved the log start meanwhile: next time
        return
    if not len(region):
        return
    batches = _headers_to_acquire(region, max(sp.end_offset + 1, offset) + max_records)
    aborted = None
    if read_committed:
        upper = fetched_upper_bound(part.log, region, limit)
        aborted = [(a.producer_id, a.first_offset) for a in aborted_transactions(part.log, offset, upper)]
    acquired = sp.acquire(member_id, [h for _, h in batches], max_records, aborted)
    if acquired:
        t.acquired = acquired
        t.records = _cut(region, batches, acquired[0].first_offset, acquired[-1].last_offset)


def _headers_to_acquire(region: FileRegion, stop_at: int) -> list:
    """``(position, header)`` of the region's batches, up to the first one reaching
    ``stop_at``: the in-flight window's end plus MaxRecords, past which an acquisition
    never takes anything. A read spans up to MaxBytes (megabytes of one-record batches on a
    backlogged partition), and parsing every header of it on each ShareFetch cost more than
    the fetch itself."""
    batches = []
    for pos, header in iter_headers(region.file, region.position, region.position + region.length):
        batches.append((pos, header))
        if header.last_offset >= stop_at:
            break
    return batches


def _cut(region: FileRegion, batches: list, first: int, last: int) -> FileRegion:
    """The whole batches of ``region`` holding offsets ``first``..``last``."""
    start = stop = None
    base = region.first_offset
    for pos, h in batches:
        if start is None and h.last_offset >= first:
            start, base = pos, h.base_offset
        if start is not None:
            stop = pos + h.size
            if h.last_offset >= last:
                break
    if start is None:
        return EMPTY_REGION
    return FileRegion(region.file, start, stop - start, base)
