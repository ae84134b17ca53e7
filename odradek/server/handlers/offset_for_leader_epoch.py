"""OffsetForLeaderEpoch (key 23): where a leader epoch ends in this leader's log (KIP-101).

A follower coming back asks with its latest epoch and truncates to the answer
(``replication/truncation.py``); a consumer (v3+, ``replica_id`` -1) asks with the epoch of
its last fetched record to detect that the log was truncated under it (KIP-320). The answer is
``Log.end_offset_for_epoch``: the largest epoch at or below the one asked and where it ends
(``LeaderEpochFileCache.end_offset_for``), or epoch -1 and offset -1 when this log has no such
epoch (an empty cache).

Only the leader answers (NOT_LEADER_OR_FOLLOWER elsewhere; UNKNOWN_TOPIC_OR_PARTITION for a
partition that does not exist), as Kafka requires for every ``replica_id`` but the debugging
one (-2, which this broker, hosting no followers yet, answers the same way). A
``current_leader_epoch`` (v2+) other than the partition's is FENCED_LEADER_EPOCH when older,
UNKNOWN_LEADER_EPOCH when newer.
"""

from __future__ import annotations

from odradek.protocol.generated.error_codes import ErrorCode
from odradek.protocol.generated.offset_for_leader_epoch_response import (
    EpochEndOffset, OffsetForLeaderEpochResponse, OffsetForLeaderTopicResult,
)
from odradek.protocol import acl_binding as acl
from odradek.server import authorize


def handle(ctx, request):
    broker = ctx.broker
    # Kafka: a follower (replica_id >= 0, v3+) needs CLUSTER_ACTION, others DESCRIBE on each topic.
    follower = ctx.api_version >= 3 and request.replica_id >= 0
    topics = [
        OffsetForLeaderTopicResult(topic=t.topic, partitions=[
            _one(broker, t.topic, p) if _may(ctx, follower, t.topic)
            else EpochEndOffset(partition=p.partition, error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED)
            for p in t.partitions])
        for t in request.topics
    ]
    return OffsetForLeaderEpochResponse(throttle_time_ms=0, topics=topics)


def _may(ctx, follower: bool, topic: str) -> bool:
    if follower:
        return authorize.allowed_cluster(ctx, acl.CLUSTER_ACTION)
    return authorize.allowed(ctx, acl.DESCRIBE, acl.TOPIC, topic)


def _one(broker, topic: str, p) -> EpochEndOffset:
    answer = EpochEndOffset(partition=p.partition)
    part, error = broker.leader_partition(topic, p.partition)
    if part is None:
        answer.error_code = error
        return answer
    current = p.current_leader_epoch
    if current >= 0 and current != part.leader_epoch:
        answer.error_code = (ErrorCode.FENCED_LEADER_EPOCH if current < part.leader_epoch
                             else ErrorCode.UNKNOWN_LEADER_EPOCH)
        return answer
    answer.leader_epoch, answer.end_offset = part.log.end_offset_for_epoch(p.leader_epoch)
    return answer
