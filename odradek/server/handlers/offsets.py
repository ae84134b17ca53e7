"""The committed-offset APIs: OffsetCommit (8), OffsetFetch (9), OffsetDelete (47).

Offsets are kept by the group coordinator in ``__consumer_offsets`` (Kafka's documentation,
"Consumer Offset Tracking"); these handlers translate versions. OffsetCommit: v0 has neither
generation nor member id (a commit outside group management), v1 carries a commit timestamp
per partition, v2-v4 a retention time, v6+ the leader epoch, v7+ the ``group.instance.id``;
partitions of topics the cluster
does not have get UNKNOWN_TOPIC_OR_PARTITION and are not stored (Kafka does the same). The
response waits until the offsets are written and replicated.

OffsetFetch: v0-v7 ask for one group (v2+ with a null topic list meaning every committed
offset, and a top-level error; before v2 an error is repeated on each partition); v8+ ask for
several groups at once. A partition without a committed offset answers offset -1 with no
error. ``require_stable`` (v7+) has nothing to wait for: there are no transactional commits.
"""

from __future__ import annotations

from odradek.coordinator.group.group_requests import CommitPartition, CommitRequest
from odradek.coordinator.group.offset_metadata_manager import UNSTABLE
from odradek.protocol.generated.error_codes import ErrorCode
from odradek.protocol.generated.offset_commit_response import (
    OffsetCommitResponse,
    OffsetCommitResponsePartition,
    OffsetCommitResponseTopic,
)
from odradek.protocol.generated.offset_delete_response import (
    OffsetDeleteResponse,
    OffsetDeleteResponsePartition,
    OffsetDeleteResponseTopic,
)
from odradek.protocol.generated.offset_fetch_response import (
    OffsetFetchResponse,
    OffsetFetchResponseGroup,
    OffsetFetchResponsePartition,
    OffsetFetchResponsePartitions,
    OffsetFetchResponseTopic,
    OffsetFetchResponseTopics,
)
from odradek.server import authorize
from odradek.protocol.acl_binding import DELETE, DESCRIBE, GROUP, READ, TOPIC

NO_OFFSET = -1


def _known(image, topic: str, partition: int) -> bool:
    assignment = image.topic(topic)
    return assignment is not None and partition in assignment.partitions


def commit_partitions(ctx, topics, leader_epoch_since: int, timestamp_version: int | None = None
                      ) -> tuple[dict[tuple[str, int], ErrorCode], list[CommitPartition]]:
    """The partitions of an OffsetCommit / TxnOffsetCommit request's ``topics``:
    ``(errors, partitions)``, UNKNOWN_TOPIC_OR_PARTITION by ``(topic, partition)`` for those
    the cluster does not have, a ``CommitPartition`` for each other one (its committed leader
    epoch from version ``leader_epoch_since`` on, its commit timestamp in version
    ``timestamp_version`` only; -1 otherwise)."""
    v = ctx.api_version
    image = ctx.broker.metadata_image()
    errors: dict[tuple[str, int], ErrorCode] = {}
    partitions = []
    for topic in topics:
        readable = authorize.allowed(ctx, READ, TOPIC, topic.name)  # Kafka: READ on each topic
        for p in topic.partitions:
            if not readable:
                errors[(topic.name, p.partition_index)] = ErrorCode.TOPIC_AUTHORIZATION_FAILED
                continue
            if not _known(image, topic.name, p.partition_index):
                errors[(topic.name, p.partition_index)] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                continue
            partitions.append(CommitPartition(
                topic.name, p.partition_index, p.committed_offset,
                p.committed_leader_epoch if v >= leader_epoch_since else -1, p.committed_metadata,
                p.commit_timestamp if v == timestamp_version else -1))
    return errors, partitions


# --- OffsetCommit ------------------------------------------------------------------------------
async def handle_offset_commit(ctx, request):
    v = ctx.api_version
    if not authorize.allowed(ctx, READ, GROUP, request.group_id):
        return OffsetCommitResponse(throttle_time_ms=0, topics=[OffsetCommitResponseTopic(name=t.name, partitions=[
            OffsetCommitResponsePartition(partition_index=p.partition_index,
                                          error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED)
            for p in t.partitions]) for t in request.topics])
    errors, partitions = commit_partitions(ctx, request.topics, leader_epoch_since=6, timestamp_version=1)
    coordinator = ctx.broker.group_coordinator
    if partitions:
        req = CommitRequest(
            group_id=request.group_id,
            member_id=request.member_id if v >= 1 else "",
            group_instance_id=request.group_instance_id if v >= 7 else None,
            generation_id=request.generation_id_or_member_epoch if v >= 1 else -1,
            retention_time_ms=request.retention_time_ms if 2 <= v <= 4 else -1,
            partitions=tuple(partitions),
            api_version=v,
        )
        if coordinator is None:
            errors.update({(p.topic, p.partition): ErrorCode.COORDINATOR_NOT_AVAILABLE for p in partitions})
        else:
            errors.update(await coordinator.commit_offsets(req))
    topics = [OffsetCommitResponseTopic(name=t.name, partitions=[
        OffsetCommitResponsePartition(partition_index=p.partition_index, error_code=errors[(t.name, p.partition_index)])
        for p in t.partitions]) for t in request.topics]
    return OffsetCommitResponse(throttle_time_ms=0, topics=topics)


