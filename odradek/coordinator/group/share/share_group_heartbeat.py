"""ShareGroupHeartbeat (API 76) as the coordinator sees it: the version-free request, the
answer, and the request's validation (Kafka's
``GroupMetadataManager.throwIfShareGroupHeartbeatRequestIsInvalid``).

Member epochs in a request: 0 joins (or rejoins after being fenced), a positive epoch
heartbeats, -1 leaves; anything else is INVALID_REQUEST. The member id is the client's own
(a UUID kept for the member's lifetime): it may not be empty. ``subscribed_topic_names``
None means "unchanged since the last heartbeat"; a join must name at least one topic.
"""

from __future__ import annotations

from dataclasses import dataclass

from odradek.coordinator.group.consumer.assignment import TopicPartitions
from odradek.protocol.generated.error_codes import ErrorCode

LEAVE_GROUP_MEMBER_EPOCH = -1


@dataclass(frozen=True, slots=True)
class ShareHeartbeatRequest:
    group_id: str
    member_id: str
    member_epoch: int
    rack_id: str | None = None
    subscribed_topic_names: tuple[str, ...] | None = None
    client_id: str = ""
    client_host: str = ""


@dataclass(frozen=True, slots=True)
class ShareHeartbeatResult:
    error: ErrorCode = ErrorCode.NONE
    error_message: str | None = None
    member_id: str | None = None
    member_epoch: int = 0
    heartbeat_interval_ms: int = 0
    assignment: TopicPartitions | None = None  # None: unchanged, not sent


class ShareHeartbeatError(Exception):
    """A refusal: ``error`` and its message go back to the member; nothing is written."""

    def __init__(self, error: ErrorCode, message: str | None = None) -> None:
        super().__init__(message or error.name)
        self.error = error
        self.message = message


def validate(req: ShareHeartbeatRequest) -> None:
    """Raise ShareHeartbeatError(INVALID_REQUEST) for a malformed request."""
    def invalid(message: str):
        raise ShareHeartbeatError(ErrorCode.INVALID_REQUEST, message)

    if not req.group_id:
        invalid("GroupId can't be empty.")
    if req.rack_id == "":
        invalid("RackId can't be empty.")
    if not req.member_id:
        invalid("MemberId can't be empty.")
    if req.member_epoch == 0:
        if not req.subscribed_topic_names:
            invalid("SubscribedTopicNames must be set in first request.")
    elif req.member_epoch < 0 and req.member_epoch != LEAVE_GROUP_MEMBER_EPOCH:
        invalid("MemberEpoch is invalid.")
