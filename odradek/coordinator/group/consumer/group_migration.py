"""KIP-848 online migration between classic and consumer groups (Kafka's
``GroupMetadataManager``: ``validateOnlineUpgrade``, ``convertToConsumerGroup``,
``classicGroupJoinToConsumerGroup``, ``classicGroupSyncToConsumerGroup``,
``classicGroupHeartbeatToConsumerGroup``, ``classicGroupLeaveToConsumerGroup``;
``ConsumerGroup.fromClassicGroup``).

Upgrade: a ConsumerGroupHeartbeat for a classic group in use converts it, when
``group.consumer.migration.policy`` allows upgrades, every member uses the consumer embedded
protocol (protocol type ``consumer``) and the group is no larger than
``group.consumer.max.size``. The classic group's record gets a tombstone; each classic
member becomes a consumer-group member with its ``ClassicMemberMetadata``, at the classic
generation as member epoch, owning (and targeted at) its last classic assignment; the group
epoch and assignment epoch are the generation. The joining heartbeat then bumps the epoch and
a new target assignment covers everyone. Join and sync requests waiting in the classic group
are answered REBALANCE_IN_PROGRESS, so those members rejoin, now into the consumer group.
Committed offsets are records of their own and are untouched.

Classic members of a consumer group (mixed membership during a rolling upgrade):

- JoinGroup creates or updates the member from its subscription (topics, rack, owned
  partitions; its protocols must share one with the other classic members, else
  INCONSISTENT_GROUP_PROTOCOL, Kafka's ``supportsClassicProtocols``). A static member joining
  without member id under a known ``group.instance.id`` replaces that instance's member
  (either protocol, any epoch) under a new member id, keeping its partitions and target; when
  the replaced member was the last consumer-protocol one, the group downgrades
  (``group_downgrade``). The join computes the target assignment if the group epoch moved,
  and reconciles the member one step, the owned partitions of its subscription standing for what it still holds
  (an eager client owns none at JoinGroup). The answer: generation = member epoch, protocol =
  its first supported protocol, no leader (the member never assigns: librdkafka and the Java
  client then send an empty SyncGroup).
- SyncGroup answers the member's assigned partitions (never the ones pending revocation), in
  its subscription's version of ``ConsumerProtocolAssignment``.
- Heartbeat answers REBALANCE_IN_PROGRESS while the member must rejoin: the group epoch is
  ahead of its epoch, it has partitions to revoke, or partitions it waits for are free.
- LeaveGroup removes the member and bumps the group epoch.
- OffsetCommit: the generation is the member epoch (ILLEGAL_GENERATION otherwise,
  ``ConsumerGroup.commit_error``).

Downgrade, when the last consumer-protocol member goes: ``group_downgrade``.

Policy values (``group.consumer.migration.policy``): ``bidirectional`` (Kafka 4's default),
``upgrade``, ``downgrade``, ``disabled``. With ``disabled`` nothing converts and a group in use
refuses the other protocol, as before online migration (GROUP_ID_NOT_FOUND,
INCONSISTENT_GROUP_PROTOCOL).
"""

from __future__ import annotations

import logging
import uuid
from dataclasses import replace

from odradek.coordinator.group.classic_group import ClassicGroup
from odradek.coordinator.group.consumer import consumer_protocol
from odradek.coordinator.group.consumer.consumer_group import CONSUMER_PROTOCOL_TYPE, ConsumerGroup
from odradek.coordinator.group.consumer.consumer_group_member import (
    ClassicMemberMetadata,
    ConsumerGroupMember,
    MemberState,
)
from odradek.coordinator.group.consumer.consumer_group_records import (
    CurrentAssignmentRecord,
    GroupEpochRecord,
    MemberSubscriptionRecord,
    TargetAssignmentEpochRecord,
    TargetAssignmentMemberRecord,
)
from odradek.coordinator.group.coordinator_record import GroupMetadataRecord
from odradek.coordinator.group.coordinator_result import CoordinatorResult, Write
from odradek.coordinator.group.group_requests import UNKNOWN_MEMBER_ID, JoinRequest, LeavingMember, SyncRequest
from odradek.coordinator.group.group_results import JoinResult, SyncResult
from odradek.coordinator.group.group_state import GroupState
from odradek.protocol.generated.error_codes import ErrorCode

