"""The admin client's view of KIP-932 share groups (Kafka's ``Admin.listShareGroups``,
``describeShareGroups``, ``listShareGroupOffsets``, ``alterShareGroupOffsets``,
``deleteShareGroupOffsets``; ``deleteShareGroups`` is ``delete_groups``).

- ``list_share_groups``: ListGroups with the type filter "share" (v5+), from every broker.
- ``describe_share_groups``: ShareGroupDescribe (77) at each group's coordinator: state, epochs,
  assignor, members with their assignments.
- ``list_share_group_offsets``: DescribeShareGroupOffsets (90): per share partition the start
  offset (the share-partition start offset, SPSO: the first offset not yet acknowledged for
  good) and the lag (v1+; -1 when unknown). A partition whose state is not initialized yet has
  start offset -1; one answered with an error is left out.
- ``alter_share_group_offsets``: AlterShareGroupOffsets (91): new start offsets, only while the
  group has no members (NON_EMPTY_GROUP otherwise), as ``--reset-offsets`` does.
- ``delete_share_group_offsets``: DeleteShareGroupOffsets (92): forget topics' share state.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass

from odradek.client.errors import BrokerError
from odradek.client.topic_partition import TopicPartition
from odradek.protocol.generated import ApiKey
from odradek.protocol.generated.alter_share_group_offsets_request import (
    AlterShareGroupOffsetsRequest,
    AlterShareGroupOffsetsRequestPartition,
    AlterShareGroupOffsetsRequestTopic,
)
from odradek.protocol.generated.delete_share_group_offsets_request import (
    DeleteShareGroupOffsetsRequest,
    DeleteShareGroupOffsetsRequestTopic,
)
from odradek.protocol.generated.describe_share_group_offsets_request import (
    DescribeShareGroupOffsetsRequest,
    DescribeShareGroupOffsetsRequestGroup,
    DescribeShareGroupOffsetsRequestTopic,
)
from odradek.protocol.generated.error_codes import ErrorCode
from odradek.protocol.generated.list_groups_request import ListGroupsRequest
from odradek.protocol.generated.share_group_describe_request import ShareGroupDescribeRequest

__all__ = ["ShareGroupAdmin", "ShareGroupDescription", "ShareMemberDescription", "SharePartitionOffset"]

_TYPES_FILTER_FROM = 5  # ListGroups v5+ filters by group type (KIP-848)
_log = logging.getLogger("odradek.client.admin")


@dataclass(frozen=True, slots=True)
class ShareMemberDescription:
    member_id: str
    client_id: str
    client_host: str
    member_epoch: int
    rack_id: str | None
    assignment: tuple[TopicPartition, ...]
    subscribed_topics: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class ShareGroupDescription:
    group_id: str
    state: str
    group_epoch: int
    assignment_epoch: int
    assignor: str
    members: tuple[ShareMemberDescription, ...] = ()
    type: str = "share"


@dataclass(frozen=True, slots=True)
class SharePartitionOffset:
    """A share partition's start offset (-1: not initialized), leader epoch and lag (-1: unknown)."""
    start_offset: int
    leader_epoch: int = -1
    lag: int = -1


def _description(group) -> ShareGroupDescription:
    members = tuple(
        ShareMemberDescription(
            m.member_id, m.client_id, m.client_host, m.member_epoch, m.rack_id,
            tuple(sorted(TopicPartition(t.topic_name, p) for t in (m.assignment.topic_partitions if m.assignment else ())
                         for p in t.partitions)),
            tuple(m.subscribed_topic_names or ()))
        for m in group.members)
    return ShareGroupDescription(group.group_id, group.group_state, group.group_epoch, group.assignment_epoch,
                                 group.assignor_name, members)


