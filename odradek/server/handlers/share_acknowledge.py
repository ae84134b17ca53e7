"""ShareAcknowledge (API 79, v1): a share consumer's acknowledgements outside a ShareFetch
(Kafka 4.2's KafkaApis.handleShareAcknowledgeRequest; KIP-932).

Checks in Kafka's order: a group id and member id (INVALID_REQUEST), READ on the group
(GROUP_AUTHORIZATION_FAILED), the share session's epoch (``server/share/share_session_cache.py``:
0 is INVALID_SHARE_SESSION_EPOCH, -1 closes the session, otherwise the epoch it expects); then
per partition: the topic id known (UNKNOWN_TOPIC_ID), READ on the topic
(TOPIC_AUTHORIZATION_FAILED), led here (NOT_LEADER_OR_FOLLOWER with CurrentLeader and the
leader's NodeEndpoints), then ``SharePartitionManager.acknowledge``: answered only once the
persister wrote the new states. Closing the session (-1) releases what the member still holds
in the session's partitions after its acknowledgements.

The helpers here (``resolve``, ``leader_error``, ``acknowledgement_batches``) serve
``share_fetch.py`` too.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from uuid import UUID

from odradek.protocol.acl_binding import GROUP, READ, TOPIC
from odradek.protocol.generated.error_codes import ErrorCode
from odradek.protocol.generated.share_acknowledge_response import (
    LeaderIdAndEpoch,
    NodeEndpoint,
    PartitionData,
    ShareAcknowledgeResponse,
    ShareAcknowledgeTopicResponse,
)
from odradek.server import authorize
from odradek.server.share.share_session_cache import FINAL_EPOCH
from odradek.server.share.share_types import AcknowledgementBatch


@dataclass(slots=True)
class Resolved:
    """One requested partition: its topic name (None: unknown id), the error found before the
    share-partition is touched, and the leader to name with NOT_LEADER_OR_FOLLOWER."""

    topic_id: UUID
    partition: int
    topic: str | None
    error: ErrorCode = ErrorCode.NONE
    part: object = None
    leader: tuple[int, int] | None = None  # (leader id, leader epoch)
    batches: list = field(default_factory=list)


def request_error(ctx, group_id: str | None, member_id: str | None) -> ErrorCode:
    """The whole-request checks of ShareFetch and ShareAcknowledge before the session's."""
    if not group_id or not member_id:
        return ErrorCode.INVALID_REQUEST
    if not authorize.allowed(ctx, READ, GROUP, group_id):
        return ErrorCode.GROUP_AUTHORIZATION_FAILED
    if getattr(ctx.broker, "share_partition_manager", None) is None:
        return ErrorCode.COORDINATOR_NOT_AVAILABLE
    return ErrorCode.NONE


def resolve(ctx, image, topic_id: UUID, partition: int) -> Resolved:
    """Name, authorize and locate one requested partition."""
    assignment = image.topic_by_id(topic_id)
    if assignment is None:
        return Resolved(topic_id, partition, None, ErrorCode.UNKNOWN_TOPIC_ID)
    name = assignment.name
    if not authorize.allowed(ctx, READ, TOPIC, name):
        return Resolved(topic_id, partition, name, ErrorCode.TOPIC_AUTHORIZATION_FAILED)
    return locate(ctx.broker, image, Resolved(topic_id, partition, name))


def locate(broker, image, r: Resolved) -> Resolved:
    part, error = broker.leader_partition(r.topic, r.partition)
    r.part, r.error = part, error
    if error is ErrorCode.NOT_LEADER_OR_FOLLOWER:
        state = image.partition_state(r.topic, r.partition)
        if state is not None and state.leader >= 0:
            r.leader = (state.leader, state.leader_epoch)
    return r


def node_endpoints(ctx, image, leaders: set[int], cls=NodeEndpoint) -> list:
    """NodeEndpoints of the leaders named in CurrentLeader, on the client's listener."""
    out = []
    for broker_id in sorted(leaders):
        info = image.brokers.get(broker_id)
        if info is None or not info.endpoints:
            continue
        e = next((e for e in info.endpoints if e.listener == ctx.connection.listener_name), info.endpoints[0])
        out.append(cls(node_id=broker_id, host=e.host, port=e.port, rack=info.rack))
    return out


def acknowledgement_batches(batches) -> list[AcknowledgementBatch]:
    return [AcknowledgementBatch(b.first_offset, b.last_offset, tuple(b.acknowledge_types)) for b in batches]


async def acknowledge_all(manager, group_id: str, member_id: str, resolved: list[Resolved]) -> dict:
    """``{(topic id, partition): ack error}`` of every resolved partition with acknowledgements."""
    async def one(r: Resolved) -> ErrorCode:
        if r.error is not ErrorCode.NONE:
            return r.error
        return await manager.acknowledge((group_id, r.topic_id, r.partition), member_id,
                                         acknowledgement_batches(r.batches))
    wanted = [r for r in resolved if r.batches]
    codes = await asyncio.gather(*(one(r) for r in wanted))
    return {(r.topic_id, r.partition): code for r, code in zip(wanted, codes)}


async def handle(ctx, request) -> ShareAcknowledgeResponse:
    broker = ctx.broker
    error = request_error(ctx, request.group_id, request.member_id)
    if error is not ErrorCode.NONE:
        return ShareAcknowledgeResponse(error_code=error)
    manager = broker.share_partition_manager
    session = manager.sessions.share_acknowledge(request.group_id, request.member_id,
                                                 request.share_session_epoch)
    if session.error is not ErrorCode.NONE:
        return ShareAcknowledgeResponse(error_code=session.error)
    image = broker.metadata_image()
    resolved = []
    for t in request.topics:
        for p in t.partitions:
            r = resolve(ctx, image, t.topic_id, p.partition_index)
            r.batches = p.acknowledgement_batches
            resolved.append(r)
    codes = await acknowledge_all(manager, request.group_id, request.member_id, resolved)
    if request.share_session_epoch == FINAL_EPOCH and session.closed is not None:
        await manager.release_session(session.closed)
    topics: dict[UUID, ShareAcknowledgeTopicResponse] = {}
    leaders = set()
    for r in resolved:
        pd = PartitionData(partition_index=r.partition, error_code=codes.get((r.topic_id, r.partition), r.error))
        if r.leader is not None:
            pd.current_leader = LeaderIdAndEpoch(*r.leader)
            leaders.add(r.leader[0])
        else:
            pd.current_leader = LeaderIdAndEpoch(-1, -1)
        topics.setdefault(r.topic_id, ShareAcknowledgeTopicResponse(topic_id=r.topic_id)).partitions.append(pd)
    return ShareAcknowledgeResponse(
        error_code=ErrorCode.NONE, responses=list(topics.values()),
        acquisition_lock_timeout_ms=manager.record_lock_duration_ms(request.group_id),
        node_endpoints=node_endpoints(ctx, image, leaders))
