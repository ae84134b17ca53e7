"""WriteTxnMarkers (key 27, v0-v1): a transaction coordinator ends a transaction on the
partitions it touched by writing a COMMIT or ABORT marker to each (Kafka's
``handleWriteTxnMarkersRequest``). Sent by coordinators (``coordinator/transaction``), over
the wire, to each partition's leader; never by clients.

Per marker and partition, independently (one failing partition does not stop the others):

- not hosted here as leader → NOT_LEADER_OR_FOLLOWER; no such topic or partition →
  UNKNOWN_TOPIC_OR_PARTITION; fewer in-sync replicas than ``min.insync.replicas`` →
  NOT_ENOUGH_REPLICAS (nothing appended; the coordinator retries);
- the marker's coordinator epoch below the producer's newest → TRANSACTION_COORDINATOR_FENCED;
  its producer epoch below the producer's → INVALID_PRODUCER_EPOCH
  (``replication/transactions.write_marker``);
- otherwise the control batch is appended, which ends the producer's open transaction (an
  ABORT records it in the segment's ``.txnindex``), and the partition is answered once the
  marker is replicated to the ISR (as acks=all: NOT_LEADER_OR_FOLLOWER when leadership moved
  meanwhile, REQUEST_TIMED_OUT after ``MARKER_REPLICATION_TIMEOUT_S``).

A ``__consumer_offsets`` partition's marker, once replicated, makes the producer's pending
transactional offsets there committed or dropped:
``broker.group_coordinator.complete_transaction(partition, producer_id, commit)``.
"""

from __future__ import annotations

from odradek.protocol.generated.error_codes import ErrorCode
from odradek.protocol.generated.write_txn_markers_response import (
    WritableTxnMarkerPartitionResult,
    WritableTxnMarkerResult,
    WritableTxnMarkerTopicResult,
    WriteTxnMarkersResponse,
)
from odradek.replication.produce_validation import ProduceError
from odradek.replication.transactions import write_marker

OFFSETS_TOPIC = "__consumer_offsets"
# How long a marker waits for the ISR (Kafka uses request.timeout.ms, 30 s by default).
MARKER_REPLICATION_TIMEOUT_S = 30.0


async def handle(ctx, request):
    broker = ctx.broker
    now_ms = broker.clock.milliseconds()
    results = []
    waits = []  # (topic, index, marker offset, partition result)
    completions = []  # (partition result, offsets partition, producer id, commit)
    for marker in request.markers:
        topics = []
        for topic in marker.topics:
            partitions = []
            for index in topic.partition_indexes:
                result = WritableTxnMarkerPartitionResult(partition_index=index)
                error, offset = _write_one(broker, marker, topic.name, index, now_ms)
                result.error_code = error
                if error == ErrorCode.NONE:
                    waits.append((topic.name, index, offset, result))
                    if topic.name == OFFSETS_TOPIC:
                        completions.append((result, index, marker.producer_id, marker.transaction_result))
                partitions.append(result)
            topics.append(WritableTxnMarkerTopicResult(name=topic.name, partitions=partitions))
        results.append(WritableTxnMarkerResult(producer_id=marker.producer_id, topics=topics))
    if waits:
        await _await_replication(broker, waits)
    _complete_offsets(broker, completions)
    return WriteTxnMarkersResponse(markers=results)


def _write_one(broker, marker, topic: str, index: int, now_ms: int) -> tuple[ErrorCode, int]:
    """Append one marker; ``(error, marker offset)``."""
    part, error = broker.leader_partition(topic, index)
    if part is None:
        return error, -1
    min_isr = broker.topics.min_insync_replicas(topic)
    if len(part.isr) < min_isr:
        return ErrorCode.NOT_ENOUGH_REPLICAS, -1
    try:
        result = write_marker(part, marker.producer_id, marker.producer_epoch, marker.coordinator_epoch,
                              marker.transaction_result, now_ms)
    except ProduceError as e:
        if e.error == ErrorCode.KAFKA_STORAGE_ERROR:
            broker.log_storage_error(e)
        else:
            broker.log_bad_input(f"transaction marker for {topic}-{index} refused: {e.error.name}: {e}")
        return e.error, -1
    broker.replica_manager.notify(part.key)
    return ErrorCode.NONE, result.last_offset


async def _await_replication(broker, waits) -> None:
    replica_manager = broker.replica_manager
    if not replica_manager.all_replicated(waits):
        await replica_manager.wait_for_replication(waits, MARKER_REPLICATION_TIMEOUT_S)
    for topic, index, offset, result in waits:
        error = replica_manager.replication_error(topic, index, offset)
        result.error_code = ErrorCode.REQUEST_TIMED_OUT if error is None else error


def _complete_offsets(broker, completions) -> None:
    """The group coordinator's part (contract 5), for markers that landed."""
    coordinator = getattr(broker, "group_coordinator", None)
    complete = getattr(coordinator, "complete_transaction", None)
    if complete is None:
        return
    for result, index, producer_id, commit in completions:
        if result.error_code == ErrorCode.NONE:
            complete(index, producer_id, commit)
