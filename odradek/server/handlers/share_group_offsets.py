"""DescribeShareGroupOffsets (90), AlterShareGroupOffsets (91), DeleteShareGroupOffsets (92):
a share group's start offsets (``coordinator/group/share/share_group_offsets.py``).

Authorization as Kafka 4.2's ``KafkaApis``:
- describe: DESCRIBE on the group (the group answers GROUP_AUTHORIZATION_FAILED); topics the
  principal may not DESCRIBE answer TOPIC_AUTHORIZATION_FAILED per partition (asked by name),
  or are left out (all of the group's topics asked);
- alter: READ on the group (the whole answer GROUP_AUTHORIZATION_FAILED), READ on each topic
  (TOPIC_AUTHORIZATION_FAILED for its partitions);
- delete: DELETE on the group, READ on each topic (TOPIC_AUTHORIZATION_FAILED for the topic).
Advertised with the share-group APIs (``protocol/api_keys.SHARE_GROUPS_SERVED``).
"""

from __future__ import annotations

from odradek.coordinator.group.share import share_group_offsets as offsets
from odradek.coordinator.group.share.partition_end_offsets import latest_offsets
from odradek.protocol.acl_binding import DELETE, DESCRIBE, GROUP, READ, TOPIC
from odradek.protocol.generated.alter_share_group_offsets_response import (
    AlterShareGroupOffsetsResponse, AlterShareGroupOffsetsResponsePartition, AlterShareGroupOffsetsResponseTopic,
)
from odradek.protocol.generated.delete_share_group_offsets_response import (
    DeleteShareGroupOffsetsResponse, DeleteShareGroupOffsetsResponseTopic,
)
from odradek.protocol.generated.describe_share_group_offsets_response import (
    DescribeShareGroupOffsetsResponse, DescribeShareGroupOffsetsResponseGroup, DescribeShareGroupOffsetsResponsePartition,
    DescribeShareGroupOffsetsResponseTopic,
)
from odradek.protocol.generated.error_codes import ErrorCode as E
from odradek.protocol.primitives import ZERO_UUID
from odradek.server import authorize

_TOPIC_DENIED = "Topic authorization failed."


def _services(ctx):
    broker = ctx.broker
    return broker.group_coordinator, getattr(broker, "share_persister", None), broker.metadata_image()


async def handle_describe(ctx, request) -> DescribeShareGroupOffsetsResponse:
    return DescribeShareGroupOffsetsResponse(throttle_time_ms=0,
                                             groups=[await _describe_group(ctx, g) for g in request.groups])


async def _describe_group(ctx, g) -> DescribeShareGroupOffsetsResponseGroup:
    answer = DescribeShareGroupOffsetsResponseGroup(group_id=g.group_id)
    if not authorize.allowed(ctx, DESCRIBE, GROUP, g.group_id):
        answer.error_code = E.GROUP_AUTHORIZATION_FAILED
        return answer
    coordinator, persister, image = _services(ctx)
    if coordinator is None or persister is None:
        answer.error_code = E.COORDINATOR_NOT_AVAILABLE
        return answer
    asked = None if g.topics is None else [(t.topic_name, list(t.partitions)) for t in g.topics]
    allowed = asked if asked is None else [t for t in asked if authorize.allowed(ctx, DESCRIBE, TOPIC, t[0])]
    error, message, found = await offsets.describe(coordinator, persister, g.group_id, allowed, image,
                                                   lambda tps: latest_offsets(ctx.broker, tps))
    if error != E.NONE:
        answer.error_code, answer.error_message = error, message
        return answer
    if asked is None:  # the group's own topics: those not describable are left out
        found = [f for f in found if authorize.allowed(ctx, DESCRIBE, TOPIC, f[0])]
    answer.topics = [DescribeShareGroupOffsetsResponseTopic(
        topic_name=name, topic_id=topic_id or ZERO_UUID,
        partitions=[DescribeShareGroupOffsetsResponsePartition(partition_index=p, start_offset=start,
                                                               leader_epoch=epoch, lag=lag, error_code=err)
                    for p, start, epoch, lag, err in rows]) for name, topic_id, rows in found]
    for name, partitions in asked or []:
        if (name, partitions) not in allowed:
            answer.topics.append(DescribeShareGroupOffsetsResponseTopic(topic_name=name, partitions=[
                DescribeShareGroupOffsetsResponsePartition(partition_index=p, start_offset=-1, lag=-1,
                                                           error_code=E.TOPIC_AUTHORIZATION_FAILED,
                                                           error_message=_TOPIC_DENIED) for p in partitions]))
    return answer


async def handle_alter(ctx, request) -> AlterShareGroupOffsetsResponse:
    if not authorize.allowed(ctx, READ, GROUP, request.group_id):
        return AlterShareGroupOffsetsResponse(error_code=E.GROUP_AUTHORIZATION_FAILED)
    coordinator, persister, image = _services(ctx)
    if coordinator is None or persister is None:
        return AlterShareGroupOffsetsResponse(error_code=E.COORDINATOR_NOT_AVAILABLE)
    denied, wanted = [], {}
    for t in request.topics:
        if not authorize.allowed(ctx, READ, TOPIC, t.topic_name):
            denied.append((t.topic_name, None, [(p.partition_index, E.TOPIC_AUTHORIZATION_FAILED, _TOPIC_DENIED)
                                                for p in t.partitions]))
        elif image.topic(t.topic_name) is None:
            denied.append((t.topic_name, None, [(p.partition_index, E.UNKNOWN_TOPIC_OR_PARTITION, None)
                                                for p in t.partitions]))
        else:
            wanted[t.topic_name] = {p.partition_index: p.start_offset for p in t.partitions}
    error, message, done = await offsets.alter(coordinator, persister, request.group_id, wanted, image)
    if error != E.NONE:
        return AlterShareGroupOffsetsResponse(error_code=error, error_message=message)
    return AlterShareGroupOffsetsResponse(responses=[AlterShareGroupOffsetsResponseTopic(
        topic_name=name, topic_id=topic_id or ZERO_UUID,
        partitions=[AlterShareGroupOffsetsResponsePartition(partition_index=p, error_code=e, error_message=m)
                    for p, e, m in rows]) for name, topic_id, rows in [*done, *denied]])


async def handle_delete(ctx, request) -> DeleteShareGroupOffsetsResponse:
    if not authorize.allowed(ctx, DELETE, GROUP, request.group_id):
        return DeleteShareGroupOffsetsResponse(error_code=E.GROUP_AUTHORIZATION_FAILED)
    coordinator, persister, image = _services(ctx)
    if coordinator is None or persister is None:
        return DeleteShareGroupOffsetsResponse(error_code=E.COORDINATOR_NOT_AVAILABLE)
    names = [t.topic_name for t in request.topics]
    allowed = [n for n in names if authorize.allowed(ctx, READ, TOPIC, n)]
    error, message, done = await offsets.delete(coordinator, persister, request.group_id, allowed, image)
    if error != E.NONE:
        return DeleteShareGroupOffsetsResponse(error_code=error, error_message=message)
    rows = [*done, *[(n, None, E.TOPIC_AUTHORIZATION_FAILED, _TOPIC_DENIED) for n in names if n not in allowed]]
    return DeleteShareGroupOffsetsResponse(responses=[DeleteShareGroupOffsetsResponseTopic(
        topic_name=n, topic_id=t or ZERO_UUID, error_code=e, error_message=m) for n, t, e, m in rows])
