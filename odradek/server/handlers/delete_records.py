"""DeleteRecords (key 21): move a partition's log start offset forward.

An offset of -1 means the high watermark. Offsets above the high watermark are refused with
OFFSET_OUT_OF_RANGE; the answer's low watermark is the new log start offset. Whole segments
below it are deleted by the log; reads below it get OFFSET_OUT_OF_RANGE from then on.
"""

from __future__ import annotations

from odradek.protocol.generated.delete_records_response import (
    DeleteRecordsPartitionResult, DeleteRecordsResponse, DeleteRecordsTopicResult,
)
from odradek.protocol.generated.error_codes import ErrorCode
from odradek.protocol import acl_binding as acl
from odradek.server import authorize

HIGH_WATERMARK = -1


def handle(ctx, request):
    broker = ctx.broker
    topics = []
    for topic in request.topics:
        results = []
        deletable = authorize.allowed(ctx, acl.DELETE, acl.TOPIC, topic.name)  # Kafka: DELETE on the topic
        for p in topic.partitions:
            result = DeleteRecordsPartitionResult(partition_index=p.partition_index, low_watermark=-1)
            part, error = broker.leader_partition(topic.name, p.partition_index)
            if not deletable:
                result.error_code = ErrorCode.TOPIC_AUTHORIZATION_FAILED
            elif part is None:
                result.error_code = error
            else:
                offset = part.high_watermark if p.offset == HIGH_WATERMARK else p.offset
                if offset < 0 or offset > part.high_watermark:
                    result.error_code = ErrorCode.OFFSET_OUT_OF_RANGE
                else:
                    part.log.delete_records(offset)
                    broker.replica_manager.notify(part.key)  # fetch sessions answer the new log start
                    result.low_watermark = part.log_start_offset
            results.append(result)
        topics.append(DeleteRecordsTopicResult(name=topic.name, partitions=results))
    return DeleteRecordsResponse(throttle_time_ms=0, topics=topics)
