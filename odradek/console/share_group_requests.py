"""The console's two questions about a KIP-932 share group, sent to the group's coordinator:
ShareGroupDescribe (API 77, v1) and DescribeShareGroupOffsets (API 90, v0-1).

The admin client (client/admin.py) has no share-group calls yet, so the console asks them
itself, on the admin client's ``_coordinator(group_id)`` (client/coordinator.py: found with
FindCoordinator, COORDINATOR_NOT_AVAILABLE / NOT_COORDINATOR find it again,
COORDINATOR_LOAD_IN_PROGRESS waits). The version is the highest both the broker (its
ApiVersions answer) and this module know, so the questions do not depend on the client's
``CLIENT_VERSIONS`` listing the share-group APIs.

- ``describe_share_group`` answers a ``ShareGroupDescription`` (as Kafka's
  ``Admin.describeShareGroups``: state, group epoch, target assignment epoch, assignor, and
  per member its epoch, subscribed topics and assigned partitions), or None when the
  coordinator knows no share group of that id (GROUP_ID_NOT_FOUND: none, or a group of
  another type) or the broker has no ShareGroupDescribe.
- ``share_group_offsets`` answers ``{TopicPartition: ShareOffset}`` for every topic the group
  has share-partitions of (the request's ``Topics`` null): the share-partition start offset
  (SPSO, -1 when the share coordinator has none yet) and the lag the broker computed
  (v1; -1 when it did not, as v0 and Kafka 4.2's own coordinator answer). A partition
  answering an error is left out.
"""

from __future__ import annotations

from dataclasses import dataclass

from odradek.client.errors import BrokerError, KafkaConnectionError, UnsupportedVersionError
from odradek.client.topic_partition import TopicPartition
from odradek.protocol.generated import ApiKey
from odradek.protocol.generated.describe_share_group_offsets_request import (
    DescribeShareGroupOffsetsRequest, DescribeShareGroupOffsetsRequestGroup,
)
from odradek.protocol.generated.error_codes import ErrorCode
from odradek.protocol.generated.share_group_describe_request import ShareGroupDescribeRequest

SHARE = "share"  # Kafka's GroupType name, as ListGroups v5 reports it
_VERSIONS = {ApiKey.SHARE_GROUP_DESCRIBE: (1, 1), ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS: (0, 1)}
_REDISCOVER = frozenset({ErrorCode.COORDINATOR_NOT_AVAILABLE, ErrorCode.NOT_COORDINATOR})


@dataclass(frozen=True, slots=True)
class ShareMemberDescription:
    member_id: str
    client_id: str
    client_host: str
    member_epoch: int
    rack_id: str | None
    subscribed_topics: tuple[str, ...]
    assignment: tuple[TopicPartition, ...]  # sorted
    group_instance_id: None = None  # share members are never static (KIP-932)


@dataclass(frozen=True, slots=True)
class ShareGroupDescription:
    group_id: str
    state: str  # Kafka's ShareGroupState: Empty, Stable, Dead
    group_epoch: int
    assignment_epoch: int  # the target assignment's epoch
    protocol: str  # the assignor's name (group.share.assignors; "simple")
    members: tuple[ShareMemberDescription, ...] = ()
    protocol_type: str = SHARE
    type: str = SHARE


@dataclass(frozen=True, slots=True)
class ShareOffset:
    start_offset: int  # the share-partition start offset; -1: none recorded yet
    leader_epoch: int
    lag: int  # -1: the broker did not compute it


async def describe_share_group(admin, group_id: str) -> ShareGroupDescription | None:
    """The share group's description; None when there is no share group ``group_id`` (see
    the module's docstring). Raises BrokerError for other refusals (e.g.
    GROUP_AUTHORIZATION_FAILED)."""
    try:
        response = await _send(admin, group_id, ApiKey.SHARE_GROUP_DESCRIBE,
                                ShareGroupDescribeRequest(group_ids=[group_id]),
                                lambda r: r.groups[0].error_code if r.groups else 0)
    except UnsupportedVersionError:
        return None
    g = response.groups[0]
    if g.error_code == ErrorCode.GROUP_ID_NOT_FOUND:
        return None
    if g.error_code:
        raise BrokerError(g.error_code, g.error_message, f"ShareGroupDescribe of {group_id!r}")
    members = tuple(
        ShareMemberDescription(m.member_id, m.client_id, m.client_host, m.member_epoch, m.rack_id,
                               tuple(m.subscribed_topic_names or ()), _partitions(m.assignment))
        for m in g.members)
    return ShareGroupDescription(g.group_id, g.group_state, g.group_epoch, g.assignment_epoch, g.assignor_name,
                                 members)


async def share_group_offsets(admin, group_id: str) -> dict[TopicPartition, ShareOffset]:
    """Each share-partition's start offset and lag (see the module's docstring)."""
    request = DescribeShareGroupOffsetsRequest(groups=[DescribeShareGroupOffsetsRequestGroup(group_id, None)])
    response = await _send(admin, group_id, ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS, request,
                           lambda r: r.groups[0].error_code if r.groups else 0)
    g = response.groups[0]
    if g.error_code:
        raise BrokerError(g.error_code, g.error_message, f"DescribeShareGroupOffsets of {group_id!r}")
    return {TopicPartition(t.topic_name, p.partition_index): ShareOffset(p.start_offset, p.leader_epoch, p.lag)
            for t in g.topics for p in t.partitions if p.error_code == ErrorCode.NONE}


async def _send(admin, group_id: str, api_key: int, body, error_of):
    """``body`` to the group's coordinator at the version both sides know; the coordinator
    retry rules of ``GroupCoordinatorClient.send``."""
    coordinator = admin._coordinator(group_id)
    cluster = coordinator.cluster

    async def attempt():
        try:
            conn = await coordinator.connection()
            response = await conn.send(api_key, body, version=_version(conn, api_key))
        except KafkaConnectionError:
            coordinator.mark_dead()
            raise
        code = error_of(response)
        if code in _REDISCOVER:
            coordinator.mark_dead()
        if code in _REDISCOVER or code == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS:
            raise BrokerError(code, subject=coordinator.label)
        return response

    return await cluster.retry(attempt, cluster.loop.time() + cluster.request_timeout * 2)


def _version(conn, api_key: int) -> int:
    """The highest version of ``api_key`` in both the broker's range and ``_VERSIONS``."""
    low, high = _VERSIONS[api_key]
    broker = conn.broker_versions.get(api_key)
    if broker is None or min(high, broker[1]) < max(low, broker[0]):
        raise UnsupportedVersionError(f"broker {conn.node_id} serves no version {low}-{high} of API {api_key}"
                                      f" (it serves {broker})")
    return min(high, broker[1])


def _partitions(assignment) -> tuple[TopicPartition, ...]:
    if assignment is None:
        return ()
    return tuple(sorted(TopicPartition(t.topic_name, p) for t in assignment.topic_partitions for p in t.partitions))
