"""ShareFetch (API 78, v1): a share consumer's acknowledgements and its next records (Kafka
4.2's KafkaApis.handleShareFetchRequest and SharePartitionManager; KIP-932).

In order:
1. Whole-request checks (``share_acknowledge.request_error``): group and member ids,
   READ on the group. Acknowledgements at epoch 0 are INVALID_REQUEST (no session holds
   records yet).
2. A new session (epoch 0) needs a member of the share group: when this broker coordinates the
   group, a member it does not know is UNKNOWN_MEMBER_ID; elsewhere the group's coordinator is
   not asked (Kafka's share-partition leaders do not ask either), and a stranger can only
   acquire records, which time out.
3. The requested partitions are resolved (UNKNOWN_TOPIC_ID, TOPIC_AUTHORIZATION_FAILED,
   NOT_LEADER_OR_FOLLOWER with CurrentLeader and NodeEndpoints); those failing are answered
   and kept out of the session. The session's epoch rules (``share_session_cache.py``) apply:
   SHARE_SESSION_NOT_FOUND, INVALID_SHARE_SESSION_EPOCH, SHARE_SESSION_LIMIT_REACHED
   (group.share.max.share.sessions). A session replaced at epoch 0 gives up its records. A
   session belongs to the connection that opened it: that connection's close ends it.
4. The piggy-backed AcknowledgementBatches are applied and answered per partition
   (AcknowledgeErrorCode), written through the persister first.
5. Epoch -1 closes the session: what the member still holds is released, nothing is fetched.
   Otherwise each partition of the session led here is fetched
   (``server/share/delayed_share_fetch.py``: MaxRecords, MaxBytes, MaxWaitMs).

The answer lists the partitions of this request, and at epoch 0 every partition of the
session, plus any other with records or an error. AcquisitionLockTimeoutMs is the group's
record lock duration. Records are never null: a partition with nothing acquired, or with an
error, gets an empty record set, as Kafka's ShareFetchResponse.toMessage (librdkafka drops a
whole response whose Records are null as malformed).
"""

from __future__ import annotations

from uuid import UUID

from odradek.protocol.generated.error_codes import ErrorCode
from odradek.protocol.generated.share_fetch_response import (
    AcquiredRecords,
    LeaderIdAndEpoch,
    NodeEndpoint,
    PartitionData,
    ShareFetchableTopicResponse,
    ShareFetchResponse,
)
from odradek.server.handlers.share_acknowledge import (
    Resolved, acknowledge_all, locate, node_endpoints, request_error, resolve,
)
from odradek.server.share.delayed_share_fetch import ShareFetchLimits, ShareFetchTarget, fetch_and_acquire
from odradek.server.share.share_session_cache import FINAL_EPOCH, INITIAL_EPOCH