class ShareGroupAdmin:
    """Mixed into AsyncAdminClient (uses its ``_cluster``, ``_coordinator``, ``_per_group``)."""

    async def list_share_groups(self) -> list[str]:
        """The ids of every share group of the cluster, sorted."""
        cluster = self._cluster
        if not cluster.metadata.brokers:
            await cluster.refresh([])

        def build(version: int) -> ListGroupsRequest:
            if version >= _TYPES_FILTER_FROM:
                return ListGroupsRequest(types_filter=["share"])
            return ListGroupsRequest()

        async def one(node: int):
            response = await cluster.retry(lambda: cluster.send(node, ApiKey.LIST_GROUPS, build), self._deadline(None))
            if response.error_code:
                raise BrokerError(response.error_code, subject=f"ListGroups on broker {node}")
            return [g.group_id for g in response.groups if (g.group_type or "").lower() == "share"]

        found = set()
        for ids in await asyncio.gather(*(one(n) for n in cluster.metadata.brokers)):
            found.update(ids)
        return sorted(found)

    async def describe_share_groups(self, group_ids) -> dict[str, ShareGroupDescription]:
        """Each share group's ``ShareGroupDescription`` (GROUP_ID_NOT_FOUND raised for a
        group that is not a share group)."""
        async def one(group_id: str):
            response = await self._coordinator(group_id).send(
                ApiKey.SHARE_GROUP_DESCRIBE, ShareGroupDescribeRequest(group_ids=[group_id]),
                lambda r: r.groups[0].error_code if r.groups else 0)
            group = response.groups[0]
            return group.error_code, group.error_message, None if group.error_code else _description(group)

        return await self._per_group(group_ids, one)

    async def list_share_group_offsets(self, group_id: str, partitions=None) -> dict[TopicPartition, SharePartitionOffset]:
        """Start offsets and lag of the group's share partitions (``partitions``: only those;
        by default every partition the group has state for). A partition answered with an
        error is left out, with a warning (Kafka's ``ListShareGroupOffsetsHandler``); a
        group-level error raises BrokerError."""
        topics = None
        if partitions is not None:
            by_topic: dict[str, list[int]] = {}
            for tp in partitions:
                by_topic.setdefault(tp.topic, []).append(tp.partition)
            topics = [DescribeShareGroupOffsetsRequestTopic(t, sorted(ps)) for t, ps in sorted(by_topic.items())]
        request = DescribeShareGroupOffsetsRequest(groups=[DescribeShareGroupOffsetsRequestGroup(group_id, topics)])
        response = await self._coordinator(group_id).send(
            ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS, request, lambda r: r.groups[0].error_code if r.groups else 0)
        group = response.groups[0]
        if group.error_code:
            raise BrokerError(group.error_code, group.error_message, f"share group {group_id}")
        out: dict[TopicPartition, SharePartitionOffset] = {}
        for t in group.topics:
            for p in t.partitions:
                tp = TopicPartition(t.topic_name, p.partition_index)
                if p.error_code:  # as Kafka's ListShareGroupOffsetsHandler: the others still count
                    _log.warning("Skipping return offset for %s due to error %s: %s.", tp,
                                 _code_name(p.error_code), p.error_message)
                    continue
                out[tp] = SharePartitionOffset(p.start_offset, p.leader_epoch, p.lag)
        return dict(sorted(out.items()))

    async def alter_share_group_offsets(self, group_id: str, offsets: dict) -> None:
        """Set the start offsets ``{TopicPartition: offset}`` of an empty share group."""
        by_topic: dict[str, list] = {}
        for tp, offset in sorted(offsets.items()):
            by_topic.setdefault(tp.topic, []).append(AlterShareGroupOffsetsRequestPartition(tp.partition, int(offset)))
        request = AlterShareGroupOffsetsRequest(
            group_id=group_id, topics=[AlterShareGroupOffsetsRequestTopic(t, ps) for t, ps in by_topic.items()])
        response = await self._coordinator(group_id).send(ApiKey.ALTER_SHARE_GROUP_OFFSETS, request,
                                                          lambda r: r.error_code)
        if response.error_code:
            raise BrokerError(response.error_code, response.error_message, f"share group {group_id}")
        for t in response.responses:
            for p in t.partitions:
                if p.error_code:
                    raise BrokerError(p.error_code, p.error_message, f"{t.topic_name}-{p.partition_index}")

    async def delete_share_group_offsets(self, group_id: str, topics) -> None:
        """Forget the share-partition state of ``topics`` in an empty share group."""
        request = DeleteShareGroupOffsetsRequest(
            group_id=group_id, topics=[DeleteShareGroupOffsetsRequestTopic(t) for t in sorted(set(topics))])
        response = await self._coordinator(group_id).send(ApiKey.DELETE_SHARE_GROUP_OFFSETS, request,
                                                          lambda r: r.error_code)
        if response.error_code:
            raise BrokerError(response.error_code, response.error_message, f"share group {group_id}")
        for t in response.responses:
            if t.error_code:
                raise BrokerError(t.error_code, t.error_message, f"share group {group_id} topic {t.topic_name}")


def _code_name(code: int) -> str:
    try:
        return ErrorCode(code).name
    except ValueError:
        return str(code)
