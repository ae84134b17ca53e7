"""``TransactionVerification``: the transaction coordinator's answers to partition leaders
(KIP-890 part 1), mixed into ``TransactionCoordinator``.

A partition leader asks before appending the first transactional batch of a transaction in a
partition: in-process when the leader is this broker (``server/txn_verification.py``), with
AddPartitionsToTxn v4+ ``VerifyOnly`` from other brokers (``server/handlers/
add_partitions_to_txn.py``, sent by their ``AddPartitionsToTxnManager``). ``verify`` tells
whether the partition is in the Ongoing transaction of that producer id and epoch, waiting
first for an AddPartitionsToTxn naming it that is being written (``_in_flight``) or waiting
itself for the previous transaction to end (``_deferred``). ``ending`` tells whether the
id's transaction is being ended (a batch then belongs to the next one). The coordinator's state lives in the
coordinator (``_in_flight``, ``_completing``, ``_deferred``, ``_settling``, ``_slot_for``).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable

from odradek.coordinator.coordinator_runtime import CoordinatorError
from odradek.coordinator.transaction.transaction_metadata import TransactionMetadata
from odradek.coordinator.transaction.transaction_state import TransactionState
from odradek.protocol.generated.error_codes import ErrorCode

E = ErrorCode


class TransactionVerification:
    """The verification half of ``TransactionCoordinator`` (a mixin: no state of its own)."""

    def verify(self, transactional_id: str, producer_id: int, producer_epoch: int,
               tp: tuple[str, int]) -> ErrorCode | Awaitable[ErrorCode]:
        """Whether ``tp`` is in the Ongoing transaction of ``producer_id`` / ``producer_epoch``
        (Kafka's ``handleVerifyPartitionsInTransaction``), asked by a partition leader before
        the first transactional batch of a transaction is appended there. An AddPartitionsToTxn
        naming ``tp`` still being written is waited for (an awaitable is returned); otherwise
        the answer is at once: NONE, TRANSACTION_ABORTABLE (not added),
        INVALID_PRODUCER_ID_MAPPING, PRODUCER_FENCED, CONCURRENT_TRANSACTIONS (ending), or the
        coordinator's own error (NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS...)."""
        answer = self._verify_now(transactional_id, producer_id, producer_epoch, tp)
        if isinstance(answer, ErrorCode):
            return answer
        return self._verify_after(answer, self._settle_deadline(), transactional_id, producer_id,
                                  producer_epoch, tp)

    def ending(self, transactional_id: str) -> asyncio.Future | None:
        """While the transaction of ``transactional_id`` is being ended here (PrepareCommit /
        PrepareAbort in flight, or its markers being written), a future done at its next
        step; else None. Two dict lookups: asked for every transactional batch whose
        producer has a transaction open in its partition."""
        completing = self._completing.get(transactional_id)
        if completing is not None:
            return completing
        in_flight = self._in_flight.get(transactional_id)
        if in_flight is not None and in_flight[0].state.is_preparing:
            return in_flight[1]
        return None

    def _verify_now(self, transactional_id: str, producer_id: int, producer_epoch: int,
                    tp: tuple[str, int]) -> ErrorCode | asyncio.Future:
        """The answer, or a future to wait for before asking again: an AddPartitionsToTxn
        adding ``tp`` being written, or the previous transaction being ended."""
        in_flight = self._in_flight.get(transactional_id)
        if in_flight is not None and tp in in_flight[0].partitions and in_flight[0].state == TransactionState.ONGOING:
            return in_flight[1]
        deferred = self._deferred.get(transactional_id)
        if deferred is not None and tp in deferred[0]:
            return deferred[1]
        try:
            slot = self._slot_for(transactional_id)
        except CoordinatorError as e:
            return e.error
        answer = _verification(slot.shard.get(transactional_id), producer_id, producer_epoch, tp)
        settling = self._settling(transactional_id) if answer == E.CONCURRENT_TRANSACTIONS else None
        return answer if settling is None else settling

    async def _verify_after(self, settling: asyncio.Future, settle_by: float, transactional_id: str,
                            producer_id: int, producer_epoch: int, tp: tuple[str, int]) -> ErrorCode:
        while await settled(settling, settle_by):
            answer = self._verify_now(transactional_id, producer_id, producer_epoch, tp)
            if isinstance(answer, ErrorCode):
                return answer
            settling = answer
        return E.CONCURRENT_TRANSACTIONS


async def settled(future: asyncio.Future, deadline: float) -> bool:
    """Wait for ``future`` until ``deadline`` (loop time); whether it is done."""
    remaining = deadline - asyncio.get_running_loop().time()
    if remaining > 0 and not future.done():
        try:
            await asyncio.wait_for(asyncio.shield(future), remaining)
        except TimeoutError:
            pass
    return future.done()


def _verification(txn: TransactionMetadata | None, producer_id: int, producer_epoch: int,
                  tp: tuple[str, int]) -> ErrorCode:
    if txn is None or txn.producer_id != producer_id:
        return E.INVALID_PRODUCER_ID_MAPPING
    if txn.producer_epoch != producer_epoch:
        return E.PRODUCER_FENCED
    if txn.state.is_preparing:
        return E.CONCURRENT_TRANSACTIONS
    return E.NONE if txn.state == TransactionState.ONGOING and tp in txn.partitions else E.TRANSACTION_ABORTABLE
