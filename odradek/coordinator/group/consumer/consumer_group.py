"""``ConsumerGroup``: a KIP-848 consumer group's state in one shard (Kafka's
``modern.consumer.ConsumerGroup``).

State, all of it rebuilt by replaying ``consumer_group_records``:

- ``group_epoch``: bumped whenever what the assignment depends on changes (a member joins,
  leaves or changes its subscription; a subscribed topic appears, disappears or grows);
- ``assignment_epoch``: the group epoch the target assignment was computed for;
- ``members``: member id -> ``ConsumerGroupMember``; ``static_members``: instance id ->
  member id;
- ``target``: member id -> its target partitions (the assignor's last answer);
- ``subscription_metadata``: topic name -> ``TopicMetadata`` of every subscribed topic that
  exists;
- ``resolved_regexes``: regex -> ``ResolvedRegularExpression``, the topics each subscribed
  regex matched at its last resolution (``regex_resolution``);
- ``partition_epochs``: ``(topic id, partition)`` -> the epoch of the member that holds it
  (assigned or pending revocation). Invariant: no partition is held by two members; a
  partition is free (epoch -1) before the next member may get it.

The group's state is computed, as Kafka's ``maybeUpdateGroupState``: EMPTY without members;
ASSIGNING while the group epoch is ahead of the assignment epoch; RECONCILING while a member
is not STABLE at the assignment epoch; STABLE otherwise.
"""

from __future__ import annotations

import enum
from dataclasses import replace

from odradek.coordinator.group.consumer.assignment import TopicMetadata, TopicPartitions
from odradek.coordinator.group.consumer.consumer_group_member import ConsumerGroupMember, normalize
from odradek.coordinator.group.consumer.consumer_group_records import ResolvedRegularExpression
from odradek.protocol.generated.error_codes import ErrorCode

CONSUMER_GROUP_TYPE = "consumer"
CONSUMER_PROTOCOL_TYPE = "consumer"


class ConsumerGroupState(enum.Enum):
    EMPTY = "Empty"
    ASSIGNING = "Assigning"
    RECONCILING = "Reconciling"
    STABLE = "Stable"
    DEAD = "Dead"


