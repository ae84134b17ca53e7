"""The admin client's group calls: list, describe and delete groups; list, alter, reset and
delete their committed offsets.

ListGroups asks every broker (each lists the groups it coordinates); the other calls go to
each group's coordinator, found with FindCoordinator and retried as ``coordinator`` says.
A consumer group's member assignments are decoded from the ``consumer`` protocol's
``ConsumerProtocolAssignment`` (int16 version, then the assignment), so a description names
each member's partitions.
"""

from __future__ import annotations

import asyncio
import struct

from odradek.client.admin_types import GroupDescription, GroupListing, MemberDescription
from odradek.client.coordinator import GroupCoordinatorClient
from odradek.client.errors import BrokerError, KafkaError
from odradek.client.topic_partition import OffsetAndMetadata, TopicPartition
from odradek.protocol import codec
from odradek.protocol.generated import ApiKey
from odradek.protocol.generated.delete_groups_request import DeleteGroupsRequest
from odradek.protocol.generated.describe_groups_request import DescribeGroupsRequest
from odradek.protocol.generated.list_groups_request import ListGroupsRequest
from odradek.protocol.primitives import DecodeError

_STATES_FILTER_FROM = 4  # ListGroups v4+ filters by state
_VERSION = struct.Struct(">h")


def decode_assignment(data: bytes) -> tuple[TopicPartition, ...]:
    """The partitions of a ``consumer`` protocol member assignment; () when undecodable."""
    if not data or len(data) < 2:
        return ()
    mod = codec.module("ConsumerProtocolAssignment")
    (version,) = _VERSION.unpack_from(data, 0)
    version = min(max(version, 0), mod.VALID_VERSIONS[1])  # newer versions only append fields
    try:
        assignment, _ = mod.READERS[version](memoryview(data), 2)
    except (DecodeError, struct.error, ValueError, IndexError):
        return ()
    return tuple(TopicPartition(t.topic, p) for t in assignment.assigned_partitions for p in t.partitions)


