"""InitProducerId (key 22): a producer id and epoch for an idempotent or transactional producer.

Without a transactional id every call gets a fresh producer id with epoch 0 (ids are reserved
durably in blocks, so none is reused across restarts); a block that cannot be recorded (a full
disk) is answered COORDINATOR_LOAD_IN_PROGRESS, which producers retry.

With a transactional id the transaction coordinator answers (``TransactionCoordinator.
init_producer_id``): the id's producer id with the next epoch, fencing earlier producers of
the id; an Ongoing transaction of the id is aborted first and the client is told
CONCURRENT_TRANSACTIONS until that is done (it retries). v3+ requests may carry the producer's
current id and epoch (KIP-360) to recover it. ``__transaction_state`` is created here when it
does not exist yet, as FindCoordinator does. PRODUCER_FENCED is answered
INVALID_PRODUCER_EPOCH before v4, as Kafka does for clients that do not know it.
"""

from __future__ import annotations

from odradek.coordinator.transaction.transaction_config import TRANSACTION_STATE_TOPIC
from odradek.protocol.generated.error_codes import ErrorCode
from odradek.protocol.generated.init_producer_id_response import InitProducerIdResponse
from odradek.protocol import acl_binding as acl
from odradek.server.handlers.find_coordinator import ensure_internal_topic
from odradek.server import authorize


def handle(ctx, request):
    if request.transactional_id is not None:
        if not authorize.allowed(ctx, acl.WRITE, acl.TRANSACTIONAL_ID, request.transactional_id):
            return _answer(ctx, ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
        return _transactional(ctx, request)
    if not authorize.idempotent_write_allowed(ctx):  # IDEMPOTENT_WRITE, or WRITE on any topic (KIP-679)
        return _answer(ctx, ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
    try:
        pid = ctx.broker.producer_ids.init_producer_id()
    except OSError as e:
        # A new block of ids could not be recorded (the metadata store's disk is full): a
        # retriable answer, as Kafka's RPCProducerIdManager gives while it has no block.
        ctx.broker.log_storage_error(f"could not reserve producer ids: {e}")
        return InitProducerIdResponse(error_code=ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
                                      producer_id=-1, producer_epoch=-1)
    return InitProducerIdResponse(error_code=ErrorCode.NONE, producer_id=pid.producer_id,
                                  producer_epoch=pid.producer_epoch)


async def _transactional(ctx, request):
    broker = ctx.broker
    coordinator = broker.txn_coordinator
    if coordinator is None:
        return _answer(ctx, ErrorCode.COORDINATOR_NOT_AVAILABLE)
    if request.transactional_id:
        _, error = await ensure_internal_topic(broker, TRANSACTION_STATE_TOPIC)
        if error != ErrorCode.NONE:
            return _answer(ctx, error)
    pid, epoch = (request.producer_id, request.producer_epoch) if ctx.api_version >= 3 else (-1, -1)
    error, pid, epoch = await coordinator.init_producer_id(request.transactional_id, request.transaction_timeout_ms,
                                                           pid, epoch)
    return _answer(ctx, error, pid, epoch)


def _answer(ctx, error: ErrorCode, producer_id: int = -1, producer_epoch: int = -1) -> InitProducerIdResponse:
    if error == ErrorCode.PRODUCER_FENCED and ctx.api_version < 4:
        error = ErrorCode.INVALID_PRODUCER_EPOCH
    return InitProducerIdResponse(error_code=error, producer_id=producer_id, producer_epoch=producer_epoch)
