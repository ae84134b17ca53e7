"""``TransactionShard``: the transactional ids of one ``__transaction_state`` partition, and the
coordinator's decisions on them (Kafka's ``TransactionCoordinator`` checks, without I/O).

Each operation looks at an id's ``TransactionMetadata`` and answers either an ``ErrorCode``
(the answer, nothing to write; ``ErrorCode.NONE`` included) or a ``TxnTransit`` that the
runtime must write to the partition and then ``complete`` (the metadata is pending until
then, so concurrent operations on the id answer CONCURRENT_TRANSACTIONS). The runtime
(``transaction_coordinator``) owns the clock, the log and the markers.

``coordinator_epoch`` is the partition's leader epoch when this broker became its leader:
it goes into every marker, so partition leaders refuse markers of a deposed coordinator.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from odradek.coordinator.transaction.transaction_metadata import (
    NO_PRODUCER_EPOCH,
    IllegalTransition,
    TransactionMetadata,
    TxnTransit,
    is_epoch_exhausted,
)
from odradek.coordinator.transaction.transaction_state import TransactionState as S
from odradek.protocol.generated.error_codes import ErrorCode

Result = ErrorCode | TxnTransit


class TransactionShard:
    def __init__(self, partition: int, coordinator_epoch: int) -> None:
        self.partition = partition
        self.coordinator_epoch = coordinator_epoch
        self.transactions: dict[str, TransactionMetadata] = {}

    # --- loading ----------------------------------------------------------------------------
    def replay(self, transactional_id: str, transit: TxnTransit | None) -> None:
        """A record of the log, in log order (a tombstone when ``transit`` is None)."""
        if transit is None:
            self.transactions.pop(transactional_id, None)
        else:
            self.transactions[transactional_id] = TransactionMetadata.from_transit(transactional_id, transit)

    def get(self, transactional_id: str) -> TransactionMetadata | None:
        return self.transactions.get(transactional_id)

    # --- InitProducerId ---------------------------------------------------------------------
    def init_producer_id(self, transactional_id: str, timeout_ms: int, expected: tuple[int, int] | None,
                         now_ms: int, new_producer_id: Callable[[], int]) -> Result:
        """Kafka's ``prepareInitProducerIdTransit``. A transit in PrepareAbort means the id's
        Ongoing transaction is being fenced and aborted: the client is answered
        CONCURRENT_TRANSACTIONS once that is written, and retries. ``expected``: the producer
        id and epoch the request carries (v3+, KIP-360), None when it carries none (-1)."""
        txn = self.transactions.get(transactional_id)
        if txn is None:
            txn = TransactionMetadata(transactional_id, new_producer_id(), NO_PRODUCER_EPOCH, timeout_ms,
                                      last_update_ms=now_ms)
            self.transactions[transactional_id] = txn
        if txn.pending_transition:
            return ErrorCode.CONCURRENT_TRANSACTIONS
        if expected is not None and not _valid_producer_id(txn, *expected):
            return ErrorCode.PRODUCER_FENCED
        if txn.state.is_preparing:
            return ErrorCode.CONCURRENT_TRANSACTIONS
        if txn.state == S.ONGOING:
            return txn.prepare_fence_and_abort(now_ms)
        if txn.state.is_complete:
            if txn.epoch_exhausted and (expected is None or expected[1] == txn.producer_epoch):
                return txn.prepare_producer_id_rotation(new_producer_id(), timeout_ms, now_ms, expected is not None)
            return txn.prepare_increment_epoch(timeout_ms, None if expected is None else expected[1], now_ms)
        raise IllegalTransition(f"{transactional_id} found in {txn.state.state_name}")

    # --- AddPartitionsToTxn, AddOffsetsToTxn ------------------------------------------------
    def add_partitions(self, transactional_id: str, producer_id: int, producer_epoch: int,
                       partitions: Iterable[tuple[str, int]], now_ms: int) -> Result:
        partitions = frozenset(partitions)
        txn = self.transactions.get(transactional_id)
        error = _check_producer(txn, producer_id, producer_epoch)
        if error is not None:
            return error
        if txn.pending_transition or txn.state.is_preparing:
            return ErrorCode.CONCURRENT_TRANSACTIONS
        if txn.state == S.ONGOING and partitions <= txn.partitions:
            return ErrorCode.NONE
        return txn.prepare_add_partitions(partitions, now_ms)

    # --- EndTxn -----------------------------------------------------------------------------
    def end_txn(self, transactional_id: str, producer_id: int, producer_epoch: int, commit: bool,
                now_ms: int) -> Result:
        """Kafka's ``endTransaction`` from a client (transaction version 1: the epoch must be
        the current one). A retry of an EndTxn whose transaction is complete with the same
        result answers NONE; one still writing its markers CONCURRENT_TRANSACTIONS."""
        txn = self.transactions.get(transactional_id)
        if txn is None or txn.producer_id != producer_id:
            return ErrorCode.INVALID_PRODUCER_ID_MAPPING
        if producer_epoch != txn.producer_epoch:
            return ErrorCode.PRODUCER_FENCED
        if txn.pending_transition:
            return ErrorCode.CONCURRENT_TRANSACTIONS
        state = txn.state
        if state == S.ONGOING:
            return txn.prepare_end(commit, now_ms)
        if state in (S.COMPLETE_COMMIT, S.COMPLETE_ABORT):
            return ErrorCode.NONE if (state == S.COMPLETE_COMMIT) == commit else ErrorCode.INVALID_TXN_STATE
        if state.is_preparing:
            return ErrorCode.CONCURRENT_TRANSACTIONS if (state == S.PREPARE_COMMIT) == commit \
                else ErrorCode.INVALID_TXN_STATE
        return ErrorCode.INVALID_TXN_STATE  # Empty: nothing to end

    # --- time -------------------------------------------------------------------------------
    def timed_out(self, now_ms: int) -> list[TransactionMetadata]:
        """Ongoing transactions older than their timeout, not already being changed."""
        return [t for t in self.transactions.values()
                if t.state == S.ONGOING and t.pending is None and t.start_ms + t.timeout_ms < now_ms]

    def expired(self, now_ms: int, expiration_ms: int) -> list[TransactionMetadata]:
        """Ids with no transaction in flight and no update for ``expiration_ms``."""
        return [t for t in self.transactions.values()
                if t.state.is_complete and t.pending is None and t.last_update_ms + expiration_ms <= now_ms]

    def preparing(self) -> list[TransactionMetadata]:
        """Transactions whose markers are to be written (after a load)."""
        return [t for t in self.transactions.values() if t.state.is_preparing]


def _valid_producer_id(txn: TransactionMetadata, producer_id: int, producer_epoch: int) -> bool:
    """Kafka's ``isValidProducerId``: a request carrying a producer id and epoch continues
    this id's producer, a retry of a rotation, or meets an id just created."""
    return (txn.producer_epoch == NO_PRODUCER_EPOCH or producer_id == txn.producer_id
            or (producer_id == txn.previous_producer_id and is_epoch_exhausted(producer_epoch)))


def _check_producer(txn: TransactionMetadata | None, producer_id: int, producer_epoch: int) -> ErrorCode | None:
    if txn is None or txn.producer_id != producer_id:
        return ErrorCode.INVALID_PRODUCER_ID_MAPPING
    if txn.producer_epoch != producer_epoch:
        return ErrorCode.PRODUCER_FENCED
    return None
