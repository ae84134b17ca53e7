"""``ClassicGroup``: the membership of one group under Kafka's classic rebalance protocol.

It holds what a rebalance needs: the members and the protocols they support, the generation,
the chosen protocol, the leader, the static members (``group.instance.id -> member id``),
the members that were told their id but have not joined with it yet (pending join), the
members that got a JoinGroup response but have not sent SyncGroup yet (pending sync), and
the state (``group_state``). It decides nothing by itself about timing or persistence: the
group metadata manager drives it, and it never touches the clock except through ``now_ms``
arguments.

Protocol selection: a protocol is a candidate when every member supports it; each member votes
for its most preferred candidate and the protocol with the most votes wins (ties go to the
vote cast first, i.e. the longest-standing member's). Kafka leaves ties to hash order.
"""

from __future__ import annotations

import struct
import uuid
from collections import Counter

from odradek.coordinator.group.group_results import JoinedMember, JoinResult, SyncResult
from odradek.coordinator.group.group_state import (
    VALID_PREVIOUS,
    GroupState,
    IllegalStateTransition,
)
from odradek.coordinator.group.member import GroupMember, Protocols
from odradek.protocol.generated import (
    consumer_protocol_subscription as subscription_schema,
)
from odradek.protocol.generated.error_codes import ErrorCode
from odradek.protocol.generated.group_metadata_value import (
    GroupMetadataValue,
    MemberMetadata,
)

CONSUMER_PROTOCOL_TYPE = "consumer"


