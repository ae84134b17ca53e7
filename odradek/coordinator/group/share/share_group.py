"""``ShareGroup``: a KIP-932 share group's state in one shard (Kafka's
``modern.share.ShareGroup``).

State, all of it rebuilt by replaying ``share_group_records``:

- ``group_epoch``: bumped whenever what the assignment depends on changes (a member joins,
  leaves or changes its subscription; a subscribed topic appears, disappears or grows; a
  subscribed partition's share-group state becomes initialized);
- ``metadata_hash``: a digest of the subscribed topics' ids and partition counts when the
  group epoch was last bumped (Kafka 4.1+'s ShareGroupMetadataValue.MetadataHash: a change
  of it at a heartbeat bumps the epoch);
- ``assignment_epoch``: the group epoch the target assignment was computed for;
- ``members``: member id -> ``ShareGroupMember``;
- ``target``: member id -> its target partitions (``simple_assignor``'s last answer);
- ``initialized`` / ``initializing``: topic id -> ``(topic name, partitions)`` whose
  share-group state the share coordinator holds (InitializeShareGroupState answered), or was
  asked for; ``deleting``: topic id -> name whose state is being deleted (Kafka's
  ShareGroupStatePartitionMetadata).

Unlike a consumer group, partitions are shared: nothing is held exclusively, so there is no
partition epoch and no reconciliation. The state is Kafka's ``ShareGroupState``: EMPTY without
members, STABLE with members, DEAD once deleted.
"""

from __future__ import annotations

import enum
import hashlib
import uuid

from odradek.coordinator.group.consumer.assignment import TopicMetadata, TopicPartitions
from odradek.coordinator.group.consumer.consumer_group_member import normalize
from odradek.coordinator.group.share.share_group_member import ShareGroupMember

SHARE_GROUP_TYPE = "share"
SHARE_PROTOCOL_TYPE = "share"

# topic id -> (topic name, partitions)
TopicPartitionsInfo = dict[uuid.UUID, tuple[str, frozenset[int]]]


class ShareGroupState(enum.Enum):
    EMPTY = "Empty"
    STABLE = "Stable"
    DEAD = "Dead"


class ShareGroup:
    def __init__(self, group_id: str) -> None:
        self.group_id = group_id
        self.group_epoch = 0
        self.metadata_hash = 0
        self.assignment_epoch = 0
        self.members: dict[str, ShareGroupMember] = {}
        self.target: dict[str, TopicPartitions] = {}
        self.initialized: TopicPartitionsInfo = {}
        self.initializing: TopicPartitionsInfo = {}
        self.deleting: dict[uuid.UUID, str] = {}
        self.dead = False

    @property
    def state(self) -> ShareGroupState:
        if self.dead:
            return ShareGroupState.DEAD
        return ShareGroupState.STABLE if self.members else ShareGroupState.EMPTY

    def is_empty(self) -> bool:
        return not self.members

    def member(self, member_id: str) -> ShareGroupMember | None:
        return self.members.get(member_id)

    def target_of(self, member_id: str) -> TopicPartitions:
        return self.target.get(member_id, {})

    def set_target(self, member_id: str, partitions: TopicPartitions | None) -> None:
        if partitions is None:
            self.target.pop(member_id, None)
        else:
            self.target[member_id] = normalize(partitions)

    def subscribed_topic_names(self, members=None) -> set[str]:
        names: set[str] = set()
        for m in (self.members.values() if members is None else members):
            names.update(m.subscribed_topic_names)
        return names

    def is_subscribed_to(self, topic: str) -> bool:
        return topic in self.subscribed_topic_names()

    def is_initialized(self, topic_id: uuid.UUID, partition: int) -> bool:
        entry = self.initialized.get(topic_id)
        return entry is not None and partition in entry[1]

    def is_initializing(self, topic_id: uuid.UUID, partition: int) -> bool:
        entry = self.initializing.get(topic_id)
        return entry is not None and partition in entry[1]

    # --- replay -------------------------------------------------------------------------------
    def replay_subscription(self, member_id: str, value: ShareGroupMember | None) -> None:
        if value is None:
            self.members.pop(member_id, None)
            return
        old = self.members.get(member_id)
        if old is None:
            self.members[member_id] = value
        else:
            self.members[member_id] = ShareGroupMember(
                member_id, value.rack_id, value.client_id, value.client_host, value.subscribed_topic_names,
                old.member_epoch, old.previous_member_epoch, old.state, old.assigned_partitions)

    def replay_current_assignment(self, member_id: str, value: ShareGroupMember | None) -> None:
        """A tombstone leaves the member at epoch -1 without partitions (its subscription's
        tombstone, next, removes it: Kafka's order)."""
        old = self.members.get(member_id)
        if value is None:
            if old is not None:
                self.members[member_id] = ShareGroupMember(
                    member_id, old.rack_id, old.client_id, old.client_host, old.subscribed_topic_names, -1, -1)
            return
        base = old or ShareGroupMember(member_id)
        self.members[member_id] = ShareGroupMember(
            member_id, base.rack_id, base.client_id, base.client_host, base.subscribed_topic_names,
            value.member_epoch, value.previous_member_epoch, value.state, normalize(value.assigned_partitions))


def compute_metadata_hash(metadata: dict[str, TopicMetadata]) -> int:
    """A signed 64-bit digest of the subscribed topics' names, ids and partition counts; 0 for
    none. Only this broker's own values are compared with it (Kafka computes its own hash the
    same way: a change of any of these bumps the group epoch)."""
    if not metadata:
        return 0
    h = hashlib.blake2b(digest_size=8)
    for name, t in sorted(metadata.items()):
        h.update(f"{name}\0{t.topic_id}\0{t.num_partitions}\n".encode())
    return int.from_bytes(h.digest(), "big", signed=True)
