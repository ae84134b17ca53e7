"""AddOffsetsToTxn (key 25): a transactional producer is about to commit a group's offsets in
its transaction (``send_offsets_to_transaction``).

The coordinator adds the group's ``__consumer_offsets`` partition to the transaction
(``TransactionCoordinator.add_offsets``), so the commit or abort marker reaches the group
coordinator; the offsets themselves go to the group coordinator with TxnOffsetCommit.
PRODUCER_FENCED is INVALID_PRODUCER_EPOCH before v2.
"""

from __future__ import annotations

from odradek.protocol.generated.add_offsets_to_txn_response import AddOffsetsToTxnResponse
from odradek.protocol.generated.error_codes import ErrorCode
from odradek.protocol import acl_binding as acl
from odradek.server import authorize


async def handle(ctx, request):
    coordinator = ctx.broker.txn_coordinator
    if not authorize.allowed(ctx, acl.WRITE, acl.TRANSACTIONAL_ID, request.transactional_id):
        error = ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    elif not authorize.allowed(ctx, acl.READ, acl.GROUP, request.group_id):
        error = ErrorCode.GROUP_AUTHORIZATION_FAILED
    elif coordinator is None:
        error = ErrorCode.COORDINATOR_NOT_AVAILABLE
    else:
        error = await coordinator.add_offsets(request.transactional_id, request.producer_id,
                                              request.producer_epoch, request.group_id)
    if error == ErrorCode.PRODUCER_FENCED and ctx.api_version < 2:
        error = ErrorCode.INVALID_PRODUCER_EPOCH
    return AddOffsetsToTxnResponse(throttle_time_ms=0, error_code=error)
