"""``TransactionMetadata``: one transactional id's state, changed in two steps.

Kafka's ``TransactionMetadata``: an operation first *prepares* a transition (``prepare_*``),
which returns a ``TxnTransit`` (the whole target state, what ``__transaction_state`` will
hold) and marks the metadata ``pending``; the coordinator writes the transit to its log and,
once the write is replicated, *completes* it (``complete``), or drops it on failure
(``abort_pending``). While a transition is pending, other operations on the id answer
CONCURRENT_TRANSACTIONS. Nothing here does I/O or reads the clock: times come in as
``now_ms``.

Invariants (checked by ``complete``, a violation is a bug: ``IllegalTransition``):
- the target state may follow the current one (``TransactionState.previous``);
- the epoch stays, moves up by one, or restarts at 0 with a new producer id (InitProducerId);
- the partitions only grow while Ongoing and are emptied when the transaction completes.

Epochs: a producer id's epochs run up to 32766 (``MAX_EPOCH - 1``); a producer whose epoch is
exhausted gets a new producer id at its next InitProducerId (``previous_producer_id`` keeps
the old one so that a retried InitProducerId is recognised). ``last_producer_epoch`` is the
epoch before the last bump, so a retried InitProducerId (KIP-360) gets the same answer.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from odradek.coordinator.transaction.transaction_state import TransactionState
from odradek.protocol.generated.error_codes import ErrorCode

NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
MAX_EPOCH = 32767  # Short.MaxValue: kept free so that the coordinator can always fence

TopicPartition = tuple[str, int]


class IllegalTransition(RuntimeError):
    """A transition the state machine forbids: a coordinator bug, never a client's error."""


def is_epoch_exhausted(epoch: int) -> bool:
    return epoch >= MAX_EPOCH - 1


@dataclass(frozen=True, slots=True)
class TxnTransit:
    """The target of a transition: everything ``__transaction_state`` records for the id."""

    producer_id: int
    previous_producer_id: int
    producer_epoch: int
    last_producer_epoch: int
    timeout_ms: int
    state: TransactionState
    partitions: frozenset[TopicPartition]
    start_ms: int
    last_update_ms: int


