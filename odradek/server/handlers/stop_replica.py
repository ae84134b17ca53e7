"""StopReplica (key 5): the controller tells this broker to stop replicas, and to delete
them when their topic is deleted or they were moved away.

Every version: v0 lists partitions flat (``ungrouped_partitions``) and v1-2 per topic
(``topics``), both with one ``delete_partitions`` for the whole request and no leader
epochs; v3+ per topic with each partition's leader epoch and ``delete_partition``
(``topic_states``). Decisions: ``replication/role_change.py``; work:
``replication/state_change.py``. A whole-request error (STALE_BROKER_EPOCH,
STALE_CONTROLLER_EPOCH) is the response's ``error_code`` with no partitions, as Kafka answers.
"""

from __future__ import annotations

from odradek.protocol.generated.error_codes import ErrorCode
from odradek.protocol.generated.stop_replica_response import StopReplicaPartitionError, StopReplicaResponse
from odradek.replication.role_change import NO_EPOCH, ControlHeader, StopReplicaPartition
from odradek.replication.state_change import stop_replicas
from odradek.protocol import acl_binding as acl
from odradek.server import authorize


async def handle(ctx, request):
    if not authorize.allowed_cluster(ctx, acl.CLUSTER_ACTION):  # from the controller only (Kafka: CLUSTER_ACTION)
        return StopReplicaResponse(error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
    partitions = stop_replica_partitions(request)
    header = ControlHeader(request.controller_id, request.controller_epoch, request.broker_epoch)
    error, errors = await stop_replicas(ctx.broker, header, partitions)
    if error != ErrorCode.NONE:
        return StopReplicaResponse(error_code=error)
    answered = {}
    for p in partitions:
        answered.setdefault(p.key, errors.get(p.key, ErrorCode.NONE))
    return StopReplicaResponse(error_code=ErrorCode.NONE, partition_errors=[
        StopReplicaPartitionError(topic_name=topic, partition_index=index, error_code=code)
        for (topic, index), code in answered.items()])


def stop_replica_partitions(request) -> list[StopReplicaPartition]:
    """The request's partitions, whatever its version, in request order."""
    delete = request.delete_partitions  # v0-2
    out = [StopReplicaPartition(p.topic_name, p.partition_index, NO_EPOCH, delete)
           for p in request.ungrouped_partitions]
    for topic in request.topics:
        out.extend(StopReplicaPartition(topic.name, index, NO_EPOCH, delete) for index in topic.partition_indexes)
    for topic in request.topic_states:
        out.extend(StopReplicaPartition(topic.topic_name, p.partition_index, p.leader_epoch, p.delete_partition)
                   for p in topic.partition_states)
    return out