log = logging.getLogger("odradek.coordinator.group")

E = ErrorCode

POLICIES = {"bidirectional": (True, True), "upgrade": (True, False), "downgrade": (False, True),
            "disabled": (False, False)}


class MigrationPolicy:
    """Kafka's ``ConsumerGroupMigrationPolicy`` (an unknown value reads as ``disabled``)."""

    def __init__(self, name: str) -> None:
        self.name = (name or "").lower()
        self.upgrade, self.downgrade = POLICIES.get(self.name, (False, False))

    @property
    def enabled(self) -> bool:
        return self.upgrade or self.downgrade


class GroupMigration:
    def __init__(self, manager) -> None:
        """``manager``: the shard's ``ConsumerGroupManager`` (its classic groups, metadata,
        timers and assignment steps are used)."""
        self.manager = manager
        self.policy = MigrationPolicy(manager.config.consumer_migration_policy)

    # --- upgrade ----------------------------------------------------------------------------
    def validate_online_upgrade(self, classic: ClassicGroup) -> bool:
        gid = classic.group_id
        if not self.policy.upgrade:
            log.info("Cannot upgrade classic group %s to consumer group: online upgrade is disabled.", gid)
            return False
        if classic.protocol_type != CONSUMER_PROTOCOL_TYPE or classic.protocol_name is None:
            log.info("Cannot upgrade classic group %s: it does not use the consumer embedded protocol.", gid)
            return False
        if len(classic.members) > self.manager.config.consumer_max_size:
            log.info("Cannot upgrade classic group %s: its size exceeds group.consumer.max.size.", gid)
            return False
        return True

    def convert_to_consumer_group(self, classic: ClassicGroup, records: list) -> ConsumerGroup:
        """The consumer group ``classic`` becomes (in memory, for the heartbeat computing on
        it); ``records`` receives what makes it so once written and replayed."""
        image = self.manager.metadata()
        gid, generation = classic.group_id, classic.generation_id
        group = ConsumerGroup(gid)
        group.group_epoch = group.assignment_epoch = generation
        members = []
        for m in classic.members.values():
            try:
                subscription = consumer_protocol.decode_subscription(m.metadata(classic.protocol_name))
                owned = consumer_protocol.decode_assignment(m.assignment)
            except consumer_protocol.MalformedConsumerProtocol as e:
                log.warning("Cannot upgrade classic group %s: malformed consumer protocol: %s", gid, e)
                raise _refused(gid) from None
            assigned = _by_topic_id(owned, image)
            member = ConsumerGroupMember(
                m.member_id, m.group_instance_id, subscription.rack_id or None, m.client_id, m.client_host,
                m.rebalance_timeout_ms, tuple(subscription.topics), None, None, generation, generation,
                MemberState.STABLE, assigned, {}, ClassicMemberMetadata(m.session_timeout_ms, tuple(m.protocols)))
            group.set_target(m.member_id, assigned)
            group.update_member(member)
            members.append(member)
        # Answer whoever waits in the classic group: they rejoin into the consumer group.
        for m in classic.members.values():
            classic.maybe_invoke_join(m, JoinResult.failed(m.member_id, E.REBALANCE_IN_PROGRESS))
            classic.maybe_invoke_sync(m, SyncResult(E.REBALANCE_IN_PROGRESS))
        records.append(GroupMetadataRecord(gid, None))
        records += [MemberSubscriptionRecord(gid, m.member_id, m) for m in members]
        records.append(GroupEpochRecord(gid, generation))
        records += [TargetAssignmentMemberRecord(gid, m.member_id, m.assigned_partitions) for m in members]
        records.append(TargetAssignmentEpochRecord(gid, generation))
        records += [CurrentAssignmentRecord(gid, m.member_id, m) for m in members]
        for m in members:
            self.manager.schedule_session_timeout(gid, m.member_id, m.classic.session_timeout_ms)
        log.info("[GroupId %s] upgrading classic group (generation %d, %d members) to a consumer group",
                 gid, generation, len(members))
        return group

    # --- classic members of a consumer group --------------------------------------------------
    def accepts_classic_members(self) -> bool:
        return self.policy.enabled

    def join(self, group: ConsumerGroup, req: JoinRequest, respond) -> CoordinatorResult:
        """JoinGroup of a classic member (``classicGroupJoinToConsumerGroup``)."""
        error = self._check_join(group, req)
        if error is not None:
            respond(JoinResult.failed(req.member_id, error))
            return CoordinatorResult()
        member_id = req.member_id or str(uuid.uuid4())
        if req.member_id == UNKNOWN_MEMBER_ID and req.require_known_member_id:
            respond(JoinResult.failed(member_id, E.MEMBER_ID_REQUIRED))
            return CoordinatorResult()
        try:
            subscription = consumer_protocol.decode_subscription(req.protocols[0][1])
        except consumer_protocol.MalformedConsumerProtocol:
            respond(JoinResult.failed(req.member_id, E.INCONSISTENT_GROUP_PROTOCOL))
            return CoordinatorResult()
        records: list = []
        mgr, image = self.manager, self.manager.metadata()
        member, stored, replaced = self._member_for_join(group, req, member_id, records)
        updated = replace(member, instance_id=req.group_instance_id, rack_id=subscription.rack_id or None,
                          client_id=req.client_id, client_host=req.client_host,
                          rebalance_timeout_ms=req.rebalance_timeout_ms, subscribed_topic_names=tuple(subscription.topics),
                          subscribed_topic_regex=None, server_assignor=None,
                          classic=ClassicMemberMetadata(req.session_timeout_ms, tuple(req.protocols)))
        if updated != member or stored is None:
            records.append(MemberSubscriptionRecord(group.group_id, member_id, updated))
        bump = (stored is None and replaced is None) or updated.subscription_key() != member.subscription_key()
        members = {**group.members, member_id: updated}
        if replaced is not None:
            members.pop(replaced.member_id, None)
        epoch, metadata = mgr._maybe_bump(group, members, bump, records)
        if epoch > group.assignment_epoch:
            target_epoch, target = epoch, mgr._update_target(group, epoch, members, metadata, records).get(member_id, {})
        else:
            target_epoch = group.assignment_epoch
            target = group.target_of(replaced.member_id if replaced is not None else member_id)
        owned = _by_topic_id(_owned_of(subscription), image)
        reconciled = mgr._reconcile(group, updated, target_epoch, target, owned, False)
        if stored is None or _assignment_of(reconciled) != _assignment_of(stored):
            records.append(CurrentAssignmentRecord(group.group_id, member_id, reconciled))
        if replaced is not None and mgr.downgrade.validate_with_replaced_member(group, replaced.member_id):
            # The last consumer-protocol member was the one replaced: the group goes classic.
            classic, more = mgr.downgrade.convert_to_classic_group(group, replaced.member_id, reconciled)
            result = JoinResult(E.NONE, member_id, classic.generation_id, CONSUMER_PROTOCOL_TYPE,
                                classic.protocol_name)
            return self._answer_when_written(records + more, result, respond, replay=False)
        mgr.schedule_session_timeout(group.group_id, member_id, req.session_timeout_ms)
        result = JoinResult(E.NONE, member_id, reconciled.member_epoch, CONSUMER_PROTOCOL_TYPE, req.protocols[0][0])
        log.info("[GroupId %s] classic member %s joined the consumer group at epoch %d", group.group_id, member_id,
                 reconciled.member_epoch)
        return self._answer_when_written(records, result, respond)

    @staticmethod
    def _answer_when_written(records: list, result: JoinResult, respond, replay: bool = True) -> CoordinatorResult:
        if not records:
            respond(result)
            return CoordinatorResult()

        def on_written(error: ErrorCode):
            respond(result if error == E.NONE else JoinResult.failed(result.member_id, E.NOT_COORDINATOR))

        return CoordinatorResult(None, [Write(records, replay=replay, on_written=on_written)])

    def _member_for_join(self, group: ConsumerGroup, req: JoinRequest, member_id: str, records: list):
        """``(member, stored, replaced)``: the member the JoinGroup starts from, the group's
        member of that id (None: new), and the static member it replaces (Kafka's
        ``getOrMaybeSubscribeStaticConsumerGroupMember`` for a classic member: a JoinGroup
        without member id under a known ``group.instance.id`` takes the instance over whatever
        protocol its member uses and whatever its epoch, keeping its partitions and target
        under the new member id, at epoch 0; the replaced member is removed)."""
        static = group.static_member(req.group_instance_id)
        if static is None or req.member_id != UNKNOWN_MEMBER_ID:
            stored = group.member(member_id)
            return stored or ConsumerGroupMember(member_id), stored, None
        new = replace(static, member_id=member_id, member_epoch=0, previous_member_epoch=0)
        gid = group.group_id
        records += [CurrentAssignmentRecord(gid, static.member_id, None),
                    TargetAssignmentMemberRecord(gid, static.member_id, None),
                    MemberSubscriptionRecord(gid, static.member_id, None),
                    MemberSubscriptionRecord(gid, member_id, new),
                    TargetAssignmentMemberRecord(gid, member_id, group.target_of(static.member_id)),
                    CurrentAssignmentRecord(gid, member_id, new)]
        self.manager._cancel_timers(gid, static.member_id)
        log.info("[GroupId %s] Static member with instance id %s re-joins the consumer group using the classic "
                 "protocol. Created a new member %s to replace the existing member %s.", gid,
                 req.group_instance_id, member_id, static.member_id)
        return new, None, static

    def _check_join(self, group: ConsumerGroup, req: JoinRequest) -> ErrorCode | None:
        if not self.accepts_classic_members():
            return E.INCONSISTENT_GROUP_PROTOCOL
        if req.protocol_type != CONSUMER_PROTOCOL_TYPE or not req.protocols:
            return E.INCONSISTENT_GROUP_PROTOCOL
        cfg = self.manager.classic.config
        if not cfg.min_session_timeout_ms <= req.session_timeout_ms <= cfg.max_session_timeout_ms:
            return E.INVALID_SESSION_TIMEOUT
        # A dynamic member with an id the group does not know joins under it (Kafka creates it:
        # the id may be the one MEMBER_ID_REQUIRED just handed out, which nothing remembers).
        static = group.static_member(req.group_instance_id)
        if req.member_id and req.group_instance_id is not None and static is None:
            return E.UNKNOWN_MEMBER_ID  # Kafka's throwIfStaticMemberIsUnknown
        if static is not None and req.member_id and static.member_id != req.member_id:
            return E.FENCED_INSTANCE_ID
        if not self._supports_protocols(group, req):
            return E.INCONSISTENT_GROUP_PROTOCOL
        if req.member_id not in group.members and len(group.members) >= self.manager.config.consumer_max_size:
            return E.GROUP_MAX_SIZE_REACHED
        return None

    @staticmethod
    def _supports_protocols(group: ConsumerGroup, req: JoinRequest) -> bool:
        """Kafka's ``ConsumerGroup.supportsClassicProtocols``: the joining member shares a
        protocol with every other classic member (so a downgrade can choose one)."""
        names = {name for name, _ in req.protocols}
        for m in group.members.values():
            replaced = req.group_instance_id is not None and m.instance_id == req.group_instance_id
            if m.uses_classic_protocol() and m.member_id != req.member_id and not replaced:
                names &= {name for name, _ in m.classic.supported_protocols}
        return bool(names)

    def _classic_member(self, group: ConsumerGroup, member_id: str, instance_id: str | None):
        """``(member, error)``: Kafka's ``validateConsumerGroupMember`` and
        ``throwIfMemberDoesNotUseClassicProtocol``."""
        if instance_id is not None:
            member = group.static_member(instance_id)
            if member is None:
                return None, E.UNKNOWN_MEMBER_ID
            if member.member_id != member_id:
                return None, E.FENCED_INSTANCE_ID
        member = group.member(member_id)
        if member is None:
            return None, E.UNKNOWN_MEMBER_ID
        if not member.uses_classic_protocol():
            return None, E.UNKNOWN_MEMBER_ID
        return member, None

    def sync(self, group: ConsumerGroup, req: SyncRequest, respond) -> CoordinatorResult:
        """SyncGroup of a classic member (``classicGroupSyncToConsumerGroup``)."""
        member, error = self._classic_member(group, req.member_id, req.group_instance_id)
        if error is None and req.generation_id != member.member_epoch:
            error = E.ILLEGAL_GENERATION
        if error is None and ((req.protocol_type is not None and req.protocol_type != CONSUMER_PROTOCOL_TYPE)
                              or (req.protocol_name is not None
                                  and req.protocol_name != member.classic.supported_protocols[0][0])):
            error = E.INCONSISTENT_GROUP_PROTOCOL
        if error is None and group.group_epoch > member.member_epoch and member.state != MemberState.UNREVOKED_PARTITIONS:
            error = E.REBALANCE_IN_PROGRESS
        if error is not None:
            respond(SyncResult(error))
            return CoordinatorResult()
        self.manager.schedule_session_timeout(group.group_id, member.member_id, member.classic.session_timeout_ms)
        names = self.manager.metadata().topic_ids
        by_name = {names[t]: ps for t, ps in member.assigned_partitions.items() if t in names}
        version = consumer_protocol.version_of(member.classic.supported_protocols[0][1])
        respond(SyncResult(E.NONE, CONSUMER_PROTOCOL_TYPE, member.classic.supported_protocols[0][0],
                           consumer_protocol.encode_assignment(by_name, version)))
        return CoordinatorResult()

    def heartbeat(self, group: ConsumerGroup, member_id: str, instance_id: str | None, generation_id: int) -> ErrorCode:
        """Heartbeat of a classic member (``classicGroupHeartbeatToConsumerGroup``)."""
        member, error = self._classic_member(group, member_id, instance_id)
        if error is not None:
            return error
        if generation_id != member.member_epoch:
            return E.ILLEGAL_GENERATION
        self.manager.schedule_session_timeout(group.group_id, member_id, member.classic.session_timeout_ms)
        if (member.member_epoch < group.group_epoch or member.state == MemberState.UNREVOKED_PARTITIONS
                or (member.state == MemberState.UNRELEASED_PARTITIONS and _released_for(group, member))):
            return E.REBALANCE_IN_PROGRESS
        return E.NONE

    def leave(self, group: ConsumerGroup, leaving: list[LeavingMember]) -> CoordinatorResult:
        """LeaveGroup on a consumer group (``classicGroupLeaveToConsumerGroup``). Response:
        ``(group error, [error per leaving member])``."""
        errors, records = [], []
        gone: set[str] = set()
        for m in leaving:
            member = group.static_member(m.group_instance_id) if m.group_instance_id else group.member(m.member_id)
            if member is None or member.member_id in gone:
                errors.append(E.UNKNOWN_MEMBER_ID)
            elif m.member_id and member.member_id != m.member_id:
                errors.append(E.FENCED_INSTANCE_ID)
            else:
                log.info("[GroupId %s] member %s left the consumer group (LeaveGroup)", group.group_id, member.member_id)
                records += self.manager.fence(group, member)
                gone.add(member.member_id)
                errors.append(E.NONE)
        return CoordinatorResult((E.NONE, errors), [Write(records)] if records else [])