@dataclass(eq=False)
class TransactionMetadata:
    transactional_id: str
    producer_id: int
    producer_epoch: int = NO_PRODUCER_EPOCH
    timeout_ms: int = 60_000
    state: TransactionState = TransactionState.EMPTY
    partitions: set[TopicPartition] = field(default_factory=set)
    start_ms: int = -1
    last_update_ms: int = -1
    previous_producer_id: int = NO_PRODUCER_ID
    last_producer_epoch: int = NO_PRODUCER_EPOCH
    pending: TransactionState | None = None
    # An epoch fence whose write failed: the bumped epoch stays in memory (never told to a
    # client), so the next fence does not bump again.
    failed_epoch_fence: bool = False

    @classmethod
    def from_transit(cls, transactional_id: str, t: TxnTransit) -> TransactionMetadata:
        """The metadata a loader rebuilds from a logged transit."""
        return cls(transactional_id, t.producer_id, t.producer_epoch, t.timeout_ms, t.state, set(t.partitions),
                   t.start_ms, t.last_update_ms, t.previous_producer_id, t.last_producer_epoch)

    @property
    def pending_transition(self) -> bool:
        return self.pending is not None

    @property
    def epoch_exhausted(self) -> bool:
        return is_epoch_exhausted(self.producer_epoch)

    def current(self) -> TxnTransit:
        """The current state as a transit (what the log holds for it)."""
        return TxnTransit(self.producer_id, self.previous_producer_id, self.producer_epoch, self.last_producer_epoch,
                          self.timeout_ms, self.state, frozenset(self.partitions), self.start_ms, self.last_update_ms)

    # --- prepare ----------------------------------------------------------------------------
    def prepare_increment_epoch(self, timeout_ms: int, expected_epoch: int | None, now_ms: int
                                ) -> TxnTransit | ErrorCode:
        """InitProducerId on an id with no transaction in flight: the next epoch (Empty).
        ``expected_epoch``: the epoch the producer believes current (KIP-360), None for a new
        producer. A retry of the last bump gets the same epoch; any other epoch: PRODUCER_FENCED."""
        if self.epoch_exhausted:
            raise IllegalTransition(f"{self.transactional_id}: producer id {self.producer_id}'s epochs are exhausted")
        bumped = self.producer_epoch + 1
        if expected_epoch is None:
            epoch, last = bumped, NO_PRODUCER_EPOCH
        elif self.producer_epoch == NO_PRODUCER_EPOCH or expected_epoch == self.producer_epoch:
            epoch, last = bumped, self.producer_epoch
        elif expected_epoch == self.last_producer_epoch:
            epoch, last = self.producer_epoch, self.last_producer_epoch
        else:
            return ErrorCode.PRODUCER_FENCED
        return self._prepare(TransactionState.EMPTY, self.producer_id, epoch, last, timeout_ms, frozenset(), -1, now_ms)

    def prepare_producer_id_rotation(self, new_producer_id: int, timeout_ms: int, now_ms: int,
                                     record_last_epoch: bool) -> TxnTransit:
        """InitProducerId when the epoch is exhausted: a new producer id at epoch 0."""
        if self.state in (TransactionState.ONGOING, TransactionState.PREPARE_COMMIT, TransactionState.PREPARE_ABORT):
            raise IllegalTransition(f"{self.transactional_id}: cannot rotate the producer id in {self.state.state_name}")
        last = self.producer_epoch if record_last_epoch else NO_PRODUCER_EPOCH
        return self._prepare(TransactionState.EMPTY, new_producer_id, 0, last, timeout_ms, frozenset(), -1, now_ms)

    def prepare_add_partitions(self, added, now_ms: int) -> TxnTransit:
        """AddPartitionsToTxn / AddOffsetsToTxn: the transaction is (or stays) Ongoing; it starts now
        when it was not Ongoing yet."""
        start = now_ms if self.state.is_complete else self.start_ms
        return self._prepare(TransactionState.ONGOING, self.producer_id, self.producer_epoch, self.last_producer_epoch,
                             self.timeout_ms, frozenset(self.partitions) | frozenset(added), start, now_ms)

    def prepare_end(self, commit: bool, now_ms: int) -> TxnTransit:
        """EndTxn of an Ongoing transaction: PrepareCommit or PrepareAbort."""
        state = TransactionState.PREPARE_COMMIT if commit else TransactionState.PREPARE_ABORT
        return self._prepare(state, self.producer_id, self.producer_epoch, self.last_producer_epoch, self.timeout_ms,
                             frozenset(self.partitions), self.start_ms, now_ms)

    def prepare_fence_and_abort(self, now_ms: int) -> TxnTransit:
        """Fence the producer of an Ongoing transaction and abort it (Kafka's
        ``prepareFenceProducerEpoch`` followed by the coordinator's own EndTxn(abort)): the
        epoch is bumped at once in memory, so the fenced producer's requests fail from now on,
        and the abort is prepared with it (``last_producer_epoch`` -1: no retry matches)."""
        if self.state != TransactionState.ONGOING or self.pending is not None:
            raise IllegalTransition(f"{self.transactional_id}: cannot fence in {self.state.state_name}")
        if self.producer_epoch >= MAX_EPOCH:
            raise IllegalTransition(f"{self.transactional_id}: epoch {self.producer_epoch} cannot be bumped")
        if not self.failed_epoch_fence:
            self.producer_epoch += 1
        self.last_producer_epoch = NO_PRODUCER_EPOCH
        self.failed_epoch_fence = True  # until the abort is written
        return self._prepare(TransactionState.PREPARE_ABORT, self.producer_id, self.producer_epoch, NO_PRODUCER_EPOCH,
                             self.timeout_ms, frozenset(self.partitions), self.start_ms, now_ms)

    def prepare_complete(self, now_ms: int) -> TxnTransit:
        """Every marker is written: CompleteCommit or CompleteAbort, no partitions."""
        if not self.state.is_preparing:
            raise IllegalTransition(f"{self.transactional_id}: cannot complete in {self.state.state_name}")
        state = (TransactionState.COMPLETE_COMMIT if self.state == TransactionState.PREPARE_COMMIT
                 else TransactionState.COMPLETE_ABORT)
        return self._prepare(state, self.producer_id, self.producer_epoch, self.last_producer_epoch, self.timeout_ms,
                             frozenset(), self.start_ms, now_ms)

    def prepare_dead(self) -> TxnTransit:
        """Expiration of an idle id (its tombstone is written)."""
        return self._prepare(TransactionState.DEAD, self.producer_id, self.producer_epoch, self.last_producer_epoch,
                             self.timeout_ms, frozenset(), self.start_ms, self.last_update_ms)

    def _prepare(self, state: TransactionState, producer_id: int, epoch: int, last_epoch: int, timeout_ms: int,
                 partitions: frozenset, start_ms: int, now_ms: int) -> TxnTransit:
        if self.pending is not None:
            raise IllegalTransition(f"{self.transactional_id}: {state.state_name} while {self.pending.state_name} "
                                    "is pending")
        if producer_id < 0 or (state != TransactionState.DEAD and epoch < 0):
            raise IllegalTransition(f"{self.transactional_id}: producer {producer_id} epoch {epoch}")
        if self.state not in state.previous:
            raise IllegalTransition(f"{self.transactional_id}: {self.state.state_name} -> {state.state_name}")
        self.pending = state
        previous = self.producer_id if producer_id != self.producer_id else self.previous_producer_id
        return TxnTransit(producer_id, previous, epoch, last_epoch, timeout_ms, state, partitions, start_ms,
                          max(now_ms, self.last_update_ms))

    # --- complete ---------------------------------------------------------------------------
    def complete(self, t: TxnTransit) -> None:
        """The transit ``t`` is written and replicated: it becomes the state."""
        if self.pending != t.state:
            raise IllegalTransition(f"{self.transactional_id}: completing {t.state.state_name}, "
                                    f"pending {self.pending and self.pending.state_name}")
        same_producer = t.producer_id == self.producer_id
        if t.state == TransactionState.EMPTY:
            ok = (t.producer_epoch in (self.producer_epoch, self.producer_epoch + 1) if same_producer
                  else t.producer_epoch == 0) and not t.partitions and t.start_ms == -1
        elif t.state == TransactionState.ONGOING:
            ok = same_producer and t.producer_epoch == self.producer_epoch and self.partitions <= t.partitions
        elif t.state.is_preparing:
            ok = same_producer and t.producer_epoch == self.producer_epoch and set(t.partitions) == self.partitions
        elif t.state in (TransactionState.COMPLETE_COMMIT, TransactionState.COMPLETE_ABORT):
            ok = same_producer and t.producer_epoch == self.producer_epoch and t.start_ms != -1
        else:  # Dead is removed from the cache, PrepareEpochFence never written
            ok = False
        if not ok:
            raise IllegalTransition(f"{self.transactional_id}: {self.current()} -> {t}")
        self.producer_id, self.previous_producer_id = t.producer_id, t.previous_producer_id
        self.producer_epoch, self.last_producer_epoch = t.producer_epoch, t.last_producer_epoch
        self.timeout_ms, self.state, self.partitions = t.timeout_ms, t.state, set(t.partitions)
        self.start_ms, self.last_update_ms = t.start_ms, t.last_update_ms
        self.pending = None
        if t.state.is_preparing or t.state.is_complete:
            self.failed_epoch_fence = False

    def abort_pending(self) -> None:
        """The pending transit could not be written: the state stays as it was."""
        self.pending = None

    def remove_partition(self, tp: TopicPartition) -> None:
        """A marker of the preparing transaction is written to ``tp``."""
        if not self.state.is_preparing:
            raise IllegalTransition(f"{self.transactional_id}: removing {tp} in {self.state.state_name}")
        self.partitions.discard(tp)
