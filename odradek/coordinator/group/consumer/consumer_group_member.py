"""``ConsumerGroupMember``: one member of a KIP-848 consumer group (Kafka's
``modern.consumer.ConsumerGroupMember``), an immutable value.

A member is changed by building a new one (``dataclasses.replace``) and replaying the records
that describe it; the group swaps the old value for the new one. Its fields come from three
records of ``__consumer_offsets`` (``consumer_group_records``):

- ConsumerGroupMemberMetadata: instance id, rack, client id and host, rebalance timeout,
  subscribed topic names and regex, server assignor: what the member asked for; and, for a
  member that speaks the classic protocol (JoinGroup/SyncGroup, KIP-848 online migration),
  its ClassicMemberMetadata: session timeout and JoinGroup protocols;
- ConsumerGroupCurrentMemberAssignment: member epoch, previous member epoch, state, assigned
  partitions, partitions pending revocation: where its reconciliation stands;
- (the member's *target* assignment is the group's, ConsumerGroupTargetAssignmentMember).

Member epochs: 0 while joining; the group's target assignment epoch once the member has
reconciled to it. ``previous_member_epoch`` lets a member whose response carrying a new
epoch was lost heartbeat with the old one (``GroupMetadataManager``'s epoch check).

States (Kafka's ``MemberState``, with its byte values as written to the record):

- STABLE (0): the member owns exactly what it was given at ``member_epoch``;
- UNREVOKED_PARTITIONS (1): it must first give up ``partitions_pending_revocation``; it
  stays at its epoch until its heartbeat no longer lists them as owned;
- UNRELEASED_PARTITIONS (2): it is at the target epoch but some partitions of its target
  are still owned by other members; they are given as soon as they are released;
- UNKNOWN (127): a state a newer coordinator wrote: the member is fenced and starts over.
"""

from __future__ import annotations

import enum
import uuid
from dataclasses import dataclass, field, replace

from odradek.coordinator.group.consumer.assignment import TopicPartitions

EMPTY: TopicPartitions = {}


class MemberState(enum.IntEnum):
    STABLE = 0
    UNREVOKED_PARTITIONS = 1
    UNRELEASED_PARTITIONS = 2
    UNKNOWN = 127

    @classmethod
    def from_value(cls, value: int) -> MemberState:
        try:
            return cls(value)
        except ValueError:
            return cls.UNKNOWN


@dataclass(frozen=True, slots=True)
class ClassicMemberMetadata:
    """A classic-protocol member of a consumer group (Kafka's ``ClassicMemberMetadata``):
    its JoinGroup session timeout and ``(protocol name, subscription bytes)`` in its order of
    preference (the bytes: ``ConsumerProtocolSubscription``)."""

    session_timeout_ms: int
    supported_protocols: tuple[tuple[str, bytes], ...]


@dataclass(frozen=True, slots=True)
class ConsumerGroupMember:
    member_id: str
    instance_id: str | None = None
    rack_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    rebalance_timeout_ms: int = -1
    subscribed_topic_names: tuple[str, ...] = ()
    subscribed_topic_regex: str | None = None
    server_assignor: str | None = None
    member_epoch: int = 0
    previous_member_epoch: int = 0
    state: MemberState = MemberState.STABLE
    assigned_partitions: TopicPartitions = field(default_factory=dict)
    partitions_pending_revocation: TopicPartitions = field(default_factory=dict)
    classic: ClassicMemberMetadata | None = None

    def uses_classic_protocol(self) -> bool:
        """Kafka's ``useClassicProtocol``: the member joined with JoinGroup."""
        return self.classic is not None

    def with_subscription(self, **changes) -> ConsumerGroupMember:
        """A copy with the given fields changed; a None value means "unchanged" (the
        heartbeat's convention for fields a member did not resend)."""
        return replace(self, **{k: v for k, v in changes.items() if v is not None})

    def with_assignment(self, state: MemberState, member_epoch: int, assigned: TopicPartitions,
                        pending_revocation: TopicPartitions) -> ConsumerGroupMember:
        """Kafka's ``updateMemberEpoch``: the previous epoch becomes the current one's."""
        return replace(self, state=state, previous_member_epoch=self.member_epoch, member_epoch=member_epoch,
                       assigned_partitions=normalize(assigned),
                       partitions_pending_revocation=normalize(pending_revocation))

    def is_reconciled_to(self, target_epoch: int) -> bool:
        return self.state == MemberState.STABLE and self.member_epoch == target_epoch

    def subscription_key(self) -> tuple:
        """What the group epoch depends on: a change bumps it."""
        return (tuple(sorted(set(self.subscribed_topic_names))), self.subscribed_topic_regex)

    def owned_partition_keys(self):
        """Every ``(topic id, partition)`` this member holds: assigned or pending revocation."""
        for source in (self.assigned_partitions, self.partitions_pending_revocation):
            for topic_id, partitions in source.items():
                for p in partitions:
                    yield topic_id, p


def normalize(partitions) -> dict[uuid.UUID, frozenset[int]]:
    """``TopicPartitions`` with frozen sets and no empty topic (so equal assignments compare
    equal)."""
    return {t: frozenset(ps) for t, ps in partitions.items() if ps}


def is_subset(owned: TopicPartitions | None, assigned: TopicPartitions) -> bool:
    """Kafka's ``isSubset``: a null owned list is a subset of anything."""
    if owned is None:
        return True
    return all(set(ps) <= set(assigned.get(t, ())) for t, ps in owned.items())