# --- OffsetFetch -------------------------------------------------------------------------------
def handle_offset_fetch(ctx, request):
    if ctx.api_version >= 8:
        groups = []
        for g in request.groups:
            member = (g.member_id, g.member_epoch) if ctx.api_version >= 9 else (None, -1)
            error, topics = _fetch(ctx, g.group_id, g.topics, request.require_stable, *member)
            groups.append(OffsetFetchResponseGroup(
                group_id=g.group_id, error_code=error,
                topics=[OffsetFetchResponseTopics(name=name, partitions=[
                    OffsetFetchResponsePartitions(partition_index=i, committed_offset=o, committed_leader_epoch=e,
                                                  metadata=m, error_code=pe)
                    for i, o, e, m, pe in parts]) for name, parts in topics]))
        return OffsetFetchResponse(throttle_time_ms=0, groups=groups)
    wanted = request.topics
    error, topics = _fetch(ctx, request.group_id, wanted, request.require_stable if ctx.api_version >= 7 else False)
    if error != ErrorCode.NONE and ctx.api_version < 2:
        # No top-level error before v2: every partition asked for carries it.
        out = [OffsetFetchResponseTopic(name=t.name, partitions=[
            OffsetFetchResponsePartition(partition_index=i, committed_offset=NO_OFFSET, metadata="", error_code=error)
            for i in t.partition_indexes]) for t in wanted]
        return OffsetFetchResponse(throttle_time_ms=0, topics=out)
    out = [OffsetFetchResponseTopic(name=name, partitions=[
        OffsetFetchResponsePartition(partition_index=i, committed_offset=o, committed_leader_epoch=e, metadata=m,
                                     error_code=pe)
        for i, o, e, m, pe in parts]) for name, parts in topics]
    return OffsetFetchResponse(throttle_time_ms=0, topics=out, error_code=error)


def _fetch(ctx, group_id: str, wanted_topics, require_stable: bool = False, member_id: str | None = None,
           member_epoch: int = -1):
    """``(error, [(topic, [(partition, offset, leader epoch, metadata, error)])])`` for one
    group; ``member_id``/``member_epoch`` (v9+, a KIP-848 consumer group's member) are
    checked by the coordinator (STALE_MEMBER_EPOCH, UNKNOWN_MEMBER_ID)."""
    coordinator = ctx.broker.group_coordinator
    if not authorize.allowed(ctx, DESCRIBE, GROUP, group_id):
        return ErrorCode.GROUP_AUTHORIZATION_FAILED, []
    if coordinator is None:
        return ErrorCode.COORDINATOR_NOT_AVAILABLE, []
    wanted = None if wanted_topics is None else [(t.name, list(t.partition_indexes)) for t in wanted_topics]
    error, found = coordinator.fetch_offsets(group_id, wanted, require_stable, member_id, member_epoch)
    topics = []
    for name, parts in found:
        rows = []
        describable = authorize.allowed(ctx, DESCRIBE, TOPIC, name)
        if not describable and wanted is None:
            continue  # every topic asked for: Kafka leaves out those the principal may not describe
        for index, value in parts:
            if not describable:
                rows.append((index, NO_OFFSET, -1, "", ErrorCode.TOPIC_AUTHORIZATION_FAILED))
            elif value is UNSTABLE:
                rows.append((index, NO_OFFSET, -1, "", ErrorCode.UNSTABLE_OFFSET_COMMIT))
            elif value is None:
                rows.append((index, NO_OFFSET, -1, "", ErrorCode.NONE))
            else:
                rows.append((index, value.offset, value.leader_epoch, value.metadata, ErrorCode.NONE))
        topics.append((name, rows))
    return error, topics


# --- OffsetDelete ------------------------------------------------------------------------------
async def handle_offset_delete(ctx, request):
    image = ctx.broker.metadata_image()
    coordinator = ctx.broker.group_coordinator
    errors: dict[tuple[str, int], ErrorCode] = {}
    known = []
    if not authorize.allowed(ctx, DELETE, GROUP, request.group_id):
        return OffsetDeleteResponse(error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED, throttle_time_ms=0)
    for t in request.topics:
        readable = authorize.allowed(ctx, READ, TOPIC, t.name)
        for p in t.partitions:
            key = (t.name, p.partition_index)
            if not readable:
                errors[key] = ErrorCode.TOPIC_AUTHORIZATION_FAILED
            elif _known(image, *key):
                known.append(key)
            else:
                errors[key] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    if coordinator is None:
        return OffsetDeleteResponse(error_code=ErrorCode.COORDINATOR_NOT_AVAILABLE, throttle_time_ms=0)
    error, deleted = await coordinator.delete_offsets(request.group_id, known)
    if error != ErrorCode.NONE:
        return OffsetDeleteResponse(error_code=error, throttle_time_ms=0)
    errors.update(deleted)
    topics = [OffsetDeleteResponseTopic(name=t.name, partitions=[
        OffsetDeleteResponsePartition(partition_index=p.partition_index, error_code=errors[(t.name, p.partition_index)])
        for p in t.partitions]) for t in request.topics]
    return OffsetDeleteResponse(error_code=ErrorCode.NONE, throttle_time_ms=0, topics=topics)
