"""KIP-848 online downgrade: a consumer group whose last consumer-protocol member goes becomes a
classic group again (Kafka's ``GroupMetadataManager.validateOnlineDowngradeWithFencedMember``,
``validateOnlineDowngradeWithReplacedMemberId``, ``convertToClassicGroup``;
``ClassicGroup.fromConsumerGroup``).

When: a member using the consumer protocol leaves (ConsumerGroupHeartbeat epoch -1), is
fenced (session or rebalance timeout), or is a static member replaced by a classic member
joining under its ``group.instance.id``; every other member uses the classic protocol (there
is at least one); ``group.consumer.migration.policy`` is ``bidirectional`` or ``downgrade``;
the classic group would have no more than ``group.max.size`` members (Kafka's
``group.classic.max.size``); and the classic members share a protocol (the consumer group
admits classic members only so, ``GroupMigration._check_join``). Otherwise the member is
removed as usual and the group stays a consumer group (an empty one stays too, as in Kafka).

The conversion writes, in one batch:

1. the consumer group's tombstones (``ConsumerGroupManager.delete_records``: current
   assignments, targets, target assignment epoch, subscriptions, subscription metadata, group
   epoch; for a replaced static member the joining member's id stands for the replaced one);
2. a GroupMetadata record of the classic group: generation = the consumer group's epoch,
   protocol type ``consumer``, the protocol every member supports that most prefer, the
   first member as leader, and per member its session and rebalance timeouts, JoinGroup
   protocols (its ``ClassicMemberMetadata``) and its assignment, a ``ConsumerProtocolAssignment``
   in its subscription's version.

Committed offsets are records of their own, under the same group id: they stay.

The assignment stored per member is its *current* assignment (``assigned_partitions``), not
its target as Kafka's ``fromConsumerGroup`` stores: what the member owns now. Partitions pending
revocation are left out, so no two members' stored assignments overlap and none names a
partition another member still holds (a target may, while that member has not revoked it).
The stored assignment reaches a client only through a SyncGroup on a Stable group (after a
coordinator reload, before any rebalance), where the target could have handed out a partition
still owned elsewhere.

In memory the shard changes at once, as Kafka does (``replay=False``: the classic group needs
its live state, timers and the rebalance): the consumer group is dropped with its timers and
the classic group takes its place with a heartbeat timer per member. A downgrade on a member
leaving then prepares a rebalance (PreparingRebalance): the members' next Heartbeat answers
REBALANCE_IN_PROGRESS (ILLEGAL_GENERATION for one behind the group epoch) and they rejoin;
the next generation is the group epoch + 1. A downgrade on a static replacement keeps the
group Stable, the joining member taking the replaced member's partitions. Replaying the
records (a reload) rebuilds the classic group as written: Stable at that generation with
those assignments.
"""

from __future__ import annotations

import logging

from odradek.coordinator.group.classic_group import ClassicGroup
from odradek.coordinator.group.consumer import consumer_protocol
from odradek.coordinator.group.consumer.consumer_group import CONSUMER_PROTOCOL_TYPE, ConsumerGroup
from odradek.coordinator.group.consumer.consumer_group_member import ConsumerGroupMember
from odradek.coordinator.group.coordinator_record import GroupMetadataRecord
from odradek.coordinator.group.group_state import GroupState
from odradek.coordinator.group.member import GroupMember

log = logging.getLogger("odradek.coordinator.group")


