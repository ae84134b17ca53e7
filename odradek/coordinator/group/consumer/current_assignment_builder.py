"""Reconciliation of one member towards its target assignment (Kafka's
``modern.consumer.CurrentAssignmentBuilder``): a pure function of the member, the target
(epoch and partitions), the partitions the member reports as owned, and who owns what.

Rules (KIP-848, "revoke before assign"):

- A member gives up what the target takes away *before* it gets anything new: while it still
  owns a partition pending revocation it stays UNREVOKED_PARTITIONS at its current epoch.
  ``owned`` None (the heartbeat did not say) counts as still owning everything.
- Once it has revoked them it moves on (to ``member_epoch + 1`` first, then to the target).
- A partition of its target still held by another member (``partition_epoch`` not -1) is
  *unreleased*: the member moves to the target epoch without it (UNRELEASED_PARTITIONS) and
  gets it on a later heartbeat once the owner has let it go.
- Otherwise the member is STABLE at the target epoch.

Worked example: target epoch 5 moves partition 2 of topic T from A to B.
A (epoch 4, owns {1, 2}) heartbeats: UNREVOKED_PARTITIONS, epoch 4, assigned {1},
pending revocation {2}. B (epoch 4, owns {0}): target {0, 2}, but 2 still has A's epoch:
UNRELEASED_PARTITIONS at epoch 5 with {0}. A heartbeats owning {1}: STABLE, epoch 5, and
partition 2 is free. B's next heartbeat: STABLE, epoch 5, {0, 2}.
"""

from __future__ import annotations

from collections.abc import Callable

from odradek.coordinator.group.consumer.assignment import TopicPartitions
from odradek.coordinator.group.consumer.consumer_group_member import ConsumerGroupMember, MemberState

PartitionEpoch = Callable[[object, int], int]  # (topic id, partition) -> owner's epoch, -1 when free


class FencedMemberEpoch(Exception):
    """The member is in a state this coordinator does not know: it must rejoin."""


def reconcile(member: ConsumerGroupMember, target_epoch: int, target: TopicPartitions,
              partition_epoch: PartitionEpoch, owned: TopicPartitions | None) -> ConsumerGroupMember:
    """The member one step closer to ``target`` at ``target_epoch`` (``member`` itself when
    nothing can change)."""
    state = member.state
    if state == MemberState.STABLE:
        if member.member_epoch == target_epoch:
            return member
        return _next(member, member.member_epoch, member.assigned_partitions, target_epoch, target,
                     partition_epoch, owned)
    if state == MemberState.UNREVOKED_PARTITIONS:
        if _owns_any(owned, member.partitions_pending_revocation):
            return member
        return _next(member, member.member_epoch + 1, member.assigned_partitions, target_epoch, target,
                     partition_epoch, owned)
    if state == MemberState.UNRELEASED_PARTITIONS:
        return _next(member, member.member_epoch, member.assigned_partitions, target_epoch, target,
                     partition_epoch, owned)
    if owned is None or any(owned.values()):
        raise FencedMemberEpoch("The consumer group member is in a unknown state. "
                                "The member must abandon all its partitions and rejoin.")
    return _next(member, target_epoch, member.assigned_partitions, target_epoch, target, partition_epoch, owned)


def _owns_any(owned: TopicPartitions | None, partitions: TopicPartitions) -> bool:
    if owned is None:
        return True
    return any(set(ps) & set(partitions.get(t, ())) for t, ps in owned.items())


def _next(member: ConsumerGroupMember, member_epoch: int, current: TopicPartitions, target_epoch: int,
          target: TopicPartitions, partition_epoch: PartitionEpoch, owned) -> ConsumerGroupMember:
    assigned: dict = {}
    revoking: dict = {}
    pending: dict = {}
    unreleased = False
    for topic_id in set(target) | set(current):
        wanted = set(target.get(topic_id, ()))
        have = set(current.get(topic_id, ()))
        kept = have & wanted
        new = {p for p in wanted - kept if partition_epoch(topic_id, p) == -1}
        unreleased = unreleased or len(new) < len(wanted - kept)
        assigned[topic_id] = kept
        revoking[topic_id] = have - kept
        pending[topic_id] = new
    revoking = {t: ps for t, ps in revoking.items() if ps}
    if revoking and _owns_any(owned, revoking):
        return member.with_assignment(MemberState.UNREVOKED_PARTITIONS, member_epoch, assigned, revoking)
    for topic_id, ps in pending.items():
        assigned[topic_id] = assigned[topic_id] | ps
    state = MemberState.UNRELEASED_PARTITIONS if unreleased else MemberState.STABLE
    return member.with_assignment(state, target_epoch, assigned, {})
