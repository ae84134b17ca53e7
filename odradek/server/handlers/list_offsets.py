"""ListOffsets (key 2): offsets by time, and the earliest and latest offsets.

Special timestamps: -2 earliest (the log start offset), -1 latest (the high watermark for
``read_uncommitted``, the last stable offset for ``read_committed``; the log end offset for a
follower asking), -3 the record with the largest timestamp (v7+), -4 earliest local (v8+; all of
odradek's log is local, so the log start offset). Any other timestamp t gives the first offset
whose record timestamp is at least t below the high watermark (the LSO for
``read_committed``), or -1 (with timestamp -1) when there is none. Version 0
answers in ``old_style_offsets``. -3 answers the offset of the record with the largest timestamp
(the first one, if several), not of its batch (Kafka 3.8, KAFKA-16310).

A lookup that meets a batch the log cannot decode (stored before its records were validated)
answers CORRUPT_MESSAGE for that partition alone, and one the disk fails KAFKA_STORAGE_ERROR.
"""

from __future__ import annotations

from collections import Counter

from odradek.protocol.generated.error_codes import ErrorCode
from odradek.protocol.generated.list_offsets_response import (
    ListOffsetsPartitionResponse, ListOffsetsResponse, ListOffsetsTopicResponse,
)
from odradek.protocol import acl_binding as acl
from odradek.server.read_errors import answer_read_error
from odradek.server import authorize

LATEST, EARLIEST, MAX_TIMESTAMP, EARLIEST_LOCAL, LATEST_TIERED = -1, -2, -3, -4, -5
READ_COMMITTED = 1


def handle(ctx, request):
    """A partition asked for twice in one request is INVALID_REQUEST each time (Kafka's
    ``ListOffsetsRequest.duplicatePartitions``): which timestamp should win is unclear."""
    broker = ctx.broker
    asked = Counter((t.name, p.partition_index) for t in request.topics for p in t.partitions)
    topics = []
    for topic in request.topics:
        if not authorize.allowed(ctx, acl.DESCRIBE, acl.TOPIC, topic.name):  # Kafka: DESCRIBE on the topic
            topics.append(ListOffsetsTopicResponse(name=topic.name, partitions=[
                ListOffsetsPartitionResponse(partition_index=p.partition_index,
                                             error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED)
                for p in topic.partitions]))
            continue
        parts = [ListOffsetsPartitionResponse(partition_index=p.partition_index, error_code=ErrorCode.INVALID_REQUEST)
                 if asked[(topic.name, p.partition_index)] > 1
                 else _one(broker, ctx.api_version, request, topic.name, p) for p in topic.partitions]
        topics.append(ListOffsetsTopicResponse(name=topic.name, partitions=parts))
    return ListOffsetsResponse(throttle_time_ms=0, topics=topics)


def _one(broker, version: int, request, topic: str, p) -> ListOffsetsPartitionResponse:
    resp = ListOffsetsPartitionResponse(partition_index=p.partition_index)
    part, error = broker.leader_partition(topic, p.partition_index)
    if part is None:
        resp.error_code = error
        return resp
    if p.current_leader_epoch >= 0 and p.current_leader_epoch != part.leader_epoch:
        newer = p.current_leader_epoch < part.leader_epoch
        resp.error_code = ErrorCode.FENCED_LEADER_EPOCH if newer else ErrorCode.UNKNOWN_LEADER_EPOCH
        return resp
    try:
        timestamp, offset = _lookup(part, request, p.timestamp)
    except Exception as e:  # a damaged segment or a failing disk: this partition's error only
        resp.error_code = answer_read_error(broker, "offset lookup", topic, p.partition_index, e)
        return resp
    if version == 0:
        resp.old_style_offsets = [offset] if offset >= 0 else []
    else:
        resp.timestamp, resp.offset = timestamp, offset
        resp.leader_epoch = part.leader_epoch
    return resp


def _lookup(part, request, ts: int) -> tuple[int, int]:
    """``(timestamp, offset)`` for one partition; timestamp -1 for the special lookups."""
    if ts in (EARLIEST, EARLIEST_LOCAL):
        return -1, part.log_start_offset
    if ts in (LATEST, LATEST_TIERED):
        if request.replica_id >= 0:
            return -1, part.log_end_offset
        return -1, part.last_stable_offset() if request.isolation_level == READ_COMMITTED else part.high_watermark
    if ts == MAX_TIMESTAMP:
        found = part.log.max_timestamp()
        return found.timestamp, found.offset
    found = part.log.offset_for_timestamp(ts)
    fetchable = part.last_stable_offset() if request.isolation_level == READ_COMMITTED else part.high_watermark
    if found is None or found.offset >= fetchable:
        return -1, -1
    return found.timestamp, found.offset
