"""What the group coordinator answers, independent of the wire version.

The handlers turn these into JoinGroup/SyncGroup/DescribeGroups responses of whichever version
the client speaks (null protocol names before JoinGroup v7 become "", and so on).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from odradek.protocol.generated.error_codes import ErrorCode

NO_GENERATION = -1


@dataclass(frozen=True, slots=True)
class JoinedMember:
    """A member as the leader sees it in its JoinGroup response."""

    member_id: str
    group_instance_id: str | None
    metadata: bytes


@dataclass(frozen=True, slots=True)
class JoinResult:
    error: ErrorCode
    member_id: str
    generation_id: int = NO_GENERATION
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader_id: str = ""
    skip_assignment: bool = False
    members: tuple[JoinedMember, ...] = ()

    @classmethod
    def failed(cls, member_id: str, error: ErrorCode) -> JoinResult:
        return cls(error, member_id)


@dataclass(frozen=True, slots=True)
class SyncResult:
    error: ErrorCode
    protocol_type: str | None = None
    protocol_name: str | None = None
    assignment: bytes = b""


@dataclass(frozen=True, slots=True)
class MemberDescription:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    metadata: bytes = b""
    assignment: bytes = b""


@dataclass(frozen=True, slots=True)
class GroupDescription:
    """DescribeGroups for one group; a group that does not exist is described as Dead."""

    group_id: str
    error: ErrorCode = ErrorCode.NONE
    state: str = "Dead"
    protocol_type: str = ""
    protocol_data: str = ""
    members: tuple[MemberDescription, ...] = field(default_factory=tuple)


@dataclass(frozen=True, slots=True)
class GroupListing:
    group_id: str
    protocol_type: str
    state: str
