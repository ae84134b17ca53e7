"""ListTransactions (key 66): the transactional ids this broker coordinates, filtered by state
names, producer ids and (v1) how long their transaction has been running.

Unknown state names are listed back in ``unknown_state_filters``. While one of its partitions
is still loading, the answer is COORDINATOR_LOAD_IN_PROGRESS with what is loaded.
"""

from __future__ import annotations

from odradek.protocol.generated.error_codes import ErrorCode
from odradek.protocol.generated.list_transactions_response import ListTransactionsResponse, TransactionState
from odradek.protocol import acl_binding as acl
from odradek.server import authorize


def handle(ctx, request):
    coordinator = ctx.broker.txn_coordinator
    if coordinator is None:
        return ListTransactionsResponse(throttle_time_ms=0, error_code=ErrorCode.COORDINATOR_NOT_AVAILABLE)
    duration = request.duration_filter if ctx.api_version >= 1 else -1
    error, unknown, found = coordinator.list_transactions(list(request.state_filters),
                                                          set(request.producer_id_filters), duration)
    # Kafka: the transactions whose id the principal may DESCRIBE
    found = [t for t in found if authorize.allowed(ctx, acl.DESCRIBE, acl.TRANSACTIONAL_ID, t.transactional_id)]
    return ListTransactionsResponse(
        throttle_time_ms=0, error_code=error, unknown_state_filters=unknown,
        transaction_states=[TransactionState(transactional_id=t.transactional_id, producer_id=t.producer_id,
                                             transaction_state=t.state.state_name) for t in found])
