"""ShareGroupDescribe (API 77, v1): KIP-932 share groups, their members with their assignments
by topic id and name.

Authorization as Kafka's ``KafkaApis.handleShareGroupDescribe``: DESCRIBE on the group
(GROUP_AUTHORIZATION_FAILED), then DESCRIBE on every topic the members are assigned or
subscribe to (the group answers TOPIC_AUTHORIZATION_FAILED otherwise). A group that does not
exist, or is a classic or consumer group, answers GROUP_ID_NOT_FOUND with a message. The
assignor is "simple" (``coordinator/group/share/simple_assignor.py``).
"""

from __future__ import annotations

from odradek.coordinator.group.share.simple_assignor import NAME as SIMPLE
from odradek.protocol.acl_binding import DESCRIBE, GROUP, TOPIC
from odradek.protocol.generated.error_codes import ErrorCode
from odradek.protocol.generated.share_group_describe_response import (
    Assignment,
    DescribedGroup,
    Member,
    ShareGroupDescribeResponse,
    TopicPartitions,
)
from odradek.server import authorize
from odradek.server.acl_operations import GROUP_OPERATIONS, authorized


def handle(ctx, request) -> ShareGroupDescribeResponse:
    coordinator = ctx.broker.group_coordinator
    image = ctx.broker.metadata_image()
    return ShareGroupDescribeResponse(throttle_time_ms=0, groups=[_one(ctx, coordinator, image, g, request)
                                                                  for g in request.group_ids])


def _one(ctx, coordinator, image, group_id: str, request) -> DescribedGroup:
    if not authorize.allowed(ctx, DESCRIBE, GROUP, group_id):
        return DescribedGroup(error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED, group_id=group_id)
    if coordinator is None:
        return DescribedGroup(error_code=ErrorCode.COORDINATOR_NOT_AVAILABLE, group_id=group_id)
    error, group = coordinator.share_group(group_id)
    if error != ErrorCode.NONE:
        return DescribedGroup(error_code=error, group_id=group_id)
    if group is None or group.dead:
        return DescribedGroup(error_code=ErrorCode.GROUP_ID_NOT_FOUND, group_id=group_id,
                              error_message=f"Group {group_id} not found.")
    members = [Member(member_id=m.member_id, rack_id=m.rack_id, member_epoch=m.member_epoch, client_id=m.client_id,
                      client_host=m.client_host, subscribed_topic_names=sorted(m.subscribed_topic_names),
                      assignment=_assignment(m.assigned_partitions, image))
               for m in sorted(group.members.values(), key=lambda m: m.member_id)]
    topics = {t.topic_name for m in members for t in m.assignment.topic_partitions}
    topics |= {n for m in members for n in m.subscribed_topic_names}
    if any(not authorize.allowed(ctx, DESCRIBE, TOPIC, t) for t in sorted(topics)):
        return DescribedGroup(error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED, group_id=group_id,
                              error_message="The group has described topic(s) that the client is not "
                                            "authorized to describe.")
    return DescribedGroup(
        error_code=ErrorCode.NONE, group_id=group_id, group_state=group.state.value, group_epoch=group.group_epoch,
        assignment_epoch=group.assignment_epoch, assignor_name=SIMPLE, members=members,
        authorized_operations=authorized(request.include_authorized_operations,
                                         authorize.allowed_operations(ctx, GROUP, group_id, GROUP_OPERATIONS)))


def _assignment(partitions, image) -> Assignment:
    out = []
    for topic_id, ps in sorted(partitions.items()):
        name = image.topic_ids.get(topic_id)
        if name is not None:  # a deleted topic is left out, as Kafka does
            out.append(TopicPartitions(topic_id=topic_id, topic_name=name, partitions=sorted(ps)))
    return Assignment(topic_partitions=out)
