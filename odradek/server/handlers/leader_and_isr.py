"""LeaderAndIsr (key 4): the controller gives this broker its roles (leader or follower) and
each partition's leader epoch, ISR, replicas and state znode version.

Every version: v0-1 list the partitions flat (``ungrouped_partition_states``, each naming
its topic), v2+ per topic (``topic_states``), v5+ with topic ids. The decisions are
``replication/role_change.py``'s, the work ``replication/state_change.py``'s.

The response: v0-4 one error per partition (``partition_errors``), v5+ grouped by topic id
(``topics``). A whole-request error (STALE_BROKER_EPOCH, STALE_CONTROLLER_EPOCH) is the
response's ``error_code`` and every partition's, as Kafka's ``getErrorResponse`` answers.
"""

from __future__ import annotations

from odradek.controller.commands import LeaderAndIsrPartition
from odradek.protocol.generated.error_codes import ErrorCode
from odradek.protocol.generated.leader_and_isr_response import (
    LeaderAndIsrPartitionError, LeaderAndIsrResponse, LeaderAndIsrTopicError,
)
from odradek.protocol.primitives import ZERO_UUID
from odradek.replication.role_change import ControlHeader
from odradek.replication.state_change import become_leader_or_follower
from odradek.protocol import acl_binding as acl
from odradek.server import authorize

TOPIC_IDS_FROM = 5  # the first version with topic ids (request and response)


async def handle(ctx, request):
    states = partition_roles(request)
    if not authorize.allowed_cluster(ctx, acl.CLUSTER_ACTION):  # from the controller only (Kafka: CLUSTER_ACTION)
        return response(ctx.api_version, ErrorCode.CLUSTER_AUTHORIZATION_FAILED, {}, states)
    header = ControlHeader(request.controller_id, request.controller_epoch, request.broker_epoch)
    error, errors = await become_leader_or_follower(ctx.broker, header, states)
    return response(ctx.api_version, error, errors, states)


def partition_roles(request) -> list[LeaderAndIsrPartition]:
    """The request's partition states, whatever its version, in request order."""
    roles = [_role(s.topic_name, s, None) for s in request.ungrouped_partition_states]
    for topic in request.topic_states:
        topic_id = topic.topic_id if topic.topic_id != ZERO_UUID else None
        roles.extend(_role(topic.topic_name, s, topic_id) for s in topic.partition_states)
    return roles


def _role(topic: str, s, topic_id) -> LeaderAndIsrPartition:
    return LeaderAndIsrPartition(topic, s.partition_index, s.controller_epoch, s.leader, s.leader_epoch,
                                 tuple(s.isr), s.partition_epoch, tuple(s.replicas), is_new=s.is_new,
                                 topic_id=topic_id)


def response(version: int, error, errors: dict, states: list[LeaderAndIsrPartition]) -> LeaderAndIsrResponse:
    """Each partition of the request once, with its error (``error`` for all of them when
    the whole request failed)."""
    answered = {}
    for s in states:
        answered.setdefault(s.key, (s, error if error else errors.get(s.key, ErrorCode.NONE)))
    if version < TOPIC_IDS_FROM:
        return LeaderAndIsrResponse(error_code=error, partition_errors=[
            LeaderAndIsrPartitionError(topic_name=s.topic, partition_index=s.partition, error_code=code)
            for s, code in answered.values()])
    topics: dict[str, LeaderAndIsrTopicError] = {}
    for s, code in answered.values():
        topic = topics.get(s.topic)
        if topic is None:
            topic = topics[s.topic] = LeaderAndIsrTopicError(topic_id=s.topic_id or ZERO_UUID)
        topic.partition_errors.append(LeaderAndIsrPartitionError(partition_index=s.partition, error_code=code))
    return LeaderAndIsrResponse(error_code=error, topics=list(topics.values()))