class GroupAdmin:
    """Mixed into AsyncAdminClient (uses its ``_cluster``, ``_settle`` and ``_deadline``)."""

    def _coordinator(self, group_id: str) -> GroupCoordinatorClient:
        return GroupCoordinatorClient(self._cluster, group_id, dedicated_connection=False)

    async def list_groups(self, states=None) -> list[GroupListing]:
        """Every group of the cluster (optionally only those in ``states``), by id."""
        cluster = self._cluster
        if not cluster.metadata.brokers:
            await cluster.refresh([])

        def build(version: int) -> ListGroupsRequest:
            if states and version >= _STATES_FILTER_FROM:
                return ListGroupsRequest(states_filter=list(states))
            return ListGroupsRequest()

        async def one(node: int):
            response = await cluster.retry(lambda: cluster.send(node, ApiKey.LIST_GROUPS, build), self._deadline(None))
            if response.error_code:
                raise BrokerError(response.error_code, subject=f"ListGroups on broker {node}")
            return response.groups

        found: dict[str, GroupListing] = {}
        for groups in await asyncio.gather(*(one(n) for n in cluster.metadata.brokers)):
            for g in groups:
                found[g.group_id] = GroupListing(g.group_id, g.protocol_type, g.group_state, g.group_type)
        listed = sorted(found.values(), key=lambda g: g.group_id)
        if states:
            wanted = {s.lower() for s in states}
            listed = [g for g in listed if not g.state or g.state.lower() in wanted]
        return listed

    async def describe_groups(self, group_ids) -> dict[str, GroupDescription]:
        """State, protocol and members (with their assigned partitions) of each group."""
        async def one(group_id: str):
            response = await self._coordinator(group_id).send(
                ApiKey.DESCRIBE_GROUPS, DescribeGroupsRequest(groups=[group_id]),
                lambda r: r.groups[0].error_code if r.groups else 0)
            g = response.groups[0]
            members = tuple(
                MemberDescription(m.member_id, m.group_instance_id, m.client_id, m.client_host,
                                  decode_assignment(m.member_assignment) if g.protocol_type == "consumer" else ())
                for m in g.members)
            description = GroupDescription(g.group_id, g.group_state, g.protocol_type, g.protocol_data, members)
            return g.error_code, None, description

        return await self._per_group(group_ids, one)

    async def delete_groups(self, group_ids) -> None:
        """Delete empty groups and their committed offsets."""
        async def one(group_id: str):
            response = await self._coordinator(group_id).send(
                ApiKey.DELETE_GROUPS, DeleteGroupsRequest(groups_names=[group_id]),
                lambda r: r.results[0].error_code if r.results else 0)
            return (response.results[0].error_code if response.results else 0), None, None

        await self._per_group(group_ids, one)

    async def _per_group(self, group_ids, one) -> dict:
        async def ask(pending):
            answers = await asyncio.gather(*(one(g) for g in pending), return_exceptions=True)
            out = {}
            for group_id, answer in zip(pending, answers):
                if isinstance(answer, KafkaError):
                    out[group_id] = (answer, None, None)
                elif isinstance(answer, BaseException):
                    raise answer
                else:
                    out[group_id] = answer
            return out

        return await self._settle(list(dict.fromkeys(group_ids)), ask, self._deadline(None))

    async def list_group_offsets(self, group_id: str, partitions=None, *,
                                 require_stable: bool = False) -> dict[TopicPartition, OffsetAndMetadata]:
        """The group's committed offsets (of ``partitions``, or all it has). ``require_stable``
        (Kafka's ``ListConsumerGroupOffsetsOptions.requireStable``, KIP-447): a partition with
        an offset pending in an open transaction raises UNSTABLE_OFFSET_COMMIT (retriable)."""
        return await self._coordinator(group_id).fetch_offsets(
            None if partitions is None else [TopicPartition(*tp) for tp in partitions],
            require_stable=require_stable)

    async def alter_group_offsets(self, group_id: str, offsets: dict) -> None:
        """Set the group's committed offsets: ``{TopicPartition: int | OffsetAndMetadata}``
        (the group must have no active members, as Kafka requires)."""
        await self._coordinator(group_id).commit_offsets({TopicPartition(*tp): o for tp, o in offsets.items()})

    async def reset_group_offsets(self, group_id: str, partitions, *, to_earliest: bool = False,
                                  to_latest: bool = False, to_timestamp: int | None = None,
                                  to_offset: int | None = None, shift_by: int | None = None,
                                  dry_run: bool = False, on_clamp=None) -> dict[TopicPartition, int]:
        """Move the group's committed offsets of ``partitions``, as ``kafka-consumer-groups
        --reset-offsets`` does, and return the new offsets (committed unless ``dry_run``).

        Exactly one target: the log start, the high watermark, the first record at or after
        ``to_timestamp`` (ms; the high watermark when there is none), ``to_offset``, or the
        committed offset moved by ``shift_by`` (from the log start when nothing is
        committed). Every target is kept within [log start, high watermark]; a target moved
        into it is reported to ``on_clamp(tp, wanted, new)`` when given (Kafka's tool warns).
        """
        targets = [to_earliest, to_latest, to_timestamp is not None, to_offset is not None, shift_by is not None]
        if sum(map(bool, targets)) != 1:
            raise ValueError("give exactly one of to_earliest, to_latest, to_timestamp, to_offset, shift_by")
        tps = [TopicPartition(*tp) for tp in partitions]
        earliest = await self.list_offsets({tp: -2 for tp in tps})
        latest = await self.list_offsets({tp: -1 for tp in tps})
        if to_timestamp is not None:
            found = await self.list_offsets({tp: to_timestamp for tp in tps})
            wanted = {tp: (found[tp] or latest[tp]).offset for tp in tps}
        elif shift_by is not None:
            committed = await self.list_group_offsets(group_id, tps)
            wanted = {tp: (committed[tp].offset if tp in committed else earliest[tp].offset) + shift_by
                      for tp in tps}
        else:
            wanted = {tp: earliest[tp].offset if to_earliest else latest[tp].offset if to_latest else to_offset
                      for tp in tps}
        new = {tp: min(max(o, earliest[tp].offset), latest[tp].offset) for tp, o in wanted.items()}
        if on_clamp is not None:
            for tp, offset in wanted.items():
                if new[tp] != offset:
                    on_clamp(tp, offset, new[tp])
        if not dry_run:
            await self.alter_group_offsets(group_id, new)
        return new

    async def delete_group_offsets(self, group_id: str, partitions) -> None:
        await self._coordinator(group_id).delete_offsets([TopicPartition(*tp) for tp in partitions])
