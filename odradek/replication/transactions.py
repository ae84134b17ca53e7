"""Transactions on the partition side: the last stable offset, transaction markers, and the
aborted transaction index kept in step with the producer state.

- **Last stable offset** (LSO, ``last_stable_offset``): min(first unstable offset, high
  watermark). The first unstable offset is the first offset of the oldest transaction not
  yet decided (or decided by a marker not yet below the high watermark), from
  ``ProducerStateManager.first_unstable_offset``. ``read_committed`` consumers read below it.
- **Markers** (``write_marker``, for WriteTxnMarkers): checked against the producer's epoch and
  coordinator epoch (``check_marker``), built as a control batch
  (``records/control.build_end_txn_marker_batch``) and appended with
  ``Partition.append_as_coordinator``, whose producer-state update ends the transaction.
- **Aborted transaction index**: every transaction an ABORT marker completes, wherever the
  marker was appended (leader: ``after_coordinator_append``; follower:
  ``follower_append``; recovery: ``rebuild_producer_state``), goes to the ``.txnindex`` of the
  segment holding the marker (``index_completed``), with the LSO at that moment. A
  ``read_committed`` fetch collects the entries overlapping its range
  (``aborted_transactions``): from the segment holding the fetch offset on, until an entry's
  LSO reaches the range's end (Kafka's ``collectAbortedTransactions``).
"""

from __future__ import annotations

import logging

from odradek.coordinator.producer_entry import CompletedTxn
from odradek.protocol.generated.error_codes import ErrorCode
from odradek.records import batch as rb
from odradek.records.control import ABORT, COMMIT, EndTransactionMarker, build_end_txn_marker_batch
from odradek.records.errors import CorruptRecordError
from odradek.records.reader import RecordBatch
from odradek.replication.produce_validation import ProduceError
from odradek.storage.file_records import iter_bounds
from odradek.storage.transaction_index import AbortedTxn, collect_aborted, segment_holding

log = logging.getLogger("odradek.replication")


def last_stable_offset(part) -> int:
    """min(first unstable offset, high watermark) of ``part`` (a ``Partition``); the first
    unstable offset is never below the log start offset (Kafka's
    ``maybeIncrementFirstUnstableOffset``: DeleteRecords or retention may remove the start
    of an open transaction)."""
    hw = part.high_watermark
    first = part.producer_state.first_unstable_offset(hw)
    if first is None:
        return hw
    return min(max(first, part.log_start_offset), hw)


def cleanable_limit(part) -> int:
    """The offset the log cleaner must not clean at or past (Kafka cleans only below the
    LSO, so an undecided transaction is never compacted): the LSO from attribute reads only,
    so the cleaner thread may call it (``Log.cleanable_limit``)."""
    hw = part.high_watermark
    first = part.producer_state.cached_first_unstable_offset
    return hw if first is None or first > hw else first


# --- markers --------------------------------------------------------------------------------

def write_marker(part, producer_id: int, producer_epoch: int, coordinator_epoch: int, commit: bool,
                 now_ms: int):
    """Append a COMMIT or ABORT marker for ``producer_id`` to ``part`` (its leader); the
    ``ProduceResult``. Raises ProduceError: INVALID_PRODUCER_EPOCH (an older producer epoch),
    TRANSACTION_COORDINATOR_FENCED (an older coordinator epoch), or the append's errors."""
    verdict = part.producer_state.check_marker(producer_id, producer_epoch, coordinator_epoch)
    if not verdict.ok:
        raise ProduceError(verdict.error, verdict.message or verdict.error.name)
    batch = build_end_txn_marker_batch(COMMIT if commit else ABORT, coordinator_epoch,
                                       producer_id=producer_id, producer_epoch=producer_epoch,
                                       timestamp=now_ms)
    return part.append_as_coordinator(batch, now_ms)


def check_coordinator_batch(part, header: rb.BatchHeader) -> None:
    """Contract 3: a coordinator-built batch with a producer id is fenced by epoch and by
    the transaction rules, never by sequence. Raises ProduceError."""
    if header.producer_id < 0:
        return
    verdict = part.producer_state.check(header, coordinator=True)
    if not verdict.ok:
        raise ProduceError(verdict.error if not verdict.is_duplicate else ErrorCode.INVALID_RECORD,
                           verdict.message or verdict.error.name)


def after_coordinator_append(part, buf, header: rb.BatchHeader, first_offset: int, append_time: int) -> None:
    """The producer state (and the aborted transaction index) after a coordinator's append
    of the batch ``header`` now at ``first_offset`` in ``buf``."""
    marker = marker_in(buf, 0, header) if header.is_control else None
    completed = part.producer_state.update(header, first_offset,
                                           timestamp=append_time if append_time >= 0 else None,
                                           marker=marker)
    if completed is not None:
        index_completed(part.log, completed)


