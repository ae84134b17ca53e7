"""The coordinator's view of group requests, independent of the wire version.

The handlers fill these from JoinGroup/SyncGroup/LeaveGroup/OffsetCommit requests of any
version, supplying what older versions lack (JoinGroup v0 has no rebalance timeout: the
session timeout stands in; only v4+ may be asked for a member id first; ...).
"""

from __future__ import annotations

from dataclasses import dataclass

from odradek.coordinator.group.member import Protocols

UNKNOWN_MEMBER_ID = ""


@dataclass(frozen=True, slots=True)
class JoinRequest:
    group_id: str
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    session_timeout_ms: int
    rebalance_timeout_ms: int
    protocol_type: str
    protocols: Protocols
    # JoinGroup v4+ without a group.instance.id: a new member first gets MEMBER_ID_REQUIRED
    # with its id, and joins with it in a second request.
    require_known_member_id: bool = False
    # JoinGroup v9+: a static leader that rejoins a stable group is told it leads, but that it
    # must not compute a new assignment.
    supports_skip_assignment: bool = False
    reason: str | None = None


@dataclass(frozen=True, slots=True)
class SyncRequest:
    group_id: str
    member_id: str
    group_instance_id: str | None
    generation_id: int
    protocol_type: str | None = None
    protocol_name: str | None = None
    assignments: tuple[tuple[str, bytes], ...] = ()


@dataclass(frozen=True, slots=True)
class LeavingMember:
    member_id: str
    group_instance_id: str | None = None
    reason: str | None = None


@dataclass(frozen=True, slots=True)
class CommitPartition:
    topic: str
    partition: int
    offset: int
    leader_epoch: int = -1
    metadata: str | None = ""
    # OffsetCommit v1 only: the client's commit time (-1: the coordinator's).
    commit_timestamp_ms: int = -1


@dataclass(frozen=True, slots=True)
class CommitRequest:
    group_id: str
    member_id: str = UNKNOWN_MEMBER_ID
    group_instance_id: str | None = None
    generation_id: int = -1
    # OffsetCommit v2-v4: how long to keep these offsets (-1: by the broker's policy).
    retention_time_ms: int = -1
    partitions: tuple[CommitPartition, ...] = ()
    # The OffsetCommit version: a consumer-protocol member (KIP-848) must use v9+.
    api_version: int = 9


@dataclass(frozen=True, slots=True)
class TxnCommitRequest:
    """TxnOffsetCommit: offsets of ``partitions`` pending in the transaction of
    ``producer_id``/``producer_epoch`` (v0-v2 carry no member id or generation: -1 and "")."""

    group_id: str
    producer_id: int
    producer_epoch: int
    member_id: str = UNKNOWN_MEMBER_ID
    group_instance_id: str | None = None
    generation_id: int = -1
    partitions: tuple[CommitPartition, ...] = ()
