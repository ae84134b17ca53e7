"""``ShareGroupManager``: the KIP-932 share groups of one shard (Kafka's
``GroupMetadataManager.shareGroupHeartbeat`` and friends), beside the classic groups'
``GroupMetadataManager`` and the consumer groups' ``ConsumerGroupManager``.

A heartbeat, in three steps (each returning records; nothing changes until they replay):

1. the member is created or updated from the request; a changed subscription, or a change of
   the subscribed topics' metadata (their hash, ``share_group.compute_metadata_hash``), bumps
   the group epoch;
2. when the group epoch is ahead of the assignment epoch, a new target assignment is computed
   with ``simple_assignor`` (only partitions whose share-group state is initialized, when the
   broker initializes it: ``state_initialization``);
3. the member takes its target at once, at the assignment epoch: share groups share
   partitions, so there is nothing to revoke first.

Share-group state initialization (Kafka 4.2's ``maybeCreateInitializeShareGroupStateRequest``):
when ``state_initialization`` is on, a heartbeat that finds subscribed partitions neither
initialized nor initializing records them as initializing (ShareGroupStatePartitionMetadata)
and leaves an ``InitializeRequest`` in ``take_initialize_requests()`` for the runtime, which
asks the share coordinator (InitializeShareGroupState, state epoch 0, start offset -1: the
share partition applies ``share.auto.offset.reset`` when it first reads the state) and reports
back with ``initialized`` or ``initialize_failed``. Initialized partitions bump the group
epoch so the next heartbeat assigns them. When it is off, every partition is assignable and
the share partition initializes its state lazily on its first read.

Timers (``TimerQueue``, key ``share-session:<group>:<member>``): a member that does not
heartbeat within its session timeout (``group.share.session.timeout.ms``, or the group's
``share.session.timeout.ms``) is fenced: removed, the group epoch bumped.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable
from dataclasses import dataclass, replace

from odradek.coordinator.group.consumer import subscription_metadata
from odradek.coordinator.group.consumer.assignment import MemberSubscription
from odradek.coordinator.group.coordinator_result import CoordinatorResult, Write
from odradek.coordinator.group.share.share_group import ShareGroup, ShareGroupState, compute_metadata_hash
from odradek.coordinator.group.share.share_group_heartbeat import (
    LEAVE_GROUP_MEMBER_EPOCH,
    ShareHeartbeatError,
    ShareHeartbeatRequest,
    ShareHeartbeatResult,
    validate,
)
from odradek.coordinator.group.share.share_group_member import ShareGroupMember
from odradek.coordinator.group.share.share_group_records import (
    ShareCurrentAssignmentRecord,
    ShareGroupEpochRecord,
    ShareMemberSubscriptionRecord,
    ShareStatePartitionMetadataRecord,
    ShareTargetAssignmentEpochRecord,
    ShareTargetAssignmentMemberRecord,
)
from odradek.coordinator.group.share.simple_assignor import SimpleAssignor
from odradek.protocol.generated.error_codes import ErrorCode

log = logging.getLogger("odradek.coordinator.group")

E = ErrorCode


@dataclass(frozen=True, slots=True)
class InitializeRequest:
    """Partitions whose share-group state the share coordinator must initialize
    (InitializeShareGroupState): topic id -> (topic name, partitions)."""

    group_id: str
    topics: dict


@dataclass(frozen=True, slots=True)
class DeleteStateRequest:
    """A deleted share group's state to delete from the share coordinator
    (DeleteShareGroupState): topic id -> partitions."""

    group_id: str
    topics: dict


class ShareGroupManager:
    def __init__(self, config, clock, timer, metadata, other_group: Callable[[str], str | None],
                 group_config: Callable[[str], dict] | None = None) -> None:
        """``metadata()``: the broker's current ``MetadataImage``; ``other_group(group_id)``:
        the type ("classic", "consumer") of a group of another kind using that id, or None;
        ``group_config(group_id)``: the group's dynamic configs (``share.session.timeout.ms``,
        ``share.heartbeat.interval.ms``), {} when none."""
        self.config = config
        self.clock = clock
        self.timer = timer
        self.metadata = metadata
        self.other_group = other_group
        self.group_config = group_config or (lambda group_id: {})
        self.assignor = SimpleAssignor()
        self.groups: dict[str, ShareGroup] = {}
        self.state_initialization = False  # the runtime turns it on when it has a Persister
        self._initialize: list[InitializeRequest] = []
        self._delete_state: list[DeleteStateRequest] = []

    def group(self, group_id: str) -> ShareGroup | None:
        return self.groups.get(group_id)

    # --- ShareGroupHeartbeat --------------------------------------------------------------------
    def heartbeat(self, req: ShareHeartbeatRequest) -> CoordinatorResult:
        try:
            validate(req)
            if req.member_epoch == LEAVE_GROUP_MEMBER_EPOCH:
                return self._leave(req)
            return self._heartbeat(req)
        except ShareHeartbeatError as e:
            return CoordinatorResult(ShareHeartbeatResult(e.error, e.message, req.member_id or None, req.member_epoch))

    def _heartbeat(self, req: ShareHeartbeatRequest) -> CoordinatorResult:
        records: list = []
        group = self._get_or_create(req.group_id, req.member_epoch == 0)
        max_size = self.config.share_max_size
        if len(group.members) >= max_size and req.member_id not in group.members:
            raise ShareHeartbeatError(E.GROUP_MAX_SIZE_REACHED, "The share group has reached its maximum capacity "
                                                                f"of {max_size} members.")
        member = self._member(group, req)
        is_new = req.member_id not in group.members
        updated = replace(member, client_id=req.client_id, client_host=req.client_host,
                          rack_id=req.rack_id if req.rack_id is not None else member.rack_id,
                          subscribed_topic_names=(tuple(req.subscribed_topic_names)
                                                  if req.subscribed_topic_names is not None
                                                  else member.subscribed_topic_names))
        bump = is_new
        if is_new or updated.subscription_fields() != member.subscription_fields():
            records.append(ShareMemberSubscriptionRecord(group.group_id, req.member_id, updated))
            bump = bump or set(updated.subscribed_topic_names) != set(member.subscribed_topic_names)
        members = {**group.members, req.member_id: updated}
        group_epoch, metadata = self._maybe_bump(group, members, bump, records)
        if group_epoch > group.assignment_epoch:
            target = self._update_target(group, group_epoch, members, metadata, records).get(req.member_id, {})
            target_epoch = group_epoch
        else:
            target_epoch, target = group.assignment_epoch, group.target_of(req.member_id)
        reconciled = updated
        if updated.member_epoch != target_epoch or updated.assigned_partitions != target:
            reconciled = updated.with_assignment(target_epoch, target)
        stored = group.member(req.member_id)
        if stored is None or reconciled.assignment_fields() != stored.assignment_fields():
            records.append(ShareCurrentAssignmentRecord(group.group_id, req.member_id, reconciled))
        self._maybe_initialize(group, metadata, records)
        self.schedule_session_timeout(group.group_id, req.member_id)
        changed = reconciled.assigned_partitions != member.assigned_partitions
        result = ShareHeartbeatResult(E.NONE, None, req.member_id, reconciled.member_epoch,
                                      self.heartbeat_interval_ms(group.group_id),
                                      reconciled.assigned_partitions if req.member_epoch == 0 or changed else None)
        return CoordinatorResult(result, [Write(records)] if records else [])

    def _get_or_create(self, group_id: str, create: bool) -> ShareGroup:
        """Kafka's ``getOrMaybeCreatePersistedShareGroup``: a group id in use by a classic or
        consumer group (even an empty one) is not a share group."""
        group = self.groups.get(group_id)
        if group is not None:
            return group
        if self.other_group(group_id) is not None:
            raise ShareHeartbeatError(E.GROUP_ID_NOT_FOUND, f"Group {group_id} is not a share group.")
        if not create:
            raise ShareHeartbeatError(E.GROUP_ID_NOT_FOUND, f"Share group {group_id} not found.")
        return ShareGroup(group_id)

    def _member(self, group: ShareGroup, req: ShareHeartbeatRequest) -> ShareGroupMember:
        member = group.member(req.member_id)
        if member is None:
            if req.member_epoch != 0:
                raise ShareHeartbeatError(E.UNKNOWN_MEMBER_ID,
                                          f"Member {req.member_id} is not a member of group {group.group_id}.")
            log.info("[GroupId %s] member %s joins the share group", group.group_id, req.member_id)
            return ShareGroupMember(req.member_id)
        if req.member_epoch == 0:
            # Rejoining under its own id (after being fenced, or a lost response): it starts
            # over from epoch 0 and is given its assignment again.
            return replace(member, member_epoch=0, previous_member_epoch=0, assigned_partitions={})
        _check_epoch(member, req.member_epoch)
        return member

    def _maybe_bump(self, group: ShareGroup, members: dict, bump: bool, records: list):
        """``(group epoch, subscription metadata)`` after this change; a ShareGroupMetadata
        record when the epoch is bumped (a subscription changed, or the topics' hash did)."""
        image = self.metadata()
        metadata = subscription_metadata.compute(group.subscribed_topic_names(members.values()), image)
        metadata_hash = compute_metadata_hash(metadata)
        epoch = group.group_epoch
        if bump or metadata_hash != group.metadata_hash:
            epoch += 1
            records.append(ShareGroupEpochRecord(group.group_id, epoch, metadata_hash))
            log.info("[GroupId %s] bumped share group epoch to %d", group.group_id, epoch)
        return epoch, metadata

    def _update_target(self, group: ShareGroup, epoch: int, members: dict, metadata, records: list) -> dict:
        """The target of every member at ``epoch``: records for the targets that changed, the
        removed members' tombstones, then the new assignment epoch (Kafka's
        ``TargetAssignmentBuilder``)."""
        topics = {t.topic_id: t for t in metadata.values()}
        subscriptions = {
            member_id: MemberSubscription(member_id, None, m.rack_id,
                                          frozenset(metadata[n].topic_id for n in m.subscribed_topic_names
                                                    if n in metadata), group.target_of(member_id))
            for member_id, m in sorted(members.items())}
        assignable = group.is_initialized if self.state_initialization else None
        targets = self.assignor.assign(subscriptions, topics, assignable)
        for member_id, target in sorted(targets.items()):
            if group.target.get(member_id) != target:
                records.append(ShareTargetAssignmentMemberRecord(group.group_id, member_id, target))
        for member_id in sorted(group.target):
            if member_id not in targets:
                records.append(ShareTargetAssignmentMemberRecord(group.group_id, member_id, None))
        records.append(ShareTargetAssignmentEpochRecord(group.group_id, epoch))
        return targets

    # --- share-group state initialization ---------------------------------------------------------
    def _maybe_initialize(self, group: ShareGroup, metadata, records: list) -> None:
        if not self.state_initialization:
            return
        image = self.metadata()
        initialized = {t: v for t, v in group.initialized.items() if t in image.topic_ids}
        initializing = {t: v for t, v in group.initializing.items() if t in image.topic_ids}
        wanted: dict = {}
        for name, t in sorted(metadata.items()):
            missing = frozenset(p for p in range(t.num_partitions)
                                if not group.is_initialized(t.topic_id, p) and not group.is_initializing(t.topic_id, p))
            if missing:
                wanted[t.topic_id] = (name, missing)
                old = initializing.get(t.topic_id, (name, frozenset()))[1]
                initializing[t.topic_id] = (name, old | missing)
        if wanted or initialized != group.initialized or initializing != group.initializing:
            records.append(ShareStatePartitionMetadataRecord(group.group_id, initialized, initializing,
                                                             dict(group.deleting)))
        if wanted:
            self._initialize.append(InitializeRequest(group.group_id, wanted))

    def take_initialize_requests(self) -> list[InitializeRequest]:
        """The InitializeShareGroupState calls the last operations asked for (then forgotten)."""
        out, self._initialize = self._initialize, []
        return out

    def take_delete_state_requests(self) -> list[DeleteStateRequest]:
        out, self._delete_state = self._delete_state, []
        return out

    def initialized(self, group_id: str, topics: dict) -> CoordinatorResult:
        """The share coordinator initialized ``topics`` (topic id -> (name, partitions)): they
        move from initializing to initialized, and the group epoch is bumped so the next
        heartbeat assigns them."""
        return self._initialize_done(group_id, topics, True)

    def initialize_failed(self, group_id: str, topics: dict) -> CoordinatorResult:
        """InitializeShareGroupState failed for ``topics``: they are no longer initializing (the
        next heartbeat asks again)."""
        return self._initialize_done(group_id, topics, False)

    def _initialize_done(self, group_id: str, topics: dict, ok: bool) -> CoordinatorResult:
        group = self.groups.get(group_id)
        if group is None or group.dead:
            return CoordinatorResult(None)
        initializing = dict(group.initializing)
        initialized = dict(group.initialized)
        for topic_id, (name, partitions) in topics.items():
            left = initializing.get(topic_id, (name, frozenset()))[1] - partitions
            if left:
                initializing[topic_id] = (name, left)
            else:
                initializing.pop(topic_id, None)
            if ok:
                initialized[topic_id] = (name, initialized.get(topic_id, (name, frozenset()))[1] | partitions)
        records: list = [ShareStatePartitionMetadataRecord(group_id, initialized, initializing, dict(group.deleting))]
        if ok:
            records.append(ShareGroupEpochRecord(group_id, group.group_epoch + 1, group.metadata_hash))
        return CoordinatorResult(None, [Write(records)])

    # --- leaving and fencing --------------------------------------------------------------------
    def _leave(self, req: ShareHeartbeatRequest) -> CoordinatorResult:
        group = self.groups.get(req.group_id)
        if group is None:
            if self.other_group(req.group_id) is not None:
                raise ShareHeartbeatError(E.GROUP_ID_NOT_FOUND, f"Group {req.group_id} is not a share group.")
            raise ShareHeartbeatError(E.GROUP_ID_NOT_FOUND, f"Share group {req.group_id} not found.")
        member = group.member(req.member_id)
        if member is None:
            raise ShareHeartbeatError(E.UNKNOWN_MEMBER_ID, f"Member {req.member_id} is not a member of group "
                                                           f"{req.group_id}.")
        log.info("[GroupId %s] member %s left the share group", req.group_id, req.member_id)
        result = ShareHeartbeatResult(E.NONE, None, req.member_id, LEAVE_GROUP_MEMBER_EPOCH)
        return CoordinatorResult(result, [Write(self.fence(group, member))])

    def fence(self, group: ShareGroup, member: ShareGroupMember) -> list:
        """The records removing ``member`` (its assignment, target and subscription, in Kafka's
        order), bumping the group epoch and computing the others' new targets."""
        g = group.group_id
        records: list = [ShareCurrentAssignmentRecord(g, member.member_id, None),
                         ShareTargetAssignmentMemberRecord(g, member.member_id, None),
                         ShareMemberSubscriptionRecord(g, member.member_id, None)]
        members = {k: v for k, v in group.members.items() if k != member.member_id}
        epoch, metadata = self._maybe_bump(group, members, True, records)
        if members:
            # Kafka leaves the new target to the next heartbeat; computing it now writes the
            # same records one heartbeat earlier (the removed member's target is gone already).
            group_without = _without_target(group, member.member_id)
            self._update_target(group_without, epoch, members, metadata, records)
        self.timer.cancel(_key(g, member.member_id))
        return records

    def _fence_if_present(self, group_id: str, member_id: str):
        def fire():
            group = self.groups.get(group_id)
            member = group.member(member_id) if group is not None else None
            if member is None:
                return None
            log.info("[GroupId %s] share group member %s fenced: session timed out", group_id, member_id)
            return CoordinatorResult(None, [Write(self.fence(group, member))])

        return fire

    def schedule_session_timeout(self, group_id: str, member_id: str) -> None:
        deadline = self.clock.milliseconds() + self.session_timeout_ms(group_id)
        self.timer.schedule(_key(group_id, member_id), deadline, self._fence_if_present(group_id, member_id))

    def session_timeout_ms(self, group_id: str) -> int:
        return int(self.group_config(group_id).get("share.session.timeout.ms", self.config.share_session_timeout_ms))

    def heartbeat_interval_ms(self, group_id: str) -> int:
        return int(self.group_config(group_id).get("share.heartbeat.interval.ms",
                                                   self.config.share_heartbeat_interval_ms))

    # --- deletion and listing -------------------------------------------------------------------
    def delete_records(self, group: ShareGroup) -> list:
        """Tombstones of an empty group's records (Kafka's ``createGroupTombstoneRecords``);
        its initialized share-group state is left in ``take_delete_state_requests()``."""
        g = group.group_id
        records: list = [ShareCurrentAssignmentRecord(g, m, None) for m in sorted(group.members)]
        records += [ShareTargetAssignmentMemberRecord(g, m, None) for m in sorted(group.target)]
        records += [ShareTargetAssignmentEpochRecord(g, None)]
        records += [ShareMemberSubscriptionRecord(g, m, None) for m in sorted(group.members)]
        records += [ShareStatePartitionMetadataRecord(g, None), ShareGroupEpochRecord(g, None)]
        state = {t: ps for t, (_, ps) in {**group.initializing, **group.initialized}.items()}
        if state:
            self._delete_state.append(DeleteStateRequest(g, state))
        return records

    def list_groups(self, states: set[str] | None):
        """``[(group id, state name)]``; ``states``: lower-case state names to keep."""
        return [(g.group_id, g.state.value) for g in self.groups.values()
                if not g.dead and (not states or g.state.value.lower() in states)]

    # --- replay ---------------------------------------------------------------------------------
    def replay(self, record) -> None:
        g = record.group_id
        if isinstance(record, ShareGroupEpochRecord):
            if record.epoch is None:
                group = self.groups.pop(g, None)
                if group is not None:
                    group.dead = True
                    self.timer.cancel_prefix(f"share-session:{g}:")
                return
            group = self.groups.setdefault(g, ShareGroup(g))
            group.group_epoch, group.metadata_hash = record.epoch, record.metadata_hash
            return
        group = self.groups.get(g)
        if group is None:
            if _is_tombstone(record):
                return
            group = self.groups[g] = ShareGroup(g)
        if isinstance(record, ShareMemberSubscriptionRecord):
            group.replay_subscription(record.member_id, record.member)
        elif isinstance(record, ShareTargetAssignmentEpochRecord):
            group.assignment_epoch = record.epoch if record.epoch is not None else 0
        elif isinstance(record, ShareTargetAssignmentMemberRecord):
            group.set_target(record.member_id, record.partitions)
        elif isinstance(record, ShareCurrentAssignmentRecord):
            group.replay_current_assignment(record.member_id, record.member)
        elif isinstance(record, ShareStatePartitionMetadataRecord):
            group.initialized = dict(record.initialized or {})
            group.initializing = dict(record.initializing or {})
            group.deleting = dict(record.deleting or {})

    def on_loaded(self) -> None:
        """After loading: every member must heartbeat within its session timeout."""
        for group in self.groups.values():
            for member_id in group.members:
                self.schedule_session_timeout(group.group_id, member_id)

    def unload(self) -> None:
        for group in self.groups.values():
            group.dead = True
        self.groups.clear()
        self._initialize.clear()
        self._delete_state.clear()


def _key(group_id: str, member_id: str) -> str:
    return f"share-session:{group_id}:{member_id}"


def _without_target(group: ShareGroup, member_id: str) -> ShareGroup:
    """A shallow view of ``group`` whose target lacks ``member_id`` (its tombstone is
    already among the records)."""
    view = ShareGroup(group.group_id)
    view.target = {k: v for k, v in group.target.items() if k != member_id}
    view.initialized = group.initialized
    return view


def _is_tombstone(record) -> bool:
    for name in ("member", "epoch", "partitions", "initialized"):
        if hasattr(record, name):
            return getattr(record, name) is None
    return False


def _check_epoch(member: ShareGroupMember, epoch: int) -> None:
    """Kafka's ``throwIfShareGroupMemberEpochIsInvalid``: an epoch ahead of the member's is
    fenced; one behind is fenced unless it is the previous epoch (the response with the new
    epoch was lost)."""
    if epoch > member.member_epoch:
        raise ShareHeartbeatError(E.FENCED_MEMBER_EPOCH,
                                  f"The share group member has a greater member epoch ({epoch}) than the one known "
                                  f"by the group coordinator ({member.member_epoch}). The member must abandon all "
                                  "its partitions and rejoin.")
    if epoch < member.member_epoch and epoch != member.previous_member_epoch:
        raise ShareHeartbeatError(E.FENCED_MEMBER_EPOCH,
                                  f"The share group member has a smaller member epoch ({epoch}) than the one known "
                                  f"by the group coordinator ({member.member_epoch}). The member must abandon all "
                                  "its partitions and rejoin.")


__all__ = ["ShareGroupManager", "ShareGroupState", "InitializeRequest", "DeleteStateRequest"]
