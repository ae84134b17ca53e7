"""What a group member is configured with, which generation it belongs to, and the error a
commit gets when it no longer belongs to the current one (``group_membership``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

from odradek.client.errors import KafkaError

__all__ = ["CommitFailedError", "Generation", "MembershipConfig"]


class CommitFailedError(KafkaError):
    """A commit the group refused because this member is no longer (or not yet) part of the
    current generation: its partitions may be someone else's by now."""


class Generation(NamedTuple):
    generation_id: int
    member_id: str
    protocol: str | None


@dataclass(frozen=True, slots=True)
class MembershipConfig:
    session_timeout_ms: int = 45_000
    rebalance_timeout_ms: int = 300_000  # the consumer's max_poll_interval_ms
    heartbeat_interval_ms: int = 3_000
    group_instance_id: str | None = None
    assignors: tuple = ("range", "roundrobin")
    enable_auto_commit: bool = True
    auto_commit_interval_ms: int = 5_000
    metadata_max_age_ms: int = 300_000

    def __post_init__(self) -> None:
        if self.heartbeat_interval_ms <= 0 or self.heartbeat_interval_ms >= self.session_timeout_ms:
            raise ValueError("heartbeat_interval_ms must be positive and below session_timeout_ms")
        if self.rebalance_timeout_ms <= 0 or self.auto_commit_interval_ms <= 0:
            raise ValueError("max_poll_interval_ms and auto_commit_interval_ms must be positive")
        if not self.assignors:
            raise ValueError("partition_assignment_strategy needs at least one assignor")
        if self.group_instance_id is not None and not self.group_instance_id:
            raise ValueError("group_instance_id must not be empty")