class GroupDowngrade:
    def __init__(self, manager, policy) -> None:
        """``manager``: the shard's ``ConsumerGroupManager``; ``policy``: its
        ``MigrationPolicy``."""
        self.manager = manager
        self.policy = policy

    # --- validation ---------------------------------------------------------------------------
    def validate_with_fenced_member(self, group: ConsumerGroup, fenced_id: str) -> bool:
        """Kafka's ``validateOnlineDowngradeWithFencedMember``: ``fenced_id`` is the last
        consumer-protocol member and classic members remain."""
        if not _all_classic_except(group, fenced_id):
            return False
        if len(group.members) <= 1:
            log.debug("Skip downgrading the consumer group %s to classic group because it's empty.", group.group_id)
            return False
        return self._allowed(group, len(group.members) - 1, fenced_id)

    def validate_with_replaced_member(self, group: ConsumerGroup, replaced_id: str) -> bool:
        """Kafka's ``validateOnlineDowngradeWithReplacedMemberId``: a classic member replaces
        the last consumer-protocol member (a static member under the same instance id)."""
        if not _all_classic_except(group, replaced_id):
            return False
        return self._allowed(group, len(group.members), replaced_id)

    def _allowed(self, group: ConsumerGroup, size: int, leaving_id: str) -> bool:
        gid = group.group_id
        if not self.policy.downgrade:
            log.info("Cannot downgrade consumer group %s to classic group because the online downgrade is "
                     "disabled.", gid)
            return False
        if size > self.manager.config.max_size:
            log.info("Cannot downgrade consumer group %s to classic group because its group size is greater "
                     "than classic group max size.", gid)
            return False
        if not _common_protocols([m for m in group.members.values() if m.member_id != leaving_id]):
            log.info("Cannot downgrade consumer group %s to classic group: its classic members share no "
                     "protocol.", gid)
            return False
        return True

    # --- conversion ---------------------------------------------------------------------------
    def convert_to_classic_group(self, group: ConsumerGroup, leaving_id: str,
                                 joining: ConsumerGroupMember | None = None) -> tuple[ClassicGroup, list]:
        """``(classic group, records)``: the records of the conversion (consumer group
        tombstones, then its GroupMetadata record); the shard already holds the classic group
        in place of ``group`` when this returns. ``joining``: the classic member replacing the
        static member ``leaving_id`` (it takes the replaced member's partitions)."""
        mgr = self.manager
        gid = group.group_id
        records = mgr.delete_records(group)
        if joining is not None:
            records = [_renamed(r, leaving_id, joining.member_id) for r in records]
        members = [m for m in group.members.values() if m.member_id != leaving_id]
        if joining is not None:
            members.append(joining)
        classic = from_consumer_group(group, members, leaving_id, joining, mgr.metadata(), mgr.clock.milliseconds())
        records.append(GroupMetadataRecord(gid, classic.to_record_value(
            {m.member_id: m.assignment for m in classic.members.values()})))
        mgr.drop_group(gid)
        groups = mgr.classic
        groups.groups[gid] = classic
        for member in classic.members.values():
            groups.rebalance.schedule_heartbeat(classic, member)
        log.info("[GroupId %s] downgraded the consumer group to a classic group (generation %d, %d members)",
                 gid, classic.generation_id, len(classic.members))
        if joining is None:
            groups.rebalance.prepare_rebalance(classic, f"Downgrade group {gid} from consumer to classic.")
        return classic, records


def from_consumer_group(group: ConsumerGroup, members: list[ConsumerGroupMember], leaving_id: str,
                        joining: ConsumerGroupMember | None, image, now_ms: int) -> ClassicGroup:
    """Kafka's ``ClassicGroup.fromConsumerGroup``: a Stable classic group at the consumer
    group's epoch whose members are ``members`` (all using the classic protocol), each holding
    its current assignment (the joining member: the replaced one's)."""
    classic = ClassicGroup(group.group_id, now_ms, GroupState.STABLE)
    classic.generation_id = group.group_epoch
    classic.protocol_type = CONSUMER_PROTOCOL_TYPE
    for m in members:
        classic.add(GroupMember(m.member_id, m.instance_id, m.client_id, m.client_host,
                                m.rebalance_timeout_ms, m.classic.session_timeout_ms, CONSUMER_PROTOCOL_TYPE,
                                tuple(m.classic.supported_protocols)))
    classic.protocol_name = classic.select_protocol()
    classic.subscribed_topics = classic.compute_subscribed_topics()
    names = image.topic_ids
    for member in classic.members.values():
        source = group.member(leaving_id) if joining is not None and member.member_id == joining.member_id else \
            group.member(member.member_id)
        owned = source.assigned_partitions if source is not None else {}
        by_name = {names[t]: ps for t, ps in owned.items() if t in names}
        version = consumer_protocol.version_of(member.metadata(classic.protocol_name))
        member.assignment = consumer_protocol.encode_assignment(by_name, version)
    return classic


def _all_classic_except(group: ConsumerGroup, member_id: str) -> bool:
    """Kafka's ``allMembersUseClassicProtocolExcept``: ``member_id`` uses the consumer protocol,
    every other member the classic one."""
    member = group.member(member_id)
    if member is None or member.uses_classic_protocol():
        return False
    return all(m.uses_classic_protocol() for m in group.members.values() if m.member_id != member_id)


def _common_protocols(members: list[ConsumerGroupMember]) -> set[str]:
    common: set[str] | None = None
    for m in members:
        names = {name for name, _ in m.classic.supported_protocols}
        common = names if common is None else common & names
    return common or set()


def _renamed(record, old_id: str, new_id: str):
    """A member tombstone of ``old_id`` written for ``new_id`` (Kafka's
    ``createGroupTombstoneRecordsWithReplacedMember``: the replacing member's records were
    written just before, in the same batch)."""
    from dataclasses import replace

    if getattr(record, "member_id", None) == old_id:
        return replace(record, member_id=new_id)
    return record
