"""TxnOffsetCommit (28): a transactional producer commits a consumer group's offsets inside its
transaction (``sendOffsetsToTransaction``, after AddOffsetsToTxn).

Served by the group coordinator (the leader of the group's ``__consumer_offsets`` partition),
not the transaction coordinator. The offsets are written there as one transactional batch of
the request's producer id and epoch (base sequence -1; the partition fences an older epoch:
INVALID_PRODUCER_EPOCH) and stay pending until the producer's COMMIT or ABORT marker reaches
that partition (``GroupCoordinator.complete_transaction``). The response waits until the batch
is written and replicated.

Versions: v0-v1 carry offset and metadata; v2 adds the committed leader epoch; v3+ (flexible)
adds generation id, member id and ``group.instance.id``, validated as for OffsetCommit
(ILLEGAL_GENERATION, UNKNOWN_MEMBER_ID, FENCED_INSTANCE_ID) except that the group's state does
not matter; v4 only tells that the client knows TRANSACTION_ABORTABLE (never sent here).
Before v2, COORDINATOR_LOAD_IN_PROGRESS is answered as COORDINATOR_NOT_AVAILABLE (clients
before Kafka 2.0 treat the former as fatal: KAFKA-7296).

Per partition, as Kafka: a topic or partition the cluster does not have gets
UNKNOWN_TOPIC_OR_PARTITION (the rest are committed); an empty group id INVALID_GROUP_ID.
A request without a producer id (-1) would commit outside any transaction: it gets
INVALID_PRODUCER_ID_MAPPING, one with a negative epoch INVALID_PRODUCER_EPOCH.
"""

from __future__ import annotations

from odradek.coordinator.group.group_requests import CommitPartition, TxnCommitRequest
from odradek.protocol.generated.error_codes import ErrorCode
from odradek.protocol.generated.txn_offset_commit_response import (
    TxnOffsetCommitResponse,
    TxnOffsetCommitResponsePartition,
    TxnOffsetCommitResponseTopic,
)
from odradek.server import authorize
from odradek.protocol.acl_binding import GROUP, READ, TRANSACTIONAL_ID, WRITE
from odradek.server.handlers.offsets import commit_partitions


async def handle(ctx, request):
    v = ctx.api_version
    # Kafka's handleTxnOffsetCommitRequest: WRITE on the transactional id, READ on the group,
    # then READ on each topic (commit_partitions).
    refused = None
    if not authorize.allowed(ctx, WRITE, TRANSACTIONAL_ID, request.transactional_id):
        refused = ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    elif not authorize.allowed(ctx, READ, GROUP, request.group_id):
        refused = ErrorCode.GROUP_AUTHORIZATION_FAILED
    if refused is not None:
        errors = {(t.name, p.partition_index): refused for t in request.topics for p in t.partitions}
        partitions = []
    else:
        errors, partitions = commit_partitions(ctx, request.topics, leader_epoch_since=2)
    if partitions:
        errors.update(await _commit(ctx, request, tuple(partitions)))
    if v < 2:
        errors = {k: ErrorCode.COORDINATOR_NOT_AVAILABLE if e == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS else e
                  for k, e in errors.items()}
    topics = [TxnOffsetCommitResponseTopic(name=t.name, partitions=[
        TxnOffsetCommitResponsePartition(partition_index=p.partition_index,
                                         error_code=errors[(t.name, p.partition_index)])
        for p in t.partitions]) for t in request.topics]
    return TxnOffsetCommitResponse(throttle_time_ms=0, topics=topics)


async def _commit(ctx, request, partitions: tuple[CommitPartition, ...]) -> dict[tuple[str, int], ErrorCode]:
    keys = [(p.topic, p.partition) for p in partitions]
    coordinator = ctx.broker.group_coordinator
    if coordinator is None:
        return dict.fromkeys(keys, ErrorCode.COORDINATOR_NOT_AVAILABLE)
    if request.producer_id < 0:
        return dict.fromkeys(keys, ErrorCode.INVALID_PRODUCER_ID_MAPPING)
    if request.producer_epoch < 0:
        return dict.fromkeys(keys, ErrorCode.INVALID_PRODUCER_EPOCH)
    v = ctx.api_version
    req = TxnCommitRequest(
        group_id=request.group_id,
        producer_id=request.producer_id,
        producer_epoch=request.producer_epoch,
        member_id=request.member_id if v >= 3 else "",
        group_instance_id=request.group_instance_id if v >= 3 else None,
        generation_id=request.generation_id if v >= 3 else -1,
        partitions=partitions,
    )
    return await coordinator.commit_transactional_offsets(req)
