"""WriteTxnMarkers (key 27, v0-v1): a transaction coordinator ends a transaction on the
partitions it touched by writing a COMMIT or ABORT marker to each (Kafka's
``handleWriteTxnMarkersRequest``). Sent by coordinators on other brokers, over the wire, to
each partition's leader; never by clients. (A coordinator writes the markers of the
partitions its own broker leads in-process, through the same ``server.txn_marker_writer``.)

Per marker and partition, independently: ``txn_marker_writer.write_markers``'s outcome
(NOT_LEADER_OR_FOLLOWER, UNKNOWN_TOPIC_OR_PARTITION, NOT_ENOUGH_REPLICAS,
TRANSACTION_COORDINATOR_FENCED, INVALID_PRODUCER_EPOCH, NOT_ENOUGH_REPLICAS_AFTER_APPEND when
the ISR shrank below ``min.insync.replicas`` while the marker waited, or NONE once the marker
is replicated to an ISR that large; a ``__consumer_offsets`` marker then completes the
producer's transactional offsets there). The response lists the request's markers, topics and
partitions in the request's order.
"""

from __future__ import annotations

from odradek.coordinator.transaction.marker_write import MarkerWrite
from odradek.protocol.generated.write_txn_markers_response import (
    WritableTxnMarkerPartitionResult,
    WritableTxnMarkerResult,
    WritableTxnMarkerTopicResult,
    WriteTxnMarkersResponse,
)
from odradek.protocol import acl_binding as acl
from odradek.server.txn_marker_writer import write_markers
from odradek.protocol.generated.error_codes import ErrorCode
from odradek.server import authorize


async def handle(ctx, request):
    writes = []
    layout = []  # per marker: (producer id, [(topic, [MarkerWrite])])
    for marker in request.markers:
        topics = []
        for topic in marker.topics:
            these = [MarkerWrite(topic.name, index, marker.producer_id, marker.producer_epoch,
                                 marker.coordinator_epoch, marker.transaction_result)
                     for index in topic.partition_indexes]
            writes.extend(these)
            topics.append((topic.name, these))
        layout.append((marker.producer_id, topics))
    if not authorize.allowed_cluster(ctx, acl.CLUSTER_ACTION):  # from transaction coordinators only (Kafka: CLUSTER_ACTION)
        for w in writes:
            w.error = ErrorCode.CLUSTER_AUTHORIZATION_FAILED
    else:
        await write_markers(ctx.broker, writes)
    return WriteTxnMarkersResponse(markers=[
        WritableTxnMarkerResult(producer_id=producer_id, topics=[
            WritableTxnMarkerTopicResult(name=name, partitions=[
                WritableTxnMarkerPartitionResult(partition_index=w.index, error_code=w.error) for w in these])
            for name, these in topics])
        for producer_id, topics in layout])
