"""``ShareGroupMember``: one member of a KIP-932 share group (Kafka's
``modern.share.ShareGroupMember``), an immutable value.

Its fields come from two records of ``__consumer_offsets`` (``share_group_records``):

- ShareGroupMemberMetadata: rack, client id and host, subscribed topic names;
- ShareGroupCurrentMemberAssignment: member epoch, previous member epoch, state (always
  STABLE, 0: a share group has no reconciliation) and the assigned partitions.

A share group member is given its target assignment at once: partitions of a share group
are shared, so nothing has to be revoked from one member before another may have it. Its
member epoch is the group's target assignment epoch once it heartbeats after the target
changed. ``previous_member_epoch`` lets a member whose response carrying the new epoch was
lost heartbeat with the old one (Kafka's ``throwIfShareGroupMemberEpochIsInvalid``).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from odradek.coordinator.group.consumer.assignment import TopicPartitions
from odradek.coordinator.group.consumer.consumer_group_member import normalize

STABLE = 0  # Kafka's MemberState.STABLE: the only state a share group member is in


@dataclass(frozen=True, slots=True)
class ShareGroupMember:
    member_id: str
    rack_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    subscribed_topic_names: tuple[str, ...] = ()
    member_epoch: int = 0
    previous_member_epoch: int = 0
    state: int = STABLE
    assigned_partitions: TopicPartitions = field(default_factory=dict)

    def with_assignment(self, member_epoch: int, assigned: TopicPartitions) -> ShareGroupMember:
        """The member at ``member_epoch`` with ``assigned``; the previous epoch becomes the
        current one's (Kafka's ``updateMemberEpoch``)."""
        return replace(self, previous_member_epoch=self.member_epoch, member_epoch=member_epoch,
                       state=STABLE, assigned_partitions=normalize(assigned))

    def subscription_fields(self) -> tuple:
        """What ShareGroupMemberMetadata holds: a change is written."""
        return (self.rack_id, self.client_id, self.client_host, self.subscribed_topic_names)

    def assignment_fields(self) -> tuple:
        """What ShareGroupCurrentMemberAssignment holds: a change is written."""
        return (self.member_epoch, self.previous_member_epoch, self.state, self.assigned_partitions)
