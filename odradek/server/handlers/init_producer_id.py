"""InitProducerId (key 22): a producer id and epoch for an idempotent producer.

Without a transactional id every call gets a fresh producer id with epoch 0 (ids are reserved
durably in blocks, so none is reused across restarts). Transactional ids need the transaction
coordinator, which odradek does not have yet: they are refused with
TRANSACTIONAL_ID_AUTHORIZATION_FAILED rather than half-served. A block that cannot be recorded
(a full disk) is answered COORDINATOR_LOAD_IN_PROGRESS, which producers retry.
"""

from __future__ import annotations

from odradek.protocol.generated.error_codes import ErrorCode
from odradek.protocol.generated.init_producer_id_response import InitProducerIdResponse


def handle(ctx, request):
    if request.transactional_id is not None:
        return InitProducerIdResponse(error_code=ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
                                      producer_id=-1, producer_epoch=-1)
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
