"""Idempotent-producer state of one partition: who wrote what, so retries are not appended twice.

An idempotent producer stamps every v2 batch with ``producer_id``, ``producer_epoch`` and
``base_sequence`` (the sequence number of its first record; each partition's sequences start at
0 and wrap from Int32.MaxValue back to 0). The last sequence of a batch is ``base_sequence +
last_offset_delta`` with the same wraparound (Kafka uses the offset delta, not the record
count, so both agree for any valid batch). Per producer id the partition keeps its epoch and
the metadata of its last ``NUM_BATCHES_TO_RETAIN`` (5) batches: a producer has at most 5
requests in flight per partition, so a retry is always one of the last 5 batches.

Rules for a client batch with ``producer_id >= 0`` (``check``; Kafka ≥ 2.4 behaviour):

* epoch below the stored epoch → ``INVALID_PRODUCER_EPOCH`` (47), what produce returns since
  KIP-588 and what librdkafka expects on the data path;
* epoch above the stored epoch → the sequence must be 0, else ``OUT_OF_ORDER_SEQUENCE_NUMBER``
  (45); appending the batch then resets the producer's cached batches;
* same epoch, (first seq, last seq) equal to one of the cached batches → duplicate: nothing is
  appended and the produce response carries the original batch's base offset, no error;
* same epoch otherwise → the base sequence must follow the last cached one (``last + 1``,
  wrapping; 0 when nothing is cached), else ``OUT_OF_ORDER_SEQUENCE_NUMBER``;
* unknown producer id → accepted with any sequence. Brokers before 2.4 answered
  ``UNKNOWN_PRODUCER_ID`` (59) when the sequence was not 0, but the state of a live producer
  may be gone legitimately (retention deleted its batches, or ``producer.id.expiration.ms``
  expired it), and since KIP-360 brokers accept and start tracking it. We do the same.
* a negative epoch or sequence next to a producer id → ``INVALID_RECORD`` (87): Kafka's
  validator refuses such client batches too.

Transactions (Kafka ≥ 2.x without KIP-890 verification; ``CompletedTxn`` in
``producer_entry``):

* a transactional batch with a valid epoch and sequence opens the producer's transaction at
  its first offset, or continues the open one;
* a non-transactional batch from a producer whose transaction is open → ``INVALID_TXN_STATE``
  (48), checked after the sequence rules, as Kafka orders them;
* a control batch (COMMIT or ABORT marker) is checked for fencing only: an older producer
  epoch → ``INVALID_PRODUCER_EPOCH``; through ``check_marker`` (WriteTxnMarkers) also a
  coordinator epoch below the producer's newest → ``TRANSACTION_COORDINATOR_FENCED`` (52).
  Appended, it ends the open transaction (``update`` returns the ``CompletedTxn``, None when
  no transaction was open), takes the marker's producer epoch and coordinator epoch;
* batches a coordinator of this broker builds (``coordinator=True``: TxnOffsetCommit's
  offsets) get the fencing and transaction checks but no sequence check (base sequence -1);
* the first unstable offset is the smallest first offset of the open transactions and of the
  completed ones whose marker is not yet below the high watermark (Kafka keeps those
  "unreplicated" too, so the LSO never passes a marker a new leader might not have).

``check`` never changes state; the partition calls ``update`` only after the append succeeded,
so a failed append leaves state as it was. A Produce request (v3+) carries one batch per
partition, so check, append and update run once per batch. ``update`` applies a batch exactly
as the log holds it (followers and recovery use it unchecked): the epoch becomes the batch's
epoch, and a change of epoch drops the cached batches.

Snapshots (``snapshot``/``load``) are in ``producer_snapshot``; the log writes one at a clean
shutdown and, on restart, loads it and calls ``rebuild`` with the batches from its
``map_end_offset`` on (markers decoded, so aborted transactions go back to the transaction
index, ``replication/transactions.py``).

Truncation (Kafka's ``UnifiedLog.truncateTo`` -> ``rebuildProducerState``): the state of a log
cut to ``offset`` is rebuilt, never patched, since what a producer's entry was at ``offset``
(its epoch, its last 5 batches, its open transaction, its coordinator epoch) may lie further
back than its cached batches: ``reloaded`` takes the latest in-memory snapshot at or below
``offset`` (``producer_snapshot.SnapshotList``, one taken every
``SNAPSHOT_INTERVAL_BATCHES`` batches applied, when loading, and kept by the high watermark)
and the caller replays the log's batch headers from its offset to ``offset`` with
``rebuild`` (``replication/producer_state_reload.py``). So a transaction whose marker was cut
is open again, and a producer whose batches were all cut is known as it was before them.
"""

