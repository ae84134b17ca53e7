"""``TransactionState``: the states of a transactional id, as Kafka numbers and names them.

The byte ``id`` is what ``__transaction_state`` stores (``TransactionLogValue.TransactionStatus``)
and the ``name`` is what DescribeTransactions and ListTransactions answer (Kafka's
``TransactionState``). A state may only be entered from one of its ``previous`` states::

    Empty ──AddPartitions──▶ Ongoing ──EndTxn(commit)──▶ PrepareCommit ──markers──▶ CompleteCommit
      ▲                        │  └──EndTxn(abort), timeout, fence──▶ PrepareAbort ──markers──▶ CompleteAbort
      └──InitProducerId────────┴─────────────────────────(from Empty / Complete*)──────────────┘
    Empty / Complete* ──expiration──▶ Dead (a tombstone; the id is forgotten)

``PrepareEpochFence`` is Kafka's in-memory step of fencing a producer whose transaction is
Ongoing (InitProducerId of a new producer, or the transaction's timeout): the epoch is bumped
and the transaction goes to PrepareAbort with it. It is never written to the log.
"""

from __future__ import annotations

from enum import Enum


class TransactionState(Enum):
    EMPTY = (0, "Empty")
    ONGOING = (1, "Ongoing")
    PREPARE_COMMIT = (2, "PrepareCommit")
    PREPARE_ABORT = (3, "PrepareAbort")
    COMPLETE_COMMIT = (4, "CompleteCommit")
    COMPLETE_ABORT = (5, "CompleteAbort")
    DEAD = (6, "Dead")
    PREPARE_EPOCH_FENCE = (7, "PrepareEpochFence")

    def __init__(self, state_id: int, state_name: str) -> None:
        self.id = state_id
        self.state_name = state_name

    @classmethod
    def from_id(cls, state_id: int) -> TransactionState:
        for s in cls:
            if s.id == state_id:
                return s
        raise ValueError(f"unknown transaction state id {state_id}")

    @classmethod
    def from_name(cls, name: str) -> TransactionState | None:
        return next((s for s in cls if s.state_name == name), None)

    @property
    def previous(self) -> frozenset[TransactionState]:
        return _PREVIOUS[self]

    @property
    def is_complete(self) -> bool:
        """No transaction in flight: a new one may start, the id may expire."""
        return self in (TransactionState.EMPTY, TransactionState.COMPLETE_COMMIT, TransactionState.COMPLETE_ABORT)

    @property
    def is_preparing(self) -> bool:
        """Ended by the client (or the coordinator); its markers are being written."""
        return self in (TransactionState.PREPARE_COMMIT, TransactionState.PREPARE_ABORT)


S = TransactionState
_PREVIOUS = {
    S.EMPTY: frozenset({S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT}),
    S.ONGOING: frozenset({S.ONGOING, S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT}),
    S.PREPARE_COMMIT: frozenset({S.ONGOING}),
    S.PREPARE_ABORT: frozenset({S.ONGOING, S.PREPARE_EPOCH_FENCE}),
    S.COMPLETE_COMMIT: frozenset({S.PREPARE_COMMIT}),
    S.COMPLETE_ABORT: frozenset({S.PREPARE_ABORT}),
    S.DEAD: frozenset({S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT}),
    S.PREPARE_EPOCH_FENCE: frozenset({S.ONGOING}),
}
del S