def _refused(group_id: str):
    from odradek.coordinator.group.consumer.consumer_group_heartbeat import HeartbeatError

    return HeartbeatError(E.GROUP_ID_NOT_FOUND, f"Cannot upgrade the classic group {group_id} to a consumer group "
                                                "because the embedded consumer protocol is malformed.")


def _by_topic_id(by_name: dict, image) -> dict[uuid.UUID, frozenset[int]]:
    out = {}
    for name, partitions in by_name.items():
        topic = image.topics.get(name)
        if topic is not None and partitions:
            out[topic.topic_id] = frozenset(partitions)
    return out


def _owned_of(subscription) -> dict[str, frozenset[int]]:
    out: dict[str, set[int]] = {}
    for tp in subscription.owned_partitions or ():
        out.setdefault(tp.topic, set()).update(tp.partitions)
    return {t: frozenset(ps) for t, ps in out.items()}


def _assignment_of(m: ConsumerGroupMember) -> dict:
    return dict(member_epoch=m.member_epoch, previous_member_epoch=m.previous_member_epoch, state=m.state,
                assigned_partitions=m.assigned_partitions, partitions_pending_revocation=m.partitions_pending_revocation)


def _released_for(group: ConsumerGroup, member: ConsumerGroupMember) -> bool:
    """Some partition of the member's target it does not have yet is free now."""
    for topic_id, partitions in group.target_of(member.member_id).items():
        for p in partitions - member.assigned_partitions.get(topic_id, frozenset()):
            if group.current_partition_epoch(topic_id, p) == -1:
                return True
    return False


def classic_in_use(classic: ClassicGroup | None) -> bool:
    return classic is not None and not classic.is_(GroupState.DEAD) and not classic.is_(GroupState.EMPTY)