from __future__ import annotations

from dataclasses import dataclass
from types import MappingProxyType
from typing import Callable, Iterable, Mapping

from odradek.coordinator.producer_entry import (
    NO_COORDINATOR_EPOCH,
    NUM_BATCHES_TO_RETAIN,
    BatchMetadata,
    CompletedTxn,
    ProducerEntry,
)
from odradek.coordinator.producer_snapshot import (
    SNAPSHOT_VERSION,
    CorruptSnapshotError,
    SnapshotList,
    decode as _decode_snapshot,
    encode as _encode_snapshot,
)
from odradek.protocol.generated.error_codes import ErrorCode
from odradek.records.batch import BatchHeader
from odradek.records.control import ABORT, EndTransactionMarker

__all__ = [
    "NUM_BATCHES_TO_RETAIN", "SEQUENCE_MODULUS", "DEFAULT_PRODUCER_ID_EXPIRATION_MS", "SNAPSHOT_VERSION",
    "SNAPSHOT_INTERVAL_BATCHES",
    "BatchMetadata", "CheckResult", "CompletedTxn", "CorruptSnapshotError", "ProducerEntry",
    "ProducerStateManager", "increment_sequence",
]

# Sequences are non-negative Int32 values: 0 .. 2**31 - 1, after which they wrap to 0.
SEQUENCE_MODULUS = 1 << 31
# Kafka's producer.id.expiration.ms default: one day.
DEFAULT_PRODUCER_ID_EXPIRATION_MS = 86_400_000
# Completed transactions kept for the first unstable offset until the high watermark passes
# their marker: at most this many (a follower nobody asks for its LSO prunes only on its
# high watermark updates; the oldest are surely replicated by then).
_MAX_UNREPLICATED = 10_000
# Batches applied (``update``, ``advance``) between two in-memory snapshots: a truncation's
# replay reads at most about this many batch headers past the snapshot it starts from (Kafka
# snapshots at each segment roll, up to segment.bytes of replay). A snapshot copies the
# entries dict: ~2 ms for 100,000 producers, ~2 us per batch over the interval.
SNAPSHOT_INTERVAL_BATCHES = 1024


def increment_sequence(sequence: int, increment: int) -> int:
    """``sequence + increment`` on the wrapping sequence space (Int32.MaxValue + 1 is 0)."""
    return (sequence + increment) % SEQUENCE_MODULUS


@dataclass(frozen=True, slots=True)
class CheckResult:
    """The verdict on a batch: append it (``ok``), skip it (``duplicate``), or refuse it."""

    error: ErrorCode = ErrorCode.NONE
    duplicate: BatchMetadata | None = None
    message: str | None = None

    @property
    def ok(self) -> bool:
        return self.error == ErrorCode.NONE and self.duplicate is None

    @property
    def is_duplicate(self) -> bool:
        return self.duplicate is not None


OK = CheckResult()


def _refuse(error: ErrorCode, message: str) -> CheckResult:
    return CheckResult(error=error, message=message)


