"""EndTxn (key 26): a transactional producer commits or aborts its transaction.

Answered once the coordinator wrote PrepareCommit / PrepareAbort to ``__transaction_state``
(``TransactionCoordinator.end_txn``); the markers are written afterwards, and until they are
the id's next operations answer CONCURRENT_TRANSACTIONS. A retried EndTxn of a transaction
already complete with the same result answers NONE; with the other result INVALID_TXN_STATE.
PRODUCER_FENCED is INVALID_PRODUCER_EPOCH before v2. v5 (an epoch bump per transaction,
KIP-890 part 2) is not served (``api_keys`` narrows the range to v0-v4).
"""

from __future__ import annotations

from odradek.coordinator.transaction.transaction_coordinator import answer_now
from odradek.protocol.generated.end_txn_response import EndTxnResponse
from odradek.protocol.generated.error_codes import ErrorCode
from odradek.protocol import acl_binding as acl
from odradek.server import authorize


def handle(ctx, request):
    """The response, or a coroutine of it while PrepareCommit / PrepareAbort is replicated."""
    coordinator = ctx.broker.txn_coordinator
    if not authorize.allowed(ctx, acl.WRITE, acl.TRANSACTIONAL_ID, request.transactional_id):
        return _response(ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, ctx.api_version)
    if coordinator is None:
        return _response(ErrorCode.COORDINATOR_NOT_AVAILABLE, ctx.api_version)
    ended = coordinator.end_txn(request.transactional_id, request.producer_id, request.producer_epoch,
                                bool(request.committed))
    error = answer_now(ended)
    return _answer(ended, ctx.api_version) if error is None else _response(error, ctx.api_version)


async def _answer(ended, version: int) -> EndTxnResponse:
    return _response(await ended, version)


def _response(error: ErrorCode, version: int) -> EndTxnResponse:
    if error == ErrorCode.PRODUCER_FENCED and version < 2:
        error = ErrorCode.INVALID_PRODUCER_EPOCH
    return EndTxnResponse(throttle_time_ms=0, error_code=error)
