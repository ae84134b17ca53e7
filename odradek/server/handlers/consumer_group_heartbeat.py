"""ConsumerGroupHeartbeat (API 68): a KIP-848 consumer group member's join, heartbeat and
leave (``coordinator/group/consumer/``).

Refused with UNSUPPORTED_VERSION, before anything else, when
``group.coordinator.rebalance.protocols`` leaves out ``consumer`` (Kafka's
``KafkaApis.handleConsumerGroupHeartbeat``; ApiVersions still lists the API, as Kafka's does).

Authorization as Kafka's ``KafkaApis.handleConsumerGroupHeartbeat``: READ on the group
(GROUP_AUTHORIZATION_FAILED), and DESCRIBE on every subscribed topic name
(TOPIC_AUTHORIZATION_FAILED when one is missing). A regex subscription matches only the
topics the member may DESCRIBE (the coordinator is given that check). The answer carries
the member's assignment by topic id, only when it changed or the request was a full one.
"""

from __future__ import annotations

from odradek.coordinator.group.consumer.consumer_group_heartbeat import HeartbeatRequest, HeartbeatResult
from odradek.coordinator.group.group_config import consumer_protocol_enabled
from odradek.protocol.acl_binding import DESCRIBE, GROUP, READ, TOPIC
from odradek.protocol.generated.consumer_group_heartbeat_response import (
    Assignment,
    ConsumerGroupHeartbeatResponse,
    TopicPartitions,
)
from odradek.protocol.generated.error_codes import ErrorCode
from odradek.server import authorize
from odradek.server.handlers.groups import client_host


async def handle(ctx, request) -> ConsumerGroupHeartbeatResponse:
    if not consumer_protocol_enabled(ctx.broker.config):
        return _response(HeartbeatResult(ErrorCode.UNSUPPORTED_VERSION))
    coordinator = ctx.broker.group_coordinator
    if not authorize.allowed(ctx, READ, GROUP, request.group_id):
        return _response(HeartbeatResult(ErrorCode.GROUP_AUTHORIZATION_FAILED))
    names = request.subscribed_topic_names
    if names:
        denied = [n for n in names if not authorize.allowed(ctx, DESCRIBE, TOPIC, n)]
        if denied:
            return _response(HeartbeatResult(ErrorCode.TOPIC_AUTHORIZATION_FAILED,
                                             f"The client is not authorized to describe topics: {', '.join(denied)}."))
    if coordinator is None:
        return _response(HeartbeatResult(ErrorCode.COORDINATOR_NOT_AVAILABLE))
    # Every heartbeat brings its principal's DESCRIBE check: whichever member's heartbeat
    # schedules the group's regex resolution, its principal filters the matched topics
    # (Kafka's filterTopicDescribeAuthorizedTopics; coordinator/group/consumer/regex_resolution.py).
    describable = None
    if authorize.enabled(ctx):
        def describable(topic: str) -> bool:
            return authorize.allowed(ctx, DESCRIBE, TOPIC, topic, log_if_denied=False)
    owned = None
    if request.topic_partitions is not None:
        owned = {tp.topic_id: frozenset(tp.partitions) for tp in request.topic_partitions if tp.partitions}
    req = HeartbeatRequest(
        group_id=request.group_id, member_id=request.member_id, member_epoch=request.member_epoch,
        instance_id=request.instance_id, rack_id=request.rack_id, rebalance_timeout_ms=request.rebalance_timeout_ms,
        subscribed_topic_names=None if names is None else tuple(names),
        subscribed_topic_regex=request.subscribed_topic_regex if ctx.api_version >= 1 else None,
        server_assignor=request.server_assignor, owned=owned, client_id=ctx.client_id or "",
        client_host=client_host(ctx), api_version=ctx.api_version, describable=describable)
    return _response(await coordinator.consumer_group_heartbeat(req))


def _response(r: HeartbeatResult) -> ConsumerGroupHeartbeatResponse:
    assignment = None
    if r.assignment is not None:
        assignment = Assignment(topic_partitions=[TopicPartitions(topic_id=t, partitions=sorted(ps))
                                                  for t, ps in sorted(r.assignment.items())])
    return ConsumerGroupHeartbeatResponse(
        throttle_time_ms=0, error_code=r.error, error_message=r.error_message, member_id=r.member_id,
        member_epoch=r.member_epoch, heartbeat_interval_ms=r.heartbeat_interval_ms, assignment=assignment)