async def handle(ctx, request) -> ShareFetchResponse:
    broker = ctx.broker
    group_id, member_id, epoch = request.group_id, request.member_id, request.share_session_epoch
    error = request_error(ctx, group_id, member_id)
    has_acks = any(p.acknowledgement_batches for t in request.topics for p in t.partitions)
    if error is ErrorCode.NONE and epoch == INITIAL_EPOCH:
        if has_acks:
            error = ErrorCode.INVALID_REQUEST
        elif not is_member(broker, group_id, member_id):
            error = ErrorCode.UNKNOWN_MEMBER_ID
    if error is not ErrorCode.NONE:
        return ShareFetchResponse(error_code=error)
    manager = broker.share_partition_manager
    image = broker.metadata_image()
    resolved = []
    for t in request.topics:
        for p in t.partitions:
            r = resolve(ctx, image, t.topic_id, p.partition_index)
            r.batches = p.acknowledgement_batches
            resolved.append(r)
    forgotten = [(t.topic_id, p) for t in request.forgotten_topics_data for p in t.partitions]
    added = [(r.topic_id, r.partition) for r in resolved if r.error is not ErrorCode.UNKNOWN_TOPIC_ID
             and r.error is not ErrorCode.TOPIC_AUTHORIZATION_FAILED]
    session = manager.sessions.share_fetch(group_id, member_id, epoch, added, forgotten,
                                           connection_id=getattr(ctx.connection, "connection_id", None))
    if session.error is not ErrorCode.NONE:
        return ShareFetchResponse(error_code=session.error)
    if session.closed is not None and epoch == INITIAL_EPOCH:
        await manager.release_session(session.closed)
    ack_codes = await acknowledge_all(manager, group_id, member_id, resolved)
    answered: dict[tuple[UUID, int], Resolved] = {(r.topic_id, r.partition): r for r in resolved}
    targets: list[ShareFetchTarget] = []
    if epoch == FINAL_EPOCH:
        await manager.release_session(session.closed)
    else:
        for tp in session.session.partitions:
            r = answered.get(tp) or _resolve_held(broker, image, tp)
            if epoch == INITIAL_EPOCH:
                answered[tp] = r
            if r.error is ErrorCode.NONE:
                key = (group_id, tp[0], tp[1])
                sp, r.error = await manager.share_partition(key, r.topic, r.part)
                if sp is not None:
                    targets.append(ShareFetchTarget(key, r.topic, r.part, sp))
            if r.error is not ErrorCode.NONE:
                answered[tp] = r
        limits = ShareFetchLimits(request.max_wait_ms, request.max_bytes, request.max_records or 500,
                                  manager.read_committed(group_id))
        await fetch_and_acquire(manager, broker.replica_manager, broker.loop_time, member_id, targets, limits)
    return _response(ctx, image, manager.record_lock_duration_ms(group_id), answered, ack_codes, targets)


def is_member(broker, group_id: str, member_id: str) -> bool:
    """False only when this broker coordinates ``group_id`` and knows no such share member."""
    coordinator = getattr(broker, "group_coordinator", None)
    if coordinator is None:
        return True
    error, group = coordinator.share_group(group_id)
    if error is not ErrorCode.NONE:
        return True  # coordinated elsewhere (or loading): not checked here
    return group is not None and group.member(member_id) is not None


def _resolve_held(broker, image, tp: tuple[UUID, int]) -> Resolved:
    """A partition of the session not named in this request (authorized when it was)."""
    assignment = image.topic_by_id(tp[0])
    if assignment is None:
        return Resolved(tp[0], tp[1], None, ErrorCode.UNKNOWN_TOPIC_ID)
    return locate(broker, image, Resolved(tp[0], tp[1], assignment.name))


def _response(ctx, image, lock_ms: int, answered: dict, ack_codes: dict,
              targets: list[ShareFetchTarget]) -> ShareFetchResponse:
    fetched = {(t.key[1], t.key[2]): t for t in targets}
    keys = list(answered) + [k for k, t in fetched.items() if k not in answered and t.acquired]
    topics: dict[UUID, ShareFetchableTopicResponse] = {}
    leaders: set[int] = set()
    for tp in keys:
        r, t = answered.get(tp), fetched.get(tp)
        pd = PartitionData(partition_index=tp[1], error_code=r.error if r is not None else ErrorCode.NONE,
                           acknowledge_error_code=ack_codes.get(tp, ErrorCode.NONE),
                           current_leader=LeaderIdAndEpoch(-1, -1), records=b"")
        if r is not None and r.leader is not None:
            pd.current_leader = LeaderIdAndEpoch(*r.leader)
            leaders.add(r.leader[0])
        if t is not None and t.acquired:
            pd.records = t.records
            pd.acquired_records = [AcquiredRecords(a.first_offset, a.last_offset, a.delivery_count)
                                   for a in t.acquired]
        topics.setdefault(tp[0], ShareFetchableTopicResponse(topic_id=tp[0])).partitions.append(pd)
    return ShareFetchResponse(error_code=ErrorCode.NONE, acquisition_lock_timeout_ms=lock_ms,
                              responses=list(topics.values()),
                              node_endpoints=node_endpoints(ctx, image, leaders, NodeEndpoint))
