"""AlterPartitionReassignments (key 45) and ListPartitionReassignments (key 46), at the
controller (KIP-455).

As Kafka's ZooKeeper-mode ``KafkaApis.handleAlterPartitionReassignmentsRequest``, the request
becomes an event on this broker's controller event queue (`events.ApiPartitionReassignment`,
`events.ListPartitionReassignments`; `controller.reassignment` decides); a broker that is not
the controller answers NOT_CONTROLLER for the whole request, and clients, which send these to
the controller named in Metadata, ask the new one.

Alter: per partition NONE once the reassignment started (it completes later, when the new
replicas joined the ISR), or INVALID_REPLICA_ASSIGNMENT, UNKNOWN_TOPIC_OR_PARTITION or (to
cancel, ``replicas`` null) NO_REASSIGNMENT_IN_PROGRESS, with Kafka's messages. A partition
named twice counts once, its last entry winning (Kafka builds a map). List: the partitions
being reassigned, among those asked (``topics`` null: all), with their full replica set and
the replicas being added and removed.
"""

from __future__ import annotations

import asyncio
from collections import defaultdict

from odradek.controller import events as ev
from odradek.controller.queued_item import not_controller_reply
from odradek.protocol.generated import alter_partition_reassignments_response as alter_resp
from odradek.protocol.generated import list_partition_reassignments_response as list_resp
from odradek.protocol.generated.error_codes import ErrorCode
from odradek.protocol import acl_binding as acl
from odradek.server import authorize


async def _ask_controller(ctx, event):
    service = getattr(ctx.broker, "controller_service", None)
    if service is None:
        return not_controller_reply(event)
    return await asyncio.wrap_future(service.submit(event))


async def handle_alter(ctx, request):
    wanted = {
        (t.name, p.partition_index): None if p.replicas is None else tuple(p.replicas)
        for t in request.topics for p in t.partitions
    }
    if not authorize.allowed_cluster(ctx, acl.ALTER):  # Kafka: ALTER on the cluster
        return alter_resp.AlterPartitionReassignmentsResponse(error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
                                                              error_message="Authorization failed.")
    reply = await _ask_controller(ctx, ev.ApiPartitionReassignment(wanted))
    if reply.error != ErrorCode.NONE:
        return alter_resp.AlterPartitionReassignmentsResponse(error_code=int(reply.error), error_message=None)
    by_topic = defaultdict(list)
    for (topic, partition), error, message in reply.results:
        by_topic[topic].append(alter_resp.ReassignablePartitionResponse(
            partition_index=partition, error_code=int(error), error_message=message))
    return alter_resp.AlterPartitionReassignmentsResponse(
        error_code=ErrorCode.NONE, error_message=None,
        responses=[alter_resp.ReassignableTopicResponse(name=t, partitions=ps) for t, ps in by_topic.items()])


async def handle_list(ctx, request):
    asked = None
    if request.topics is not None:
        asked = tuple((t.name, p) for t in request.topics for p in t.partition_indexes)
    if not authorize.allowed_cluster(ctx, acl.DESCRIBE):  # Kafka: DESCRIBE on the cluster
        return list_resp.ListPartitionReassignmentsResponse(error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
                                                            error_message="Authorization failed.")
    reply = await _ask_controller(ctx, ev.ListPartitionReassignments(asked))
    if reply.error != ErrorCode.NONE:
        return list_resp.ListPartitionReassignmentsResponse(error_code=int(reply.error), error_message=None)
    by_topic = defaultdict(list)
    for (topic, partition), replicas, adding, removing in reply.reassignments:
        by_topic[topic].append(list_resp.OngoingPartitionReassignment(
            partition_index=partition, replicas=list(replicas), adding_replicas=list(adding),
            removing_replicas=list(removing)))
    return list_resp.ListPartitionReassignmentsResponse(
        error_code=ErrorCode.NONE, error_message=None,
        topics=[list_resp.OngoingTopicReassignment(name=t, partitions=ps) for t, ps in by_topic.items()])
