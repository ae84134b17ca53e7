"""ShareGroupHeartbeat (API 76, v1): a KIP-932 share consumer's join, heartbeat and leave
(``coordinator/group/share/``).

Authorization as Kafka's ``KafkaApis.handleShareGroupHeartbeat``: READ on the group
(GROUP_AUTHORIZATION_FAILED), and DESCRIBE on every subscribed topic name
(TOPIC_AUTHORIZATION_FAILED naming the topics). The answer carries the member's assignment by
topic id when it joined or its assignment changed; the heartbeat interval is
``group.share.heartbeat.interval.ms`` (or the group's ``share.heartbeat.interval.ms``).
"""

from __future__ import annotations

from odradek.coordinator.group.share.share_group_heartbeat import ShareHeartbeatRequest, ShareHeartbeatResult
from odradek.protocol.acl_binding import DESCRIBE, GROUP, READ, TOPIC
from odradek.protocol.generated.error_codes import ErrorCode
from odradek.protocol.generated.share_group_heartbeat_response import (
    Assignment,
    ShareGroupHeartbeatResponse,
    TopicPartitions,
)
from odradek.server import authorize
from odradek.server.handlers.groups import client_host


async def handle(ctx, request) -> ShareGroupHeartbeatResponse:
    coordinator = ctx.broker.group_coordinator
    if not authorize.allowed(ctx, READ, GROUP, request.group_id):
        return _response(ShareHeartbeatResult(ErrorCode.GROUP_AUTHORIZATION_FAILED))
    names = request.subscribed_topic_names
    if names:
        denied = [n for n in names if not authorize.allowed(ctx, DESCRIBE, TOPIC, n)]
        if denied:
            return _response(ShareHeartbeatResult(ErrorCode.TOPIC_AUTHORIZATION_FAILED,
                                                  f"The client is not authorized to describe topics: "
                                                  f"{', '.join(denied)}."))
    if coordinator is None:
        return _response(ShareHeartbeatResult(ErrorCode.COORDINATOR_NOT_AVAILABLE))
    req = ShareHeartbeatRequest(
        group_id=request.group_id, member_id=request.member_id, member_epoch=request.member_epoch,
        rack_id=request.rack_id, subscribed_topic_names=None if names is None else tuple(names),
        client_id=ctx.client_id or "", client_host=client_host(ctx))
    return _response(await coordinator.share_group_heartbeat(req))


def _response(r: ShareHeartbeatResult) -> ShareGroupHeartbeatResponse:
    assignment = None
    if r.assignment is not None:
        assignment = Assignment(topic_partitions=[TopicPartitions(topic_id=t, partitions=sorted(ps))
                                                  for t, ps in sorted(r.assignment.items())])
    return ShareGroupHeartbeatResponse(
        throttle_time_ms=0, error_code=r.error, error_message=r.error_message, member_id=r.member_id,
        member_epoch=r.member_epoch, heartbeat_interval_ms=r.heartbeat_interval_ms, assignment=assignment)
