"""DescribeTransactions (key 65): the state of transactional ids this broker coordinates.

Per id: NOT_COORDINATOR / COORDINATOR_LOAD_IN_PROGRESS when this broker cannot answer for it,
TRANSACTIONAL_ID_NOT_FOUND when it has no state, else its state's Kafka name (``Ongoing``,
``PrepareCommit``, ...), timeout, start time, producer id and epoch, and the partitions of the
transaction (while it is being ended: those still without their marker).
"""

from __future__ import annotations

from odradek.protocol.generated.describe_transactions_response import (
    DescribeTransactionsResponse,
    TopicData,
    TransactionState,
)
from odradek.protocol.generated.error_codes import ErrorCode
from odradek.protocol import acl_binding as acl
from odradek.server import authorize


def handle(ctx, request):
    coordinator = ctx.broker.txn_coordinator
    states = []
    for tid in request.transactional_ids:
        if not authorize.allowed(ctx, acl.DESCRIBE, acl.TRANSACTIONAL_ID, tid):  # Kafka: DESCRIBE on the id
            error, txn = ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, None
        elif coordinator is None:
            error, txn = ErrorCode.COORDINATOR_NOT_AVAILABLE, None
        else:
            error, txn = coordinator.describe(tid)
        if txn is None:
            states.append(TransactionState(error_code=error, transactional_id=tid, transaction_state="",
                                           transaction_timeout_ms=0, transaction_start_time_ms=-1,
                                           producer_id=-1, producer_epoch=-1, topics=[]))
            continue
        topics: dict[str, list[int]] = {}
        for topic, p in sorted(txn.partitions):
            topics.setdefault(topic, []).append(p)
        states.append(TransactionState(
            error_code=ErrorCode.NONE, transactional_id=tid, transaction_state=txn.state.state_name,
            transaction_timeout_ms=txn.timeout_ms, transaction_start_time_ms=txn.start_ms,
            producer_id=txn.producer_id, producer_epoch=txn.producer_epoch,
            topics=[TopicData(topic=t, partitions=ps) for t, ps in topics.items()]))
    return DescribeTransactionsResponse(throttle_time_ms=0, transaction_states=states)