class ClassicGroup:
    def __init__(self, group_id: str, now_ms: int, state: GroupState = GroupState.EMPTY) -> None:
        self.group_id = group_id
        self.state = state
        # When the group entered its state (Kafka's currentStateTimestamp); None for groups
        # loaded from records that predate the field.
        self.state_timestamp_ms: int | None = now_ms
        self.generation_id = 0
        self.protocol_type: str | None = None
        self.protocol_name: str | None = None
        self.leader_id: str | None = None
        self.members: dict[str, GroupMember] = {}
        self.static_members: dict[str, str] = {}
        self.pending_join_members: set[str] = set()
        self.pending_sync_members: set[str] = set()
        self.num_awaiting_join = 0
        # Set when a member joins during the first rebalance of a group: the initial delay
        # (group.initial.rebalance.delay.ms) is then extended once more.
        self.new_member_added = False
        self.subscribed_topics: frozenset[str] | None = None
        self._protocol_support: Counter[str] = Counter()

    def __repr__(self) -> str:
        return (f"ClassicGroup({self.group_id!r}, {self.state.value}, generation {self.generation_id}, "
                f"{len(self.members)} members)")

    # --- state ------------------------------------------------------------------------------
    def is_(self, state: GroupState) -> bool:
        return self.state is state

    def transition_to(self, state: GroupState, now_ms: int) -> None:
        if self.state not in VALID_PREVIOUS[state]:
            raise IllegalStateTransition(
                f"group {self.group_id}: {self.state.value} -> {state.value} is not allowed")
        self.state = state
        self.state_timestamp_ms = now_ms

    def can_rebalance(self) -> bool:
        return self.state in VALID_PREVIOUS[GroupState.PREPARING_REBALANCE]

    # --- members ----------------------------------------------------------------------------
    def has(self, member_id: str) -> bool:
        return member_id in self.members

    def is_leader(self, member_id: str) -> bool:
        return self.leader_id == member_id

    def is_pending_member(self, member_id: str) -> bool:
        return member_id in self.pending_join_members

    def static_member_id(self, instance_id: str | None) -> str | None:
        return None if instance_id is None else self.static_members.get(instance_id)

    def is_static_member_fenced(self, instance_id: str | None, member_id: str) -> bool:
        """A static member known under another member id: the caller is a stale duplicate."""
        current = self.static_member_id(instance_id)
        return current is not None and current != member_id

    def member_error(self, member_id: str, instance_id: str | None, generation_id: int) -> ErrorCode | None:
        """Kafka's checks of a request naming a member of this group and its generation, in
        Kafka's order: FENCED_INSTANCE_ID (``is_static_member_fenced``), UNKNOWN_MEMBER_ID
        (no such member), ILLEGAL_GENERATION (another generation); None when it passes."""
        if self.is_static_member_fenced(instance_id, member_id):
            return ErrorCode.FENCED_INSTANCE_ID
        if not self.has(member_id):
            return ErrorCode.UNKNOWN_MEMBER_ID
        if generation_id != self.generation_id:
            return ErrorCode.ILLEGAL_GENERATION
        return None

    @staticmethod
    def generate_member_id(client_id: str, instance_id: str | None) -> str:
        return f"{instance_id if instance_id is not None else client_id}-{uuid.uuid4()}"

    def add(self, member: GroupMember, join_callback=None) -> None:
        if not self.members:
            self.protocol_type = member.protocol_type
        if self.leader_id is None:
            self.leader_id = member.member_id
        if member.is_static:
            self.static_members[member.group_instance_id] = member.member_id
        self.members[member.member_id] = member
        self._protocol_support.update(member.protocol_names())
        member.join_callback = join_callback
        if join_callback is not None:
            self.num_awaiting_join += 1
        self.pending_join_members.discard(member.member_id)

    def remove(self, member_id: str) -> GroupMember | None:
        member = self.members.pop(member_id, None)
        if member is not None:
            self._protocol_support.subtract(member.protocol_names())
            if member.awaiting_join:
                self.num_awaiting_join -= 1
            if member.is_static and self.static_members.get(member.group_instance_id) == member_id:
                del self.static_members[member.group_instance_id]
        if self.leader_id == member_id:
            self.leader_id = next(iter(self.members), None)
        self.pending_join_members.discard(member_id)
        self.pending_sync_members.discard(member_id)
        return member

    def update_member(self, member: GroupMember, protocols: Protocols, rebalance_timeout_ms: int,
                      session_timeout_ms: int, join_callback) -> None:
        self._protocol_support.subtract(member.protocol_names())
        member.protocols = protocols
        self._protocol_support.update(member.protocol_names())
        member.rebalance_timeout_ms = rebalance_timeout_ms
        member.session_timeout_ms = session_timeout_ms
        if join_callback is not None and not member.awaiting_join:
            self.num_awaiting_join += 1
        elif join_callback is None and member.awaiting_join:
            self.num_awaiting_join -= 1
        member.join_callback = join_callback

    def replace_static_member(self, instance_id: str, old_member_id: str, new_member_id: str) -> GroupMember:
        """Give a static member a new member id; requests the old id still has waiting are
        answered FENCED_INSTANCE_ID (that process is a stale duplicate now)."""
        member = self.members.pop(old_member_id)
        self.maybe_invoke_join(member, JoinResult.failed(old_member_id, ErrorCode.FENCED_INSTANCE_ID))
        self.maybe_invoke_sync(member, SyncResult(ErrorCode.FENCED_INSTANCE_ID))
        member.member_id = new_member_id
        self.members[new_member_id] = member
        if self.leader_id == old_member_id:
            self.leader_id = new_member_id
        self.static_members[instance_id] = new_member_id
        self.pending_sync_members.discard(old_member_id)
        return member

    def maybe_invoke_join(self, member: GroupMember, result: JoinResult) -> None:
        callback = member.join_callback
        if callback is not None:
            member.join_callback = None
            self.num_awaiting_join -= 1
            callback(result)

    def maybe_invoke_sync(self, member: GroupMember, result: SyncResult) -> None:
        callback = member.sync_callback
        if callback is not None:
            member.sync_callback = None
            callback(result)

    def has_all_members_joined(self) -> bool:
        return len(self.members) == self.num_awaiting_join and not self.pending_join_members

    def not_yet_rejoined(self) -> list[GroupMember]:
        return [m for m in self.members.values() if not m.awaiting_join]

    def rebalance_timeout_ms(self) -> int:
        return max((m.rebalance_timeout_ms for m in self.members.values()), default=0)

    def maybe_elect_new_joined_leader(self) -> bool:
        """Keep a leader that rejoined, else make any rejoined member leader; False when no
        member has rejoined (or there is no leader at all)."""
        if self.leader_id is None:
            return False
        if self.members[self.leader_id].awaiting_join:
            return True
        for member_id, member in self.members.items():
            if member.awaiting_join:
                self.leader_id = member_id
                return True
        return False

    # --- protocols --------------------------------------------------------------------------
    def candidate_protocols(self) -> set[str]:
        n = len(self.members)
        return {name for name, count in self._protocol_support.items() if count == n and n > 0}

    def supports_protocols(self, protocol_type: str, names: list[str]) -> bool:
        if self.is_(GroupState.EMPTY):
            return bool(protocol_type) and bool(names)
        n = len(self.members)
        return protocol_type == self.protocol_type and any(self._protocol_support[p] == n for p in names)

    def select_protocol(self) -> str:
        candidates = self.candidate_protocols()
        votes = Counter(m.vote(candidates) for m in self.members.values())
        return votes.most_common(1)[0][0]

    def init_next_generation(self, now_ms: int) -> None:
        self.generation_id += 1
        if self.members:
            self.protocol_name = self.select_protocol()
            next_state = GroupState.COMPLETING_REBALANCE
        else:
            self.protocol_name = None
            next_state = GroupState.EMPTY
        self.subscribed_topics = self.compute_subscribed_topics()
        self.transition_to(next_state, now_ms)
        self.pending_sync_members.clear()

    def current_member_metadata(self) -> tuple[JoinedMember, ...]:
        protocol = self.protocol_name
        return tuple(JoinedMember(m.member_id, m.group_instance_id, m.metadata(protocol))
                     for m in self.members.values())

    def compute_subscribed_topics(self) -> frozenset[str] | None:
        """The topics the members subscribe to, for a consumer group (None when unknown)."""
        if self.protocol_type != CONSUMER_PROTOCOL_TYPE:
            return None
        if not self.members:
            return frozenset()
        if self.protocol_name is None:
            return None
        topics: set[str] = set()
        for member in self.members.values():
            found = _subscription_topics(member.metadata(self.protocol_name))
            if found is None:
                return None
            topics.update(found)
        return frozenset(topics)

    def is_subscribed_to(self, topic: str) -> bool:
        return self.subscribed_topics is not None and topic in self.subscribed_topics

    # --- records ----------------------------------------------------------------------------
    def to_record_value(self, assignment: dict[str, bytes]) -> GroupMetadataValue:
        """The group as a GroupMetadataValue, members carrying ``assignment`` (by member id)."""
        protocol = self.protocol_name
        members = [
            MemberMetadata(
                member_id=m.member_id, group_instance_id=m.group_instance_id, client_id=m.client_id,
                client_host=m.client_host, rebalance_timeout=m.rebalance_timeout_ms,
                session_timeout=m.session_timeout_ms,
                subscription=m.metadata(protocol) if protocol is not None else b"",
                assignment=assignment.get(m.member_id, b""),
            )
            for m in self.members.values()
        ]
        return GroupMetadataValue(
            protocol_type=self.protocol_type or "", generation=self.generation_id, protocol=protocol,
            leader=self.leader_id,
            current_state_timestamp=-1 if self.state_timestamp_ms is None else self.state_timestamp_ms,
            members=members,
        )

    @classmethod
    def from_record_value(cls, group_id: str, value: GroupMetadataValue, now_ms: int) -> ClassicGroup:
        """A group as loaded: Stable with its members and their assignments, or Empty."""
        group = cls(group_id, now_ms, GroupState.STABLE if value.members else GroupState.EMPTY)
        group.generation_id = value.generation
        group.protocol_type = value.protocol_type or None
        group.protocol_name = value.protocol
        group.leader_id = value.leader or None
        group.state_timestamp_ms = value.current_state_timestamp if value.current_state_timestamp >= 0 else None
        for m in value.members:
            rebalance_timeout = m.rebalance_timeout if m.rebalance_timeout >= 0 else m.session_timeout
            member = GroupMember(
                m.member_id, m.group_instance_id, m.client_id, m.client_host, rebalance_timeout,
                m.session_timeout, value.protocol_type, ((value.protocol or "", bytes(m.subscription)),),
                assignment=bytes(m.assignment),
            )
            group.add(member)
        if group.leader_id not in group.members:
            group.leader_id = next(iter(group.members), None)
        group.subscribed_topics = group.compute_subscribed_topics()
        return group


def _subscription_topics(metadata: bytes) -> list[str] | None:
    """Topics of a consumer protocol subscription: ``int16 version`` then the v0 layout, which
    every later version extends, so any version parses as v0 (as Kafka does)."""
    if len(metadata) < 2:
        return None
    try:
        subscription, _ = subscription_schema.READERS[0](memoryview(metadata), 2)
    except (struct.error, ValueError, IndexError, TypeError):
        return None
    return subscription.topics