class ProducerStateManager:
    """Producer ids, epochs, recent batches and open transactions of one partition; pure
    logic, no I/O.

    Not thread-safe: the partition serialises check, append and update.
    """

    def __init__(self, map_end_offset: int = 0) -> None:
        self._entries: dict[int, ProducerEntry] = {}
        self._map_end_offset = map_end_offset
        # Open transactions: producer id -> first offset (kept equal to the entries' field).
        self._ongoing: dict[int, int] = {}
        # Completed transactions whose marker may still be at or above the high watermark.
        self._unreplicated: list[CompletedTxn] = []
        # The first unstable offset as of the last change (one int: other threads read it).
        self._first_unstable: int | None = None
        self._snapshots = SnapshotList()
        self._since_snapshot = 0  # batches applied since the last snapshot

    @property
    def map_end_offset(self) -> int:
        """The first offset whose batch is not reflected in this state."""
        return self._map_end_offset

    def advance(self, end_offset: int) -> None:
        """The log grew to ``end_offset`` with batches of no producer id (which leave the
        entries as they are): what ``update`` does for each such batch, in one call."""
        self._since_snapshot += 1
        if self._since_snapshot >= SNAPSHOT_INTERVAL_BATCHES:
            self.take_snapshot()
        if end_offset > self._map_end_offset:
            self._map_end_offset = end_offset

    def entries(self) -> Mapping[int, ProducerEntry]:
        """A read-only live view of the state, by producer id."""
        return MappingProxyType(self._entries)

    def entry(self, producer_id: int) -> ProducerEntry | None:
        return self._entries.get(producer_id)

    def __len__(self) -> int:
        return len(self._entries)

    def __repr__(self) -> str:
        return (
            f"ProducerStateManager(producers={len(self._entries)}, "
            f"ongoing={len(self._ongoing)}, map_end_offset={self._map_end_offset})"
        )

    # -- transactions -----------------------------------------------------------------------

    def ongoing_transactions(self) -> Mapping[int, int]:
        """Open transactions: producer id -> first offset (read-only live view)."""
        return MappingProxyType(self._ongoing)

    def in_transaction(self, producer_id: int) -> bool:
        """Whether ``producer_id`` has a transaction open in this partition."""
        return producer_id in self._ongoing

    def first_unstable_offset(self, high_watermark: int | None = None) -> int | None:
        """The first offset of the oldest open transaction, or of a completed one whose
        marker is not below ``high_watermark`` yet (those below it are forgotten here); None
        when there is none. The last stable offset is min(this, high watermark)."""
        if high_watermark is not None:
            self.on_high_watermark(high_watermark)
        return self._first_unstable

    @property
    def cached_first_unstable_offset(self) -> int | None:
        """``first_unstable_offset`` as of the last change of the transactions, without
        forgetting anything: one attribute read, safe from another thread (the cleaner)."""
        return self._first_unstable

    def _refresh_first_unstable(self) -> None:
        first = min(self._ongoing.values(), default=None)
        for txn in self._unreplicated:
            if first is None or txn.first_offset < first:
                first = txn.first_offset
        self._first_unstable = first

    def on_high_watermark(self, high_watermark: int) -> None:
        """Forget the completed transactions whose marker is below ``high_watermark``, and
        the snapshots older than the newest one at or below it."""
        self._snapshots.on_high_watermark(high_watermark)
        if self._unreplicated and self._unreplicated[0].last_offset < high_watermark:
            self._unreplicated = [t for t in self._unreplicated if t.last_offset >= high_watermark]
            self._refresh_first_unstable()

    def check_marker(self, producer_id: int, producer_epoch: int, coordinator_epoch: int) -> CheckResult:
        """Judge a transaction marker (WriteTxnMarkers) before it is built and appended."""
        entry = self._entries.get(producer_id)
        if entry is None:
            return OK
        if producer_epoch < entry.epoch:
            return _refuse(ErrorCode.INVALID_PRODUCER_EPOCH,
                           f"marker of producer {producer_id} with epoch {producer_epoch}, "
                           f"older than its epoch {entry.epoch}")
        if coordinator_epoch < entry.coordinator_epoch:
            return _refuse(ErrorCode.TRANSACTION_COORDINATOR_FENCED,
                           f"marker of producer {producer_id} from coordinator epoch {coordinator_epoch}, "
                           f"older than {entry.coordinator_epoch}")
        return OK

    def _stable_after(self, producer_id: int, marker_offset: int) -> int:
        """Kafka's ``lastStableOffset(completedTxn)``: the first offset of another open
        transaction, else the offset after the marker."""
        others = [first for pid, first in self._ongoing.items() if pid != producer_id]
        return min(others) if others else marker_offset + 1

    # -- the produce path -------------------------------------------------------------------

    def check(self, header: BatchHeader, *, coordinator: bool = False) -> CheckResult:
        """Judge a batch against the state without changing it (rules in the module doc).
        ``coordinator``: built by a coordinator of this broker (no sequence checks)."""
        producer_id, epoch = header.producer_id, header.producer_epoch
        if producer_id < 0:
            return OK
        entry = self._entries.get(producer_id)
        if entry is not None and epoch < entry.epoch:
            return _refuse(
                ErrorCode.INVALID_PRODUCER_EPOCH,
                f"producer {producer_id} epoch {epoch} is older than its epoch {entry.epoch}",
            )
        if header.is_control:
            return OK
        if not coordinator:
            verdict = self._check_sequence(header, entry)
            if verdict is not OK:
                return verdict
        if entry is not None and entry.current_txn_first_offset is not None and not header.is_transactional:
            return _refuse(
                ErrorCode.INVALID_TXN_STATE,
                f"non-transactional batch from producer {producer_id}, whose transaction "
                f"begun at offset {entry.current_txn_first_offset} is open",
            )
        return OK

    def _check_sequence(self, header: BatchHeader, entry: ProducerEntry | None) -> CheckResult:
        producer_id, epoch = header.producer_id, header.producer_epoch
        first_seq = header.base_sequence
        if epoch < 0 or first_seq < 0:
            return _refuse(
                ErrorCode.INVALID_RECORD,
                f"producer {producer_id}: batch epoch {epoch}, base sequence {first_seq}",
            )
        if entry is None:
            return OK
        if epoch > entry.epoch:
            if first_seq == 0:
                return OK
            return _refuse(
                ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER,
                f"producer {producer_id} new epoch {epoch} must start at 0, not {first_seq}",
            )
        last_seq = increment_sequence(first_seq, header.last_offset_delta)
        duplicate = entry.find_duplicate(first_seq, last_seq)
        if duplicate is not None:
            return CheckResult(duplicate=duplicate)
        expected = increment_sequence(entry.last_seq, 1)
        if first_seq != expected:
            return _refuse(
                ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER,
                f"producer {producer_id} epoch {epoch}: expected sequence {expected}, "
                f"got {first_seq}",
            )
        return OK

    def update(
        self, header: BatchHeader, first_offset: int | None = None, *, timestamp: int | None = None,
        marker: EndTransactionMarker | None = None,
    ) -> CompletedTxn | None:
        """Apply a batch the log has just appended; every batch may be passed, idempotent or not.

        ``first_offset`` is the base offset the batch was given (default: the header's);
        ``timestamp`` overrides ``header.max_timestamp`` (pass the broker time for topics with
        LogAppendTime when the header was read before it was patched); ``marker``: the
        decoded marker of a control batch (without it a marker ends the transaction as a
        commit and keeps the coordinator epoch). Returns the transaction a marker completed.
        Unchecked: callers check client batches first; followers and recovery apply what the
        log holds.
        """
        self._since_snapshot += 1
        if self._since_snapshot >= SNAPSHOT_INTERVAL_BATCHES:
            self.take_snapshot()
        base = header.base_offset if first_offset is None else first_offset
        last_offset = base + header.last_offset_delta
        if last_offset + 1 > self._map_end_offset:
            self._map_end_offset = last_offset + 1
        producer_id = header.producer_id
        if producer_id < 0:
            return None
        when = header.max_timestamp if timestamp is None else timestamp
        previous = self._entries.get(producer_id)
        epoch = header.producer_epoch
        batches: tuple[BatchMetadata, ...] = ()
        txn_first_offset = None
        coordinator_epoch = NO_COORDINATOR_EPOCH
        if previous is not None:
            txn_first_offset = previous.current_txn_first_offset
            coordinator_epoch = previous.coordinator_epoch
            if previous.epoch == epoch:
                batches = previous.batches
        completed = None
        if header.is_control:
            if txn_first_offset is not None:  # a commit or abort marker ends the open transaction
                aborted = marker is not None and marker.type == ABORT
                completed = CompletedTxn(producer_id, txn_first_offset, base, aborted,
                                         self._stable_after(producer_id, base))
                self._complete(completed)
                txn_first_offset = None
            if marker is not None:
                coordinator_epoch = marker.coordinator_epoch
        else:
            if header.base_sequence >= 0:
                last_seq = increment_sequence(header.base_sequence, header.last_offset_delta)
                batch = BatchMetadata(header.base_sequence, last_seq, base, last_offset, when)
                batches = (batches + (batch,))[-NUM_BATCHES_TO_RETAIN:]
            if header.is_transactional and txn_first_offset is None:
                txn_first_offset = base
                self._ongoing[producer_id] = base
                self._refresh_first_unstable()
        self._entries[producer_id] = ProducerEntry(
            producer_id, epoch, batches, last_offset, when, txn_first_offset, coordinator_epoch
        )
        return completed

    def _complete(self, completed: CompletedTxn) -> None:
        self._ongoing.pop(completed.producer_id, None)
        unreplicated = self._unreplicated
        unreplicated.append(completed)
        if len(unreplicated) > _MAX_UNREPLICATED:
            del unreplicated[: len(unreplicated) - _MAX_UNREPLICATED]
        self._refresh_first_unstable()

    # -- housekeeping -----------------------------------------------------------------------

    def expire(
        self, now_ms: int, producer_id_expiration_ms: int = DEFAULT_PRODUCER_ID_EXPIRATION_MS
    ) -> list[int]:
        """Forget producers silent for at least ``producer_id_expiration_ms``; return their ids.

        Silence is measured from the max timestamp of the producer's newest batch, as Kafka
        does; producers with an open transaction are kept.
        """
        expired = [
            producer_id
            for producer_id, entry in self._entries.items()
            if entry.current_txn_first_offset is None
            and now_ms - entry.last_timestamp >= producer_id_expiration_ms
        ]
        for producer_id in expired:
            del self._entries[producer_id]
        return sorted(expired)

    # -- truncation and recovery ------------------------------------------------------------

    def reloaded(self, offset: int, log_start_offset: int = 0) -> tuple["ProducerStateManager", int]:
        """The state for the log truncated to end at ``offset`` (Kafka's ``truncateAndReload``),
        as ``(state, replay_from)``: the caller replays the log's batches from
        ``replay_from`` up to ``offset`` into ``state`` with ``rebuild``, then uses ``state``
        in place of this one (a new object unless nothing was cut, so that other threads
        reading ``cached_first_unstable_offset`` never see a half-rebuilt state).

        - Snapshots above ``offset`` are deleted (their batches are gone).
        - ``offset`` at or below ``log_start_offset`` (the log is empty): an empty state
          there, no snapshot (Kafka's ``truncateFullyAndStartAt``).
        - Nothing at or above ``offset`` was applied: this state, no replay.
        - No producer and no unreplicated transaction: none below ``offset`` either (Kafka's
          ``isEmptyBeforeTruncation``): an empty state at ``offset``, no replay.
        - Otherwise the latest snapshot in ``[log_start_offset, offset]`` (none: an empty
          state at ``log_start_offset``, a replay of the whole log); the completed
          transactions kept as unreplicated whose marker is below that snapshot stay so.

        Producers expired since a snapshot come back with it; the next ``expire`` pass
        forgets them again.
        """
        snapshots = self._snapshots
        snapshots.delete_above(offset)
        if offset <= log_start_offset:
            return ProducerStateManager(offset), offset
        if offset >= self._map_end_offset:
            return self, self._map_end_offset
        if not self._entries and not self._unreplicated:
            fresh = ProducerStateManager(offset)
            fresh._snapshots = snapshots
            return fresh, offset
        base = snapshots.latest_at_or_below(offset, log_start_offset)
        fresh = ProducerStateManager(log_start_offset if base is None else base.offset)
        fresh._snapshots = snapshots
        if base is not None:
            fresh._entries = dict(base.entries)
            fresh._ongoing = {pid: e.current_txn_first_offset for pid, e in base.entries.items()
                              if e.current_txn_first_offset is not None}
        fresh._unreplicated = [t for t in self._unreplicated if t.last_offset < fresh._map_end_offset]
        fresh._refresh_first_unstable()
        return fresh, fresh._map_end_offset

    def rebuild(
        self,
        headers: Iterable[BatchHeader],
        marker_of: Callable[[BatchHeader], EndTransactionMarker | None] | None = None,
        on_complete: Callable[[CompletedTxn], None] | None = None,
    ) -> None:
        """Replay the headers of batches read from the log, in offset order.

        Batches ending before ``map_end_offset`` are already reflected and are skipped, so the
        scan may start at the beginning of the segment holding ``map_end_offset``.
        ``marker_of(header)`` decodes a control batch's marker; ``on_complete`` is called with
        each transaction a marker completes (the log re-indexes aborted ones).
        """
        for header in headers:
            if header.last_offset >= self._map_end_offset:
                marker = marker_of(header) if marker_of is not None and header.is_control else None
                completed = self.update(header, marker=marker)
                if completed is not None and on_complete is not None:
                    on_complete(completed)

    # -- snapshots --------------------------------------------------------------------------

    def take_snapshot(self) -> None:
        """Keep the state as of ``map_end_offset`` in memory, for ``reloaded``."""
        self._since_snapshot = 0
        self._snapshots.take(self._map_end_offset, self._entries)

    def snapshot_offsets(self) -> list[int]:
        """The offsets of the in-memory snapshots, ascending."""
        return self._snapshots.offsets()

    def snapshot(self) -> bytes:
        """The state as bytes in ``producer_snapshot``'s layout (deterministic)."""
        return _encode_snapshot(self._map_end_offset, self._entries.values())

    @classmethod
    def load(cls, data: bytes) -> "ProducerStateManager":
        """Rebuild a manager from ``snapshot()`` bytes (version 1 or 2); raises
        CorruptSnapshotError if invalid."""
        map_end_offset, entries = _decode_snapshot(data)
        manager = cls(map_end_offset)
        for entry in entries:
            manager._entries[entry.producer_id] = entry
            if entry.current_txn_first_offset is not None:
                manager._ongoing[entry.producer_id] = entry.current_txn_first_offset
        manager._refresh_first_unstable()
        manager.take_snapshot()
        return manager