def marker_in(buf, pos: int, header: rb.BatchHeader) -> EndTransactionMarker | None:
    """The end-transaction marker of the control batch at ``pos`` of ``buf``; None when it
    holds none (an empty control batch: its transaction was cleaned away)."""
    try:
        return RecordBatch(buf, pos, header.size).end_txn_marker()
    except (CorruptRecordError, ValueError, IndexError):
        return None


def marker_reader(log):
    """``marker_of(header)`` for ``ProducerStateManager.rebuild``: the marker of a control
    batch of ``log``, read from its segment (markers are rare: one read each)."""
    def marker_of(header: rb.BatchHeader) -> EndTransactionMarker | None:
        region = log.read(header.base_offset, header.size, min_one=True)
        data = region.read() if len(region) else b""
        if len(data) < header.size:
            return None
        return marker_in(data, 0, rb.read_header(data, 0))
    return marker_of


# --- the aborted transaction index ----------------------------------------------------------

def index_completed(plog, completed: CompletedTxn) -> None:
    """Record an aborted transaction in the ``.txnindex`` of the segment holding its marker
    (a committed one needs no entry); a replayed entry already there is not added twice.

    The marker is in the log already: a disk refusing the entry (or an entry out of order,
    which only a damaged file can cause) is logged as an error, not raised. Its data then
    stays visible to read_committed consumers until recovery rebuilds the entry (Kafka
    takes the log directory offline instead)."""
    if not completed.is_aborted:
        return
    segments = plog.segments
    segment = segments[segment_holding(segments, completed.last_offset)]
    try:
        segment.txn_index.append(AbortedTxn(completed.producer_id, completed.first_offset,
                                            completed.last_offset, completed.last_stable_offset))
    except (OSError, ValueError) as e:
        log.error("%s-%d: aborted transaction %s not indexed: %s", plog.topic, plog.partition, completed, e)


def aborted_transactions(log, fetch_offset: int, upper_bound: int) -> list[AbortedTxn]:
    """The aborted transactions with data in ``[fetch_offset, upper_bound)``: searched from
    the segment holding ``fetch_offset`` on, until an entry shows that no later one can
    overlap the range (``transaction_index.collect_aborted``)."""
    return collect_aborted(log.segments, fetch_offset, upper_bound)


def fetched_aborted_transactions(log, fetch_offset: int, region, limit: int) -> list[AbortedTxn]:
    """The aborted transactions a read_committed fetch of ``region`` (read from ``fetch_offset``
    up to the LSO ``limit``) lists: ``aborted_transactions`` up to ``fetched_upper_bound``.

    The search up to ``limit`` comes first: the bounded one is a subset of it (it stops at
    the same entry or an earlier one, and keeps only entries whose data begins below a bound
    at most ``limit``), so when it finds nothing (a log without aborted transactions after
    the fetch offset: every non-transactional topic) the answer is empty without walking the
    region's batch headers for the bound (a pread and a walk per fetch)."""
    if not aborted_transactions(log, fetch_offset, limit):
        return []
    return aborted_transactions(log, fetch_offset, fetched_upper_bound(log, region, limit))


def fetched_upper_bound(plog, region, fallback: int) -> int:
    """The offset after the last batch of ``region`` (a read of ``plog``): the end of the
    range a read_committed fetch lists aborted transactions for, so a consumer far behind
    gets those of the data it is sent, not all of them up to the LSO (Kafka bounds it by the
    fetched bytes too). Walks the batch headers from the offset index's last entry before the
    region's end; ``fallback`` (the LSO) when the segment changed under the read."""
    try:
        segments = plog.segments
        segment = segments[segment_holding(segments, region.first_offset)]
        end = region.position + region.length
        start = region.position
        if segment.log_path == region.file.path:
            start = max(segment.index().offsets.lookup_position(end - 1)[1], start)
        last = None
        for _, _, _, last_offset in iter_bounds(region.file, start, end):
            last = last_offset
    except Exception:  # a swap or deletion under the read: the wider range is still right
        return fallback
    return fallback if last is None else min(last + 1, fallback)


# --- recovery ---------------------------------------------------------------------------------

def rebuild_producer_state(state, log, start_offset: int) -> None:
    """Replay ``log``'s batches from ``start_offset`` into ``state`` (markers decoded), and
    put back in the transaction index the aborted transactions the replay completes."""
    state.rebuild(log.batch_headers(start_offset), marker_of=marker_reader(log),
                  on_complete=lambda completed: index_completed(log, completed))


def update_follower_producers(part, data, headers) -> None:
    """A follower's appended batches ``headers`` (whole batches, in order, from position 0
    of ``data``) replayed into its producer state; aborted transactions indexed."""
    update = part.producer_state.update
    pos = 0
    for header in headers:
        marker = marker_in(data, pos, header) if header.is_control else None
        completed = update(header, marker=marker)
        if completed is not None:
            index_completed(part.log, completed)
        pos += header.size
