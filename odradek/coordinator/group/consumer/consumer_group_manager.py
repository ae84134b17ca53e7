"""``ConsumerGroupManager``: the KIP-848 consumer groups of one shard (Kafka's
``GroupMetadataManager.consumerGroupHeartbeat`` and friends), beside the classic groups'
``GroupMetadataManager``.

A heartbeat, in three steps (each returning records; nothing changes until they replay):

1. the member is created or updated from the request; a changed subscription, or a change
   of the subscribed topics' metadata (``subscription_metadata``), bumps the group epoch; a
   regex new to the group is resolved later (``regex_resolution``: a timer writes the
   ConsumerGroupRegularExpression records and bumps the group epoch);
2. when the group epoch is ahead of the assignment epoch, a new target assignment is computed
   (``target_assignment_builder``) with the server assignor the members prefer;
3. the member is reconciled one step towards its target (``current_assignment_builder``).

Records are written with ``replay=True``: the group changes by replaying them, right after
the local append, exactly as a coordinator loading the partition after a restart or a
failover does. Timers (``TimerQueue``, keys ``consumer-session:<group>:<member>`` and
``consumer-rebalance:<group>:<member>``, ``consumer-regex:<group>``): a member that does not heartbeat within
``group.consumer.session.timeout.ms`` is fenced (removed, group epoch bumped); one that does
not revoke within its rebalance timeout is fenced too (``member_timers``).
"""

from __future__ import annotations

import logging
import uuid
from dataclasses import replace

from odradek.coordinator.group.consumer import regex_resolution, subscription_metadata
from odradek.coordinator.group.consumer.assignment import PartitionAssignorError
from odradek.coordinator.group.consumer.consumer_group import ConsumerGroup, ConsumerGroupState
from odradek.coordinator.group.consumer.consumer_group_heartbeat import (
    LEAVE_GROUP_MEMBER_EPOCH,
    LEAVE_GROUP_STATIC_MEMBER_EPOCH,
    HeartbeatError,
    HeartbeatRequest,
    HeartbeatResult,
    validate,
)
from odradek.coordinator.group.consumer.consumer_group_member import (
    ConsumerGroupMember,
    MemberState,
    is_subset,
)
from odradek.coordinator.group.consumer.group_downgrade import GroupDowngrade
from odradek.coordinator.group.consumer.group_migration import GroupMigration
from odradek.coordinator.group.consumer.member_timers import MemberTimers, timer_key
from odradek.coordinator.group.consumer.consumer_group_records import (
    CurrentAssignmentRecord,
    GroupEpochRecord,
    MemberSubscriptionRecord,
    RegularExpressionRecord,
    SubscriptionMetadataRecord,
    TargetAssignmentEpochRecord,
    TargetAssignmentMemberRecord,
)
from odradek.coordinator.group.consumer.current_assignment_builder import FencedMemberEpoch, reconcile
from odradek.coordinator.group.consumer.regex_resolution import MetadataVersions, regex_timer_key
from odradek.coordinator.group.consumer.subscription_metadata import InvalidRegex
from odradek.coordinator.group.consumer.target_assignment_builder import build_target_assignment
from odradek.coordinator.group.coordinator_record import GroupMetadataRecord
from odradek.coordinator.group.coordinator_result import CoordinatorResult, Write
from odradek.coordinator.group.group_state import GroupState
from odradek.protocol.generated.error_codes import ErrorCode

log = logging.getLogger("odradek.coordinator.group")

E = ErrorCode


