"""ConsumerGroupDescribe (API 69): KIP-848 consumer groups, members with their current and
target assignments by topic id and name.

Authorization as Kafka's ``KafkaApis.handleConsumerGroupDescribe``: DESCRIBE on the group
(GROUP_AUTHORIZATION_FAILED), then DESCRIBE on every topic the group's members are assigned
or subscribe to (the whole group answers TOPIC_AUTHORIZATION_FAILED otherwise). A group that
does not exist, or is a classic group, answers GROUP_ID_NOT_FOUND with a message.
"""

from __future__ import annotations

from odradek.protocol.acl_binding import DESCRIBE, GROUP, TOPIC
from odradek.protocol.generated.consumer_group_describe_response import (
    Assignment,
    ConsumerGroupDescribeResponse,
    DescribedGroup,
    Member,
    TopicPartitions,
)
from odradek.coordinator.group.group_config import consumer_protocol_enabled
from odradek.protocol.generated.error_codes import ErrorCode
from odradek.server import authorize
from odradek.server.acl_operations import GROUP_OPERATIONS, authorized


def handle(ctx, request) -> ConsumerGroupDescribeResponse:
    if not consumer_protocol_enabled(ctx.broker.config):  # group.coordinator.rebalance.protocols
        return ConsumerGroupDescribeResponse(throttle_time_ms=0, groups=[
            DescribedGroup(error_code=ErrorCode.UNSUPPORTED_VERSION, group_id=g) for g in request.group_ids])
    coordinator = ctx.broker.group_coordinator
    image = ctx.broker.metadata_image()
    groups = []
    for group_id in request.group_ids:
        if not authorize.allowed(ctx, DESCRIBE, GROUP, group_id):
            groups.append(DescribedGroup(error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED, group_id=group_id))
            continue
        if coordinator is None:
            groups.append(DescribedGroup(error_code=ErrorCode.COORDINATOR_NOT_AVAILABLE, group_id=group_id))
            continue
        error, group = coordinator.consumer_group(group_id)
        if error != ErrorCode.NONE:
            groups.append(DescribedGroup(error_code=error, group_id=group_id))
            continue
        if group is None or group.dead:
            groups.append(DescribedGroup(error_code=ErrorCode.GROUP_ID_NOT_FOUND, group_id=group_id,
                                         error_message=f"Group {group_id} not found."))
            continue
        described = _describe(group, image, coordinator.config.consumer_assignors[0])
        topics = {t.topic_name for m in described.members for a in (m.assignment, m.target_assignment)
                  for t in a.topic_partitions} | {n for m in described.members for n in m.subscribed_topic_names}
        if any(not authorize.allowed(ctx, DESCRIBE, TOPIC, t) for t in sorted(topics)):
            groups.append(DescribedGroup(error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED, group_id=group_id,
                                         error_message="The group has described topic(s) that the client "
                                                       "is not authorized to describe."))
            continue
        described.authorized_operations = authorized(
            request.include_authorized_operations, authorize.allowed_operations(ctx, GROUP, group_id, GROUP_OPERATIONS))
        groups.append(described)
    return ConsumerGroupDescribeResponse(throttle_time_ms=0, groups=groups)


def _assignment(partitions, image) -> Assignment:
    out = []
    for topic_id, ps in sorted(partitions.items()):
        name = image.topic_ids.get(topic_id)
        if name is not None:  # a deleted topic is left out, as Kafka does
            out.append(TopicPartitions(topic_id=topic_id, topic_name=name, partitions=sorted(ps)))
    return Assignment(topic_partitions=out)


def _describe(group, image, default_assignor: str) -> DescribedGroup:
    members = [Member(member_id=m.member_id, instance_id=m.instance_id, rack_id=m.rack_id, member_epoch=m.member_epoch,
                      client_id=m.client_id, client_host=m.client_host,
                      subscribed_topic_names=sorted(m.subscribed_topic_names),
                      subscribed_topic_regex=m.subscribed_topic_regex,
                      assignment=_assignment(m.assigned_partitions, image),
                      target_assignment=_assignment(group.target_of(m.member_id), image))
               for m in sorted(group.members.values(), key=lambda m: m.member_id)]
    return DescribedGroup(error_code=ErrorCode.NONE, group_id=group.group_id, group_state=group.state.value,
                          group_epoch=group.group_epoch, assignment_epoch=group.assignment_epoch,
                          assignor_name=group.preferred_assignor() or default_assignor, members=members)