class ConsumerGroup:
    def __init__(self, group_id: str) -> None:
        self.group_id = group_id
        self.group_epoch = 0
        self.assignment_epoch = 0
        self.members: dict[str, ConsumerGroupMember] = {}
        self.static_members: dict[str, str] = {}
        self.target: dict[str, TopicPartitions] = {}
        self.subscription_metadata: dict[str, TopicMetadata] = {}
        self.partition_epochs: dict[tuple, int] = {}
        self.resolved_regexes: dict[str, ResolvedRegularExpression] = {}
        self.dead = False

    # --- state --------------------------------------------------------------------------------
    @property
    def state(self) -> ConsumerGroupState:
        if self.dead:
            return ConsumerGroupState.DEAD
        if not self.members:
            return ConsumerGroupState.EMPTY
        if self.group_epoch > self.assignment_epoch:
            return ConsumerGroupState.ASSIGNING
        if any(not m.is_reconciled_to(self.assignment_epoch) for m in self.members.values()):
            return ConsumerGroupState.RECONCILING
        return ConsumerGroupState.STABLE

    def is_empty(self) -> bool:
        return not self.members

    # --- members ------------------------------------------------------------------------------
    def member(self, member_id: str) -> ConsumerGroupMember | None:
        return self.members.get(member_id)

    def static_member(self, instance_id: str | None) -> ConsumerGroupMember | None:
        member_id = self.static_members.get(instance_id) if instance_id is not None else None
        return None if member_id is None else self.members.get(member_id)

    def update_member(self, member: ConsumerGroupMember) -> None:
        """Put ``member`` in place of the member of its id, moving its partition epochs."""
        old = self.members.get(member.member_id)
        if old is not None:
            self._release(old)
            if old.instance_id is not None and self.static_members.get(old.instance_id) == old.member_id:
                del self.static_members[old.instance_id]
        self.members[member.member_id] = member
        if member.instance_id is not None:
            self.static_members[member.instance_id] = member.member_id
        self._hold(member)

    def remove_member(self, member_id: str) -> None:
        old = self.members.pop(member_id, None)
        if old is None:
            return
        self._release(old)
        if old.instance_id is not None and self.static_members.get(old.instance_id) == member_id:
            del self.static_members[old.instance_id]

    def _release(self, member: ConsumerGroupMember) -> None:
        for key in member.owned_partition_keys():
            if self.partition_epochs.get(key) is not None:
                del self.partition_epochs[key]

    def _hold(self, member: ConsumerGroupMember) -> None:
        for key in member.owned_partition_keys():
            if key in self.partition_epochs:
                raise AssertionError(f"group {self.group_id}: partition {key} of member {member.member_id} "
                                     f"is held at epoch {self.partition_epochs[key]} by another member")
            self.partition_epochs[key] = member.member_epoch

    def current_partition_epoch(self, topic_id, partition: int) -> int:
        return self.partition_epochs.get((topic_id, partition), -1)

    def set_target(self, member_id: str, partitions: TopicPartitions | None) -> None:
        if partitions is None:
            self.target.pop(member_id, None)
        else:
            self.target[member_id] = normalize(partitions)

    def target_of(self, member_id: str) -> TopicPartitions:
        return self.target.get(member_id, {})

    # --- subscriptions ------------------------------------------------------------------------
    def subscribed_topic_names(self, members=None) -> set[str]:
        """The topics named by ``members`` (default: the group's)."""
        names: set[str] = set()
        for m in (self.members.values() if members is None else members):
            names.update(m.subscribed_topic_names)
        return names

    def preferred_assignor(self, members=None) -> str | None:
        """The server assignor most members ask for (ties: the smallest name), or None."""
        counts: dict[str, int] = {}
        for m in (self.members.values() if members is None else members):
            if m.server_assignor:
                counts[m.server_assignor] = counts.get(m.server_assignor, 0) + 1
        if not counts:
            return None
        return min(counts, key=lambda name: (-counts[name], name))

    def is_subscribed_to(self, topic: str) -> bool:
        return topic in self.subscription_metadata

    # --- offsets (Kafka's validateOffsetCommit / validateOffsetFetch) --------------------------
    def commit_error(self, member_id: str, member_epoch: int, api_version: int | None = None) -> ErrorCode | None:
        """None if this commit may go on: an admin commit (epoch < 0) only while the group is
        empty; otherwise the member must exist (UNKNOWN_MEMBER_ID) at exactly this epoch
        (STALE_MEMBER_EPOCH; a classic-protocol member's generation: ILLEGAL_GENERATION).
        ``api_version``: the OffsetCommit version (None: TxnOffsetCommit); a member of the
        consumer protocol must use OffsetCommit v9+ (UNSUPPORTED_VERSION), as Kafka's
        ``ConsumerGroup.validateOffsetCommit``: older versions cannot carry a member epoch."""
        if member_epoch < 0 and not self.members:
            return None
        member = self.members.get(member_id)
        if member is None:
            return ErrorCode.UNKNOWN_MEMBER_ID
        classic = member.uses_classic_protocol()
        if api_version is not None and api_version < 9 and not classic:
            return ErrorCode.UNSUPPORTED_VERSION
        if member_epoch != member.member_epoch:
            return ErrorCode.ILLEGAL_GENERATION if classic else ErrorCode.STALE_MEMBER_EPOCH
        return None

    def fetch_error(self, member_id: str | None, member_epoch: int) -> ErrorCode | None:
        """None if this OffsetFetch may go on: without member id and epoch anyone may read;
        else as ``commit_error``."""
        if not member_id and member_epoch < 0:
            return None
        member = self.members.get(member_id or "")
        if member is None:
            return ErrorCode.UNKNOWN_MEMBER_ID
        if member_epoch != member.member_epoch:
            return ErrorCode.STALE_MEMBER_EPOCH
        return None

    # --- replay -------------------------------------------------------------------------------
    def replay_subscription(self, member_id: str, value: ConsumerGroupMember | None) -> None:
        if value is None:
            self.remove_member(member_id)
            return
        old = self.members.get(member_id)
        if old is None:
            self.update_member(value)
        else:
            self.update_member(replace(old, instance_id=value.instance_id, rack_id=value.rack_id,
                                       client_id=value.client_id, client_host=value.client_host,
                                       rebalance_timeout_ms=value.rebalance_timeout_ms,
                                       subscribed_topic_names=value.subscribed_topic_names,
                                       subscribed_topic_regex=value.subscribed_topic_regex,
                                       server_assignor=value.server_assignor, classic=value.classic))

    def replay_regex(self, regex: str, value: ResolvedRegularExpression | None) -> None:
        if value is None:
            self.resolved_regexes.pop(regex, None)
        else:
            self.resolved_regexes[regex] = value

    def replay_current_assignment(self, member_id: str, value: ConsumerGroupMember | None) -> None:
        """A tombstone leaves the member at epoch -1 without partitions (its subscription's
        tombstone, next, removes it: Kafka's order)."""
        if value is None and member_id not in self.members:
            return
        old = self.members.get(member_id) or ConsumerGroupMember(member_id)
        if value is None:
            updated = replace(old, member_epoch=-1, previous_member_epoch=-1, assigned_partitions={},
                              partitions_pending_revocation={})
        else:
            updated = replace(old, member_epoch=value.member_epoch, previous_member_epoch=value.previous_member_epoch,
                              state=value.state, assigned_partitions=value.assigned_partitions,
                              partitions_pending_revocation=value.partitions_pending_revocation)
        self.update_member(updated)
