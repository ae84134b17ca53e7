"""ControlledShutdown (key 7), at the controller: a broker about to stop asks for its
leaderships to move away first (Kafka's ``doControlledShutdown``).

The request becomes an `events.ControlledShutdown` for this broker's controller event thread;
the answer is the partitions the broker still leads (it retries until none remain), or
NOT_CONTROLLER when this broker is not the controller (the sender then asks the new one),
STALE_BROKER_EPOCH or BROKER_NOT_AVAILABLE.

Versions before 2 carry no broker epoch, and Kafka does not check one there. odradek refuses
them (and an epoch of -1 in later versions) with STALE_BROKER_EPOCH: its brokers always send
their epoch, and an unchecked request, from a stray client or a damaged frame, would take the
named broker out of every leader election until it restarts.
"""

from __future__ import annotations

import asyncio

from odradek.controller import events as ev
from odradek.controller.queued_item import not_controller_reply
from odradek.protocol.generated.controlled_shutdown_response import (
    ControlledShutdownResponse,
    RemainingPartition,
)
from odradek.protocol.generated.error_codes import ErrorCode
from odradek.protocol import acl_binding as acl
from odradek.server import authorize


async def handle(ctx, request):
    if not authorize.allowed_cluster(ctx, acl.CLUSTER_ACTION):  # from brokers only (Kafka: CLUSTER_ACTION)
        return ControlledShutdownResponse(error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
    broker_epoch = request.broker_epoch if ctx.api_version >= 2 else -1
    if broker_epoch < 0:
        return ControlledShutdownResponse(error_code=ErrorCode.STALE_BROKER_EPOCH)
    event = ev.ControlledShutdown(request.broker_id, broker_epoch)
    service = getattr(ctx.broker, "controller_service", None)
    if service is None:
        reply = not_controller_reply(event)
    else:
        reply = await asyncio.wrap_future(service.submit(event))
    return ControlledShutdownResponse(
        error_code=int(reply.error),
        remaining_partitions=[RemainingPartition(t, p) for t, p in reply.remaining],
    )
