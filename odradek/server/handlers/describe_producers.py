"""DescribeProducers (key 61, v0): the active producers of partitions this broker leads, as
``kafka-transactions.sh describe-producers`` shows them (KIP-664).

Per partition: not led here → NOT_LEADER_OR_FOLLOWER; unknown → UNKNOWN_TOPIC_OR_PARTITION;
else every producer id of its producer state with its epoch, last sequence (-1 when none is
cached), last timestamp, coordinator epoch (-1 when no marker was seen) and the first offset
of its open transaction (-1 when none).
"""

from __future__ import annotations

from odradek.protocol.generated.describe_producers_response import (
    DescribeProducersResponse,
    PartitionResponse,
    ProducerState,
    TopicResponse,
)
from odradek.protocol.generated.error_codes import ErrorCode
from odradek.protocol import acl_binding as acl
from odradek.server import authorize


def handle(ctx, request):
    broker = ctx.broker
    topics = []
    for topic in request.topics:
        if not authorize.allowed(ctx, acl.READ, acl.TOPIC, topic.name):  # Kafka: READ on the topic
            partitions = [PartitionResponse(partition_index=i, error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED,
                                            active_producers=[]) for i in topic.partition_indexes]
        else:
            partitions = [_describe(broker, topic.name, index) for index in topic.partition_indexes]
        topics.append(TopicResponse(name=topic.name, partitions=partitions))
    return DescribeProducersResponse(throttle_time_ms=0, topics=topics)


def _describe(broker, topic: str, index: int) -> PartitionResponse:
    part, error = broker.leader_partition(topic, index)
    if part is None:
        return PartitionResponse(partition_index=index, error_code=error, active_producers=[])
    producers = []
    for producer_id in sorted(part.producer_state.entries()):
        entry = part.producer_state.entry(producer_id)
        txn = entry.current_txn_first_offset
        producers.append(ProducerState(
            producer_id=producer_id, producer_epoch=entry.epoch, last_sequence=entry.last_seq,
            last_timestamp=entry.last_timestamp, coordinator_epoch=entry.coordinator_epoch,
            current_txn_start_offset=-1 if txn is None else txn))
    return PartitionResponse(partition_index=index, error_code=ErrorCode.NONE, active_producers=producers)