class ConsumerGroupManager(MemberTimers):
    def __init__(self, config, clock, timer, classic, metadata, assignors) -> None:
        """``classic``: the shard's GroupMetadataManager (a group id is one or the other);
        ``metadata()``: the broker's current ``MetadataImage``; ``assignors``: name ->
        PartitionAssignor, the first being the default."""
        self.config = config
        self.clock = clock
        self.timer = timer
        self.classic = classic
        self.metadata = metadata
        self.assignors = assignors
        # group_id -> the group's configs (server/group_configs.py: consumer.session.timeout.ms,
        # consumer.heartbeat.interval.ms); set by the runtime, {} (the broker's defaults) without
        self.group_config = lambda group_id: {}
        self.groups: dict[str, ConsumerGroup] = {}
        self.metadata_versions = MetadataVersions(clock)  # regex_resolution's image versions
        self.migration = GroupMigration(self)
        self.downgrade = GroupDowngrade(self, self.migration.policy)

    def group(self, group_id: str) -> ConsumerGroup | None:
        return self.groups.get(group_id)

    # --- ConsumerGroupHeartbeat -----------------------------------------------------------------
    def heartbeat(self, req: HeartbeatRequest) -> CoordinatorResult:
        try:
            validate(req, self.assignors)
            if req.member_epoch in (LEAVE_GROUP_MEMBER_EPOCH, LEAVE_GROUP_STATIC_MEMBER_EPOCH):
                return self._leave(req)
            return self._heartbeat(req)
        except HeartbeatError as e:
            return CoordinatorResult(HeartbeatResult(e.error, e.message, req.member_id or None, req.member_epoch))

    def _heartbeat(self, req: HeartbeatRequest) -> CoordinatorResult:
        records: list = []
        group = self._get_or_create(req.group_id, req.member_epoch == 0, records)
        member_id = req.member_id or str(uuid.uuid4())
        if len(group.members) >= self.config.consumer_max_size and member_id not in group.members:
            raise HeartbeatError(E.GROUP_MAX_SIZE_REACHED, "The consumer group has reached its maximum capacity "
                                                           f"of {self.config.consumer_max_size} members.")
        previous_static = group.static_member(req.instance_id) if req.member_epoch == 0 else None
        replaced = previous_static.member_id if previous_static and previous_static.member_id != member_id else None
        member, abandoned = self._member(group, req, member_id, records)
        stored = group.member(member_id)
        is_new = stored is None and replaced is None
        updated = member.with_subscription(
            instance_id=req.instance_id, rack_id=req.rack_id, server_assignor=req.server_assignor,
            rebalance_timeout_ms=req.rebalance_timeout_ms if req.rebalance_timeout_ms != -1 else None,
            subscribed_topic_names=req.subscribed_topic_names, subscribed_topic_regex=req.subscribed_topic_regex)
        updated = replace(updated, member_id=member_id, client_id=req.client_id, client_host=req.client_host)
        if req.subscribed_topic_regex == "":
            updated = replace(updated, subscribed_topic_regex=None)
        bump = is_new
        if is_new or _subscription_fields(updated) != _subscription_fields(member):
            records.append(MemberSubscriptionRecord(group.group_id, member_id, updated))
            bump = bump or updated.subscription_key()[0] != member.subscription_key()[0]
        try:
            regex_bump, refresh = regex_resolution.update_regexes(group, member, updated, records)
        except InvalidRegex as e:
            raise HeartbeatError(E.INVALID_REGULAR_EXPRESSION, str(e)) from None
        bump = bump or regex_bump
        members = {**group.members, member_id: updated}
        if replaced is not None:  # a static member replaced under a new id
            members.pop(replaced, None)
        self._maybe_refresh_regexes(group, members, refresh, req.describable)
        group_epoch, metadata = self._maybe_bump(group, members, bump, records)
        if group_epoch > group.assignment_epoch:
            target_epoch = group_epoch
            target = self._update_target(group, group_epoch, members, metadata, records).get(member_id, {})
        else:
            target_epoch, target = group.assignment_epoch, group.target_of(replaced or member_id)
        reconciled = self._reconcile(group, updated, target_epoch, target, req.owned, abandoned)
        if stored is None or _assignment_fields(reconciled) != _assignment_fields(stored):
            records.append(CurrentAssignmentRecord(group.group_id, member_id, reconciled))
        self._schedule_rebalance_timeout(group.group_id, reconciled)
        self._schedule_session_timeout(group.group_id, member_id)
        changed = reconciled.assigned_partitions != member.assigned_partitions
        result = HeartbeatResult(E.NONE, None, member_id, reconciled.member_epoch,
                                 self.heartbeat_interval_ms(group.group_id),
                                 reconciled.assigned_partitions if req.is_full() or changed else None)
        return CoordinatorResult(result, [Write(records)] if records else [])

    def _get_or_create(self, group_id: str, create: bool, records: list) -> ConsumerGroup:
        group = self.groups.get(group_id)
        if group is not None:
            return group
        classic = self.classic.group(group_id)
        if classic is not None and not classic.is_(GroupState.DEAD):
            if create and not classic.is_(GroupState.EMPTY) and self.migration.validate_online_upgrade(classic):
                return self.migration.convert_to_consumer_group(classic, records)
            if not (create and classic.is_(GroupState.EMPTY)):
                raise HeartbeatError(E.GROUP_ID_NOT_FOUND, f"Group {group_id} is not a consumer group.")
            records.append(GroupMetadataRecord(group_id, None))  # an empty classic group becomes a consumer group
        elif not create:
            raise HeartbeatError(E.GROUP_ID_NOT_FOUND, f"Consumer group {group_id} not found.")
        return ConsumerGroup(group_id)

    def _member(self, group: ConsumerGroup, req: HeartbeatRequest, member_id: str, records: list):
        """``(member, abandoned)``: the member as known (a new one when joining), and whether
        it rejoins at epoch 0 having given up every partition it held."""
        if req.instance_id is not None:
            static = group.static_member(req.instance_id)
            if req.member_epoch == 0 and static is not None and static.member_id != member_id:
                if static.member_epoch != LEAVE_GROUP_STATIC_MEMBER_EPOCH:
                    raise HeartbeatError(E.UNRELEASED_INSTANCE_ID,
                                         f"Static member {member_id} with instance id {req.instance_id} cannot "
                                         f"join the group because the instance id is owned by {static.member_id} member.")
                return self._replace_static(group, static, member_id, records), False
            if req.member_epoch != 0:
                if static is None:
                    raise HeartbeatError(E.UNKNOWN_MEMBER_ID, f"Instance id {req.instance_id} is unknown.")
                if static.member_id != member_id:
                    raise HeartbeatError(E.FENCED_INSTANCE_ID, f"Static member {member_id} with instance id "
                                                               f"{req.instance_id} was fenced by member {static.member_id}.")
        member = group.member(member_id)
        if member is None:
            if req.member_epoch != 0:
                raise HeartbeatError(E.UNKNOWN_MEMBER_ID,
                                     f"Member {member_id} is not a member of group {group.group_id}.")
            return ConsumerGroupMember(member_id), False
        if req.member_epoch == 0:
            # Rejoining under the same id (the client's own, KIP-1082) after being fenced or
            # losing a response: it gave up its partitions, so it starts over from epoch 0.
            fresh = replace(member, member_epoch=0, previous_member_epoch=0, state=MemberState.STABLE,
                            assigned_partitions={}, partitions_pending_revocation={})
            return fresh, True
        _check_epoch(member, req.member_epoch, req.owned)
        return member, False

    def _replace_static(self, group: ConsumerGroup, old: ConsumerGroupMember, member_id: str, records: list):
        """The static member ``old`` (which left with epoch -2) comes back as ``member_id``: it
        keeps its target and its partitions, without a new group epoch."""
        new = replace(old, member_id=member_id, member_epoch=0, previous_member_epoch=0)
        target = group.target_of(old.member_id)
        records += [CurrentAssignmentRecord(group.group_id, old.member_id, None),
                    TargetAssignmentMemberRecord(group.group_id, old.member_id, None),
                    MemberSubscriptionRecord(group.group_id, old.member_id, None),
                    MemberSubscriptionRecord(group.group_id, member_id, new),
                    TargetAssignmentMemberRecord(group.group_id, member_id, target),
                    CurrentAssignmentRecord(group.group_id, member_id, new)]
        self._cancel_timers(group.group_id, old.member_id)
        return new

    def _maybe_bump(self, group: ConsumerGroup, members: dict, bump: bool, records: list):
        """``(group epoch, subscription metadata)`` after this change; records for a new
        subscription metadata and a new group epoch."""
        image = self.metadata()
        names: set[str] = set()
        for m in members.values():
            names |= regex_resolution.member_topics(group, m)
        metadata = subscription_metadata.compute(names, image)
        if metadata != group.subscription_metadata:
            records.append(SubscriptionMetadataRecord(group.group_id, metadata))
            bump = True
        epoch = group.group_epoch
        if bump:
            epoch += 1
            records.append(GroupEpochRecord(group.group_id, epoch))
            log.info("[GroupId %s] bumped group epoch to %d", group.group_id, epoch)
        return epoch, metadata

    # --- regular expressions (regex_resolution) -------------------------------------------------
    def _maybe_refresh_regexes(self, group: ConsumerGroup, members: dict, required: bool, describable) -> None:
        """Kafka's batching conditions of ``maybeUpdateRegularExpressions``: schedule the
        group's resolution (at once, once) when due; ``describable``: the DESCRIBE check of
        the heartbeat's principal, applied to every regex of the group."""
        key = regex_timer_key(group.group_id)
        if key in self.timer:
            return
        now = self.clock.milliseconds()
        version = self.metadata_versions.observe(self.metadata())
        if regex_resolution.refresh_due(group, members, version, now, required):
            self.timer.schedule(key, now, self._refresh_regexes(group.group_id, describable))

    def _refresh_regexes(self, group_id: str, describable):
        def fire():
            group = self.groups.get(group_id)
            if group is None or group.dead:
                return None
            regexes = regex_resolution.subscribed_regexes(group.members.values())
            if not regexes:
                return None
            image = self.metadata()
            resolved = regex_resolution.resolve(regexes, image, self.metadata_versions.observe(image),
                                                self.clock.milliseconds(), describable)
            return CoordinatorResult(None, [Write(self._regexes_resolved(group, resolved, image))])

        return fire

    def _regexes_resolved(self, group: ConsumerGroup, resolved: dict, image) -> list:
        """Kafka's ``handleRegularExpressionsResult``: a record per regex; the group epoch
        bumped when a regex's topics or the subscription metadata changed."""
        records: list = [RegularExpressionRecord(group.group_id, r, v) for r, v in sorted(resolved.items())]
        bump = any(group.resolved_regexes.get(r) is None or group.resolved_regexes[r].topics != v.topics
                   for r, v in resolved.items())
        names: set[str] = set()
        for m in group.members.values():
            names |= set(m.subscribed_topic_names)
            if m.subscribed_topic_regex in resolved:
                names |= resolved[m.subscribed_topic_regex].topics
        metadata = subscription_metadata.compute(names, image)
        if metadata != group.subscription_metadata:
            records.append(SubscriptionMetadataRecord(group.group_id, metadata))
            bump = True
        if bump:
            records.append(GroupEpochRecord(group.group_id, group.group_epoch + 1))
            log.info("[GroupId %s] regular expressions %s resolved: bumped group epoch to %d",
                     group.group_id, sorted(resolved), group.group_epoch + 1)
        return records

    def _update_target(self, group: ConsumerGroup, epoch: int, members: dict, metadata, records: list) -> dict:
        # The assignor most members ask for, ties to the one configured first (Kafka's
        # computePreferredServerAssignor); the default when none asks.
        asked = [m.server_assignor for m in members.values() if m.server_assignor in self.assignors]
        name = max(self.assignors, key=lambda n: (asked.count(n), -list(self.assignors).index(n)))
        try:
            result = build_target_assignment(group, epoch, self.assignors[name], members, metadata,
                                             lambda m: regex_resolution.member_topics(group, m))
        except PartitionAssignorError as e:
            message = f"Failed to compute a new target assignment for epoch {epoch}: {e}"
            log.error("[GroupId %s] %s", group.group_id, message)
            raise HeartbeatError(E.UNKNOWN_SERVER_ERROR, message) from None
        records += result.records
        return result.targets

    def _reconcile(self, group, member, target_epoch, target, owned, abandoned) -> ConsumerGroupMember:
        if member.is_reconciled_to(target_epoch):
            return member
        # A member rejoining at epoch 0 has given up what it held: free for it to take again.
        previous = group.member(member.member_id) if abandoned else None
        own = set(previous.owned_partition_keys()) if previous is not None else set()

        def epoch(topic_id, partition):
            return -1 if (topic_id, partition) in own else group.current_partition_epoch(topic_id, partition)

        try:
            return reconcile(member, target_epoch, target, epoch, owned)
        except FencedMemberEpoch as e:
            raise HeartbeatError(E.FENCED_MEMBER_EPOCH, str(e)) from None

    # --- leaving and fencing --------------------------------------------------------------------
    def _leave(self, req: HeartbeatRequest) -> CoordinatorResult:
        group = self.groups.get(req.group_id)
        if group is None:
            raise HeartbeatError(E.GROUP_ID_NOT_FOUND, f"Consumer group {req.group_id} not found.")
        result = HeartbeatResult(E.NONE, None, req.member_id, req.member_epoch)
        if req.instance_id is None:
            member = group.member(req.member_id)
            if member is None:
                raise HeartbeatError(E.UNKNOWN_MEMBER_ID, f"Member {req.member_id} is not a member of group "
                                                          f"{req.group_id}.")
            log.info("[GroupId %s] member %s left the consumer group", req.group_id, req.member_id)
            return CoordinatorResult(result, self.fence_writes(group, member))
        member = group.static_member(req.instance_id)
        if member is None:
            raise HeartbeatError(E.UNKNOWN_MEMBER_ID, f"Instance id {req.instance_id} is unknown.")
        if member.member_id != req.member_id:
            raise HeartbeatError(E.FENCED_INSTANCE_ID, f"Static member {req.member_id} with instance id "
                                                       f"{req.instance_id} was fenced by member {member.member_id}.")
        if req.member_epoch == LEAVE_GROUP_MEMBER_EPOCH:
            return CoordinatorResult(result, self.fence_writes(group, member))
        # A static member leaving for a moment keeps its partitions: its instance comes back
        # under a new member id, or its session times out.
        left = replace(member, member_epoch=LEAVE_GROUP_STATIC_MEMBER_EPOCH, previous_member_epoch=member.member_epoch)
        self.timer.cancel(timer_key("consumer-rebalance", req.group_id, member.member_id))
        return CoordinatorResult(result, [Write([CurrentAssignmentRecord(req.group_id, member.member_id, left)])])

    def fence_writes(self, group: ConsumerGroup, member: ConsumerGroupMember) -> list[Write]:
        """Kafka's ``consumerGroupFenceMember``: the group downgrades to a classic group when
        ``member`` is its last consumer-protocol member (``group_downgrade``: written without
        replay, the shard already changed), else ``fence``'s records."""
        if self.downgrade.validate_with_fenced_member(group, member.member_id):
            return [Write(self.downgrade.convert_to_classic_group(group, member.member_id)[1], replay=False)]
        return [Write(self.fence(group, member))]

    def drop_group(self, group_id: str) -> None:
        """Forget a consumer group at once (converted to a classic group): Dead for whoever
        holds it, its timers cancelled."""
        group = self.groups.pop(group_id, None)
        if group is not None:
            group.dead = True
        self.timer.cancel_prefix(f"consumer-session:{group_id}:")
        self.timer.cancel_prefix(f"consumer-rebalance:{group_id}:")
        self.timer.cancel(regex_timer_key(group_id))

    def fence(self, group: ConsumerGroup, member: ConsumerGroupMember) -> list:
        """The records removing ``member`` (its assignment, target and subscription, in Kafka's
        order; its regex's tombstone when it was the last subscriber) and bumping the group
        epoch; its timers are cancelled."""
        records: list = [CurrentAssignmentRecord(group.group_id, member.member_id, None),
                         TargetAssignmentMemberRecord(group.group_id, member.member_id, None),
                         MemberSubscriptionRecord(group.group_id, member.member_id, None)]
        regex_resolution.update_regexes(group, member, None, records)
        members = {k: v for k, v in group.members.items() if k != member.member_id}
        self._maybe_bump(group, members, True, records)
        self._cancel_timers(group.group_id, member.member_id)
        return records

    # --- deletion -------------------------------------------------------------------------------
    def delete_records(self, group: ConsumerGroup) -> list:
        """Tombstones of an empty group's records (Kafka's ``createGroupTombstoneRecords``)."""
        g = group.group_id
        records: list = [CurrentAssignmentRecord(g, m, None) for m in group.members]
        records += [TargetAssignmentMemberRecord(g, m, None) for m in group.target]
        records += [TargetAssignmentEpochRecord(g, None)]
        records += [MemberSubscriptionRecord(g, m, None) for m in group.members]
        records += [RegularExpressionRecord(g, r, None) for r in sorted(group.resolved_regexes)]
        records += [SubscriptionMetadataRecord(g, None), GroupEpochRecord(g, None)]
        return records

    # --- listing --------------------------------------------------------------------------------
    def list_groups(self, states: set[str] | None):
        """``[(group id, state name)]``; ``states``: lower-case state names to keep."""
        return [(g.group_id, g.state.value) for g in self.groups.values()
                if not g.dead and (not states or g.state.value.lower() in states)]

    # --- replay ---------------------------------------------------------------------------------
    def replay(self, record) -> None:
        g = record.group_id
        if isinstance(record, GroupEpochRecord):
            if record.epoch is None:
                group = self.groups.pop(g, None)
                if group is not None:
                    group.dead = True
                    self.timer.cancel_prefix(f"consumer-session:{g}:")
                    self.timer.cancel_prefix(f"consumer-rebalance:{g}:")
                    self.timer.cancel(regex_timer_key(g))
                return
            self._persisted(g).group_epoch = record.epoch
            return
        tombstone = _is_tombstone(record)
        group = self.groups.get(g) if tombstone else self._persisted(g)
        if group is None:
            return
        if isinstance(record, SubscriptionMetadataRecord):
            group.subscription_metadata = dict(record.topics or {})
        elif isinstance(record, MemberSubscriptionRecord):
            group.replay_subscription(record.member_id, record.member)
        elif isinstance(record, TargetAssignmentEpochRecord):
            group.assignment_epoch = record.epoch if record.epoch is not None else 0
        elif isinstance(record, TargetAssignmentMemberRecord):
            group.set_target(record.member_id, record.partitions)
        elif isinstance(record, CurrentAssignmentRecord):
            group.replay_current_assignment(record.member_id, record.member)
        elif isinstance(record, RegularExpressionRecord):
            group.replay_regex(record.regex, record.resolved)

    def _persisted(self, group_id: str) -> ConsumerGroup:
        group = self.groups.get(group_id)
        if group is None:
            classic = self.classic.group(group_id)
            if classic is not None:  # an empty classic group (offsets only) turned consumer group
                self.classic.drop(group_id)
            group = self.groups[group_id] = ConsumerGroup(group_id)
        return group

    def on_loaded(self) -> None:
        """After loading: every member must heartbeat within its session timeout, and revoke
        within its rebalance timeout."""
        for group in self.groups.values():
            for member in group.members.values():
                classic = member.classic.session_timeout_ms if member.classic is not None else None
                self.schedule_session_timeout(group.group_id, member.member_id, classic)
                self._schedule_rebalance_timeout(group.group_id, member)

    def unload(self) -> None:
        for group in self.groups.values():
            group.dead = True
        self.groups.clear()


