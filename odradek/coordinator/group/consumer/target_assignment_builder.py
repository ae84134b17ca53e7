"""The target assignment of a consumer group at a new group epoch (Kafka's
``modern.TargetAssignmentBuilder``).

Called when the group epoch is ahead of the assignment epoch. It gives the assignor every
member (with the change the current heartbeat brings: a member added, updated or removed),
each with its subscribed topic ids and its current target (for stickiness), and the
subscribed topics' metadata; then it returns the records of the change:

- a ConsumerGroupTargetAssignmentMember record for each member whose target changed (new
  members included), a tombstone for each member removed;
- then the ConsumerGroupTargetAssignmentMetadata record of the new assignment epoch.

An assignor's PartitionAssignorError propagates (the heartbeat answers UNKNOWN_SERVER_ERROR
and writes nothing, as Kafka).
"""

from __future__ import annotations

from dataclasses import dataclass

from odradek.coordinator.group.consumer.assignment import (
    MemberSubscription,
    PartitionAssignor,
    TopicMetadata,
    TopicPartitions,
)
from odradek.coordinator.group.consumer.consumer_group import ConsumerGroup
from odradek.coordinator.group.consumer.consumer_group_member import ConsumerGroupMember, normalize
from odradek.coordinator.group.consumer.consumer_group_records import (
    TargetAssignmentEpochRecord,
    TargetAssignmentMemberRecord,
)


@dataclass(frozen=True, slots=True)
class TargetAssignment:
    targets: dict[str, TopicPartitions]  # member id -> its new target
    records: list


def build_target_assignment(group: ConsumerGroup, group_epoch: int, assignor: PartitionAssignor,
                            members: dict[str, ConsumerGroupMember], metadata: dict[str, TopicMetadata],
                            resolved_topics) -> TargetAssignment:
    """The target of every one of ``members`` (the group's members after this change) at
    ``group_epoch``. ``resolved_topics(member) -> set of topic names`` is what a member
    subscribes to (its names and the topics its regex matches)."""
    topics = {t.topic_id: t for t in metadata.values()}
    subscriptions = {}
    for member_id, m in sorted(members.items()):
        ids = frozenset(metadata[name].topic_id for name in resolved_topics(m) if name in metadata)
        subscriptions[member_id] = MemberSubscription(member_id, m.instance_id, m.rack_id, ids,
                                                      group.target_of(member_id))
    result = assignor.assign(subscriptions, topics)
    targets = {member_id: normalize(result.get(member_id, {})) for member_id in subscriptions}
    records: list = []
    for member_id, target in targets.items():
        if member_id not in group.target or group.target[member_id] != target:
            records.append(TargetAssignmentMemberRecord(group.group_id, member_id, target))
    for member_id in group.target:
        if member_id not in targets:
            records.append(TargetAssignmentMemberRecord(group.group_id, member_id, None))
    records.append(TargetAssignmentEpochRecord(group.group_id, group_epoch))
    return TargetAssignment(targets, records)
