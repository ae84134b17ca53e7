"""AlterPartition (key 56; AlterIsr before Kafka 3.2), at the controller: a leader asks for a
new ISR of its partitions (Kafka's ``processAlterPartition``).

The request becomes an `events.AlterPartition` (``(partition, leader_epoch, new_isr,
partition_epoch)`` per entry; the partition epoch is the state znode's version) for the
controller event thread; the answer per partition is the state now in force (leader, leader
epoch, ISR, its new znode version as ``partition_epoch``) or an error (FENCED_LEADER_EPOCH,
INVALID_UPDATE_VERSION, INVALID_REQUEST, UNKNOWN_TOPIC_OR_PARTITION); for the whole request
NOT_CONTROLLER or STALE_BROKER_EPOCH. Versions 2+ name topics by id: unknown ids are answered
UNKNOWN_TOPIC_ID. Version 3's per-member broker epochs are not checked (Kafka's
INELIGIBLE_REPLICA for ZooKeeper-mode clusters is not served).
"""

from __future__ import annotations

import asyncio

from odradek.controller import events as ev
from odradek.controller.queued_item import not_controller_reply
from odradek.controller.request_encoding import (
    alter_partition_items,
    encode_alter_partition_response,
)
from odradek.protocol.generated import alter_partition_response as aps
from odradek.protocol.generated.error_codes import ErrorCode
from odradek.protocol import acl_binding as acl
from odradek.server import authorize


async def handle(ctx, request):
    if not authorize.allowed_cluster(ctx, acl.CLUSTER_ACTION):  # from brokers only (Kafka: CLUSTER_ACTION)
        return aps.AlterPartitionResponse(error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
    image = ctx.broker.metadata_image()
    version = ctx.api_version

    def topic_name(topic_id):
        topic = image.topic_by_id(topic_id)
        return None if topic is None else topic.name

    items, unknown = alter_partition_items(request, version, topic_name)
    event = ev.AlterPartition(request.broker_id, request.broker_epoch, tuple(items))
    service = getattr(ctx.broker, "controller_service", None)
    if service is None:
        reply = not_controller_reply(event)
    else:
        reply = await asyncio.wrap_future(service.submit(event))
    if reply.error != ErrorCode.NONE:
        return aps.AlterPartitionResponse(error_code=int(reply.error))
    topic_ids = {
        r.topic: image.topic(r.topic).topic_id for r in reply.partitions if image.topic(r.topic)
    }
    response = encode_alter_partition_response(ErrorCode.NONE, reply.partitions, version, topic_ids)
    by_id: dict = {}
    for topic_id, _, partition in unknown:
        by_id.setdefault(topic_id, []).append(
            aps.PartitionData(partition_index=partition, error_code=ErrorCode.UNKNOWN_TOPIC_ID)
        )
    response.topics += [aps.TopicData(topic_id=t, partitions=ps) for t, ps in by_id.items()]
    return response