def _subscription_fields(m: ConsumerGroupMember) -> tuple:
    return (m.instance_id, m.rack_id, m.client_id, m.client_host, m.rebalance_timeout_ms,
            m.subscribed_topic_names, m.subscribed_topic_regex, m.server_assignor)


def _assignment_fields(m: ConsumerGroupMember) -> tuple:
    return (m.member_epoch, m.previous_member_epoch, m.state, m.assigned_partitions, m.partitions_pending_revocation)


def _is_tombstone(record) -> bool:
    for name in ("topics", "member", "epoch", "partitions", "resolved"):
        if hasattr(record, name):
            return getattr(record, name) is None
    return False


def _check_epoch(member: ConsumerGroupMember, epoch: int, owned) -> None:
    """Kafka's ``throwIfConsumerGroupMemberEpochIsInvalid``: an epoch ahead of the member's is
    fenced; one behind is fenced unless it is the previous epoch and the member owns no more
    than it is assigned (the response with the new epoch was lost)."""
    if epoch > member.member_epoch:
        raise HeartbeatError(E.FENCED_MEMBER_EPOCH,
                             f"The consumer group member has a greater member epoch ({epoch}) than the one known "
                             f"by the group coordinator ({member.member_epoch}). The member must abandon all its "
                             "partitions and rejoin.")
    if epoch < member.member_epoch and (epoch != member.previous_member_epoch
                                        or not is_subset(owned, member.assigned_partitions)):
        raise HeartbeatError(E.FENCED_MEMBER_EPOCH,
                             f"The consumer group member has a smaller member epoch ({epoch}) than the one known "
                             f"by the group coordinator ({member.member_epoch}). The member must abandon all its "
                             "partitions and rejoin.")


__all__ = ["ConsumerGroupManager", "ConsumerGroupState"]
