"""``GroupMetadataManager``: Kafka's classic rebalance protocol over the groups of one shard.

The rebalance, as the members see it::

    member ──JoinGroup──▶ (waits)              the group is PreparingRebalance until every
                                               known member has rejoined, or the rebalance
                                               timeout (the largest of the members') ends;
    member ◀─JoinGroup response──               then a new generation: the protocol is chosen,
                                               the leader gets every member's metadata;
    leader ──SyncGroup(assignments)──▶          the group is stored (a GroupMetadata record),
    member ──SyncGroup──▶ (waits)               then each member gets its assignment: Stable.
    member ──Heartbeat──▶ NONE / REBALANCE_IN_PROGRESS (rejoin)

What happens between requests (join and sync phases, session expiry, the initial delay)
is the ``Rebalancer``'s; this class answers the requests.

Persistence: the group is written when a generation completes (the leader's SyncGroup), when
it becomes empty, and when a static member rejoins a stable group under a new member id. The
records carry ``replay=False``: membership lives in memory and the records are what a
restarted coordinator loads (``replay``), as in Kafka. A waiting request answered from here is
answered through its callback; every callback is called exactly once, so no request hangs.
"""

from __future__ import annotations

from odradek.coordinator.group.classic_group import ClassicGroup
from odradek.coordinator.group.coordinator_record import GroupMetadataRecord
from odradek.coordinator.group.coordinator_result import (
    CoordinatorResult,
    group_write_error,
)
from odradek.coordinator.group.group_config import GroupConfig
from odradek.coordinator.group.group_requests import (
    UNKNOWN_MEMBER_ID,
    JoinRequest,
    LeavingMember,
    SyncRequest,
)
from odradek.coordinator.group.group_results import (
    GroupDescription,
    GroupListing,
    JoinResult,
    MemberDescription,
    SyncResult,
)
from odradek.coordinator.group.group_state import GroupState
from odradek.coordinator.group.member import GroupMember
from odradek.coordinator.group.rebalancer import Rebalancer, join_response
from odradek.coordinator.group.timer_queue import TimerQueue
from odradek.protocol.generated.error_codes import ErrorCode

EMPTY, PREPARING, COMPLETING, STABLE, DEAD = (
    GroupState.EMPTY, GroupState.PREPARING_REBALANCE, GroupState.COMPLETING_REBALANCE,
    GroupState.STABLE, GroupState.DEAD,
)
CLASSIC_GROUP_TYPE = "classic"


class GroupMetadataManager:
    def __init__(self, config: GroupConfig, clock, timer: TimerQueue) -> None:
        self.config = config
        self.clock = clock
        self.groups: dict[str, ClassicGroup] = {}
        self.rebalance = Rebalancer(config, clock, timer, self.groups)

    # --- groups -----------------------------------------------------------------------------
    def group(self, group_id: str) -> ClassicGroup | None:
        return self.groups.get(group_id)

    def get_or_create(self, group_id: str) -> ClassicGroup:
        group = self.groups.get(group_id)
        if group is None or group.is_(DEAD):
            group = self.groups[group_id] = ClassicGroup(group_id, self.clock.milliseconds())
        return group

    def drop(self, group_id: str) -> None:
        """Forget a group (deleted or expired): it is Dead for whoever still holds it."""
        group = self.groups.pop(group_id, None)
        if group is not None:
            group.transition_to(DEAD, self.clock.milliseconds())
            self.rebalance.cancel_timers(group_id)

    def touch(self, group: ClassicGroup, member_id: str) -> None:
        self.rebalance.touch(group, member_id)

    def _result(self, response=None) -> CoordinatorResult:
        return self.rebalance.result(response)

    # --- JoinGroup --------------------------------------------------------------------------
    def join_group(self, req: JoinRequest, respond) -> CoordinatorResult:
        """Answer through ``respond(JoinResult)``, now or when the rebalance completes."""
        error = self._check_join(req)
        group = self.groups.get(req.group_id)
        if error is None and (group is None or group.is_(DEAD)) and req.member_id != UNKNOWN_MEMBER_ID:
            error = ErrorCode.UNKNOWN_MEMBER_ID
        if error is not None:
            respond(JoinResult.failed(req.member_id, error))
            return self._result()
        group = self.get_or_create(req.group_id)
        if not self._accepts_joining(group, req.member_id):
            self._refuse_full(group, req, respond)
            return self._result()
        if req.member_id == UNKNOWN_MEMBER_ID:
            self._join_new_member(group, req, respond)
        else:
            self._join_known_member(group, req, respond)
        if group.is_(PREPARING):
            self.rebalance.try_complete_join(group)
        return self._result()

    def _check_join(self, req: JoinRequest) -> ErrorCode | None:
        if not req.group_id:
            return ErrorCode.INVALID_GROUP_ID
        if not self.config.min_session_timeout_ms <= req.session_timeout_ms <= self.config.max_session_timeout_ms:
            return ErrorCode.INVALID_SESSION_TIMEOUT
        return None

    def _accepts_joining(self, group: ClassicGroup, member_id: str) -> bool:
        """``group.max.size``, as Kafka's classic coordinator applies it: an empty group takes
        anyone; while preparing a rebalance, members already waiting to join, and others while
        fewer than the maximum wait (the group itself may be larger, the maximum having been
        lowered: the last to rejoin are the ones left out); otherwise members of the group,
        and newcomers while it is below the maximum."""
        if group.is_(GroupState.EMPTY) or group.is_(DEAD):
            return True
        if group.is_(PREPARING):
            member = group.members.get(member_id)
            return (member is not None and member.awaiting_join) or group.num_awaiting_join < self.config.max_size
        return group.has(member_id) or len(group.members) < self.config.max_size

    def _refuse_full(self, group: ClassicGroup, req: JoinRequest, respond) -> None:
        """GROUP_MAX_SIZE_REACHED; a member refused this way leaves the group (and a group
        preparing a rebalance may now have everyone it waits for)."""
        member = group.members.get(req.member_id)
        if member is not None:
            self.rebalance.remove_member_and_update_group(group, member, "group.max.size reached")
        respond(JoinResult.failed(UNKNOWN_MEMBER_ID, ErrorCode.GROUP_MAX_SIZE_REACHED))

    def _join_new_member(self, group: ClassicGroup, req: JoinRequest, respond) -> None:
        names = [name for name, _ in req.protocols]
        if not group.supports_protocols(req.protocol_type, names):
            respond(JoinResult.failed(req.member_id, ErrorCode.INCONSISTENT_GROUP_PROTOCOL))
            return
        new_id = group.generate_member_id(req.client_id, req.group_instance_id)
        if req.group_instance_id is not None:
            existing = group.static_member_id(req.group_instance_id)
            if existing is None:
                self._add_member_and_rebalance(group, req, new_id, respond)
            else:
                self._update_static_member_and_rebalance(group, req, existing, new_id, respond)
        elif req.require_known_member_id:
            self.rebalance.expect_pending_member(group, new_id, req.session_timeout_ms)
            respond(JoinResult.failed(new_id, ErrorCode.MEMBER_ID_REQUIRED))
        else:
            self._add_member_and_rebalance(group, req, new_id, respond)

    def _join_known_member(self, group: ClassicGroup, req: JoinRequest, respond) -> None:
        member_id = req.member_id
        if not group.supports_protocols(req.protocol_type, [name for name, _ in req.protocols]):
            respond(JoinResult.failed(member_id, ErrorCode.INCONSISTENT_GROUP_PROTOCOL))
        elif group.is_pending_member(member_id):
            self._add_member_and_rebalance(group, req, member_id, respond)
        elif group.is_static_member_fenced(req.group_instance_id, member_id):
            respond(JoinResult.failed(member_id, ErrorCode.FENCED_INSTANCE_ID))
        elif not group.has(member_id) or (
                req.group_instance_id is not None and group.static_member_id(req.group_instance_id) is None):
            respond(JoinResult.failed(member_id, ErrorCode.UNKNOWN_MEMBER_ID))
        else:
            self._rejoin(group, group.members[member_id], req, respond)

    def _rejoin(self, group: ClassicGroup, member: GroupMember, req: JoinRequest, respond) -> None:
        """A member with a known id joins again; what happens depends on the group's state."""
        unchanged = member.matches(req.protocols)
        if group.is_(PREPARING) or (group.is_(COMPLETING) and not unchanged):
            self._update_member_and_rebalance(group, member, req, respond)
        elif group.is_(COMPLETING):
            # The member probably missed its JoinGroup response: send this generation's again.
            respond(join_response(group, member.member_id))
        elif group.is_(STABLE):
            if group.is_leader(member.member_id) or not unchanged:
                # A leader rejoins to make the group rebalance (e.g. its topics' partitions
                # changed, which no member metadata shows).
                self._update_member_and_rebalance(group, member, req, respond)
            else:
                respond(join_response(group, member.member_id, with_members=False))
        else:
            respond(JoinResult.failed(member.member_id, ErrorCode.UNKNOWN_MEMBER_ID))

    def _add_member_and_rebalance(self, group: ClassicGroup, req: JoinRequest, member_id: str, respond) -> None:
        member = GroupMember(member_id, req.group_instance_id, req.client_id, req.client_host,
                             req.rebalance_timeout_ms, req.session_timeout_ms, req.protocol_type,
                             req.protocols, is_new=True)
        if group.is_(PREPARING) and group.generation_id == 0:
            group.new_member_added = True
        group.add(member, respond)
        self.rebalance.cancel_timer("pending", group, member_id)
        # A new member cannot heartbeat before its first JoinGroup response; if its client
        # gives up, the long new-member timeout removes it.
        self.rebalance.schedule_heartbeat(group, member, self.config.new_member_join_timeout_ms)
        self.rebalance.maybe_prepare_rebalance(group, f"new member {member_id} joined")

    def _update_member_and_rebalance(self, group: ClassicGroup, member: GroupMember, req: JoinRequest,
                                     respond) -> None:
        # A second JoinGroup while the first still waits: answer the first, or its connection,
        # whose responses go out in order, would wait forever.
        group.maybe_invoke_join(member, JoinResult.failed(member.member_id, ErrorCode.REBALANCE_IN_PROGRESS))
        group.update_member(member, req.protocols, req.rebalance_timeout_ms, req.session_timeout_ms, respond)
        self.rebalance.maybe_prepare_rebalance(group, f"member {member.member_id} rejoined")

    def _update_static_member_and_rebalance(self, group: ClassicGroup, req: JoinRequest, old_id: str,
                                            new_id: str, respond) -> None:
        """A static member restarted (new member id, same instance id)."""
        previous_leader = group.leader_id or ""
        member = group.replace_static_member(req.group_instance_id, old_id, new_id)
        old = (member.protocols, member.rebalance_timeout_ms, member.session_timeout_ms)
        self.rebalance.cancel_timer("heartbeat", group, old_id)
        self.rebalance.schedule_heartbeat(group, member)
        group.update_member(member, req.protocols, req.rebalance_timeout_ms, req.session_timeout_ms, respond)
        if group.is_(STABLE):
            if group.protocol_name == group.select_protocol():
                # Nothing the assignment depends on changed: no rebalance, only persist the
                # new member id.
                on_written = self._static_rejoin_written(group, member, req, old_id, old, previous_leader)
                current = {m.member_id: m.assignment for m in group.members.values()}
                self.rebalance.store_group(group, current, on_written)
            else:
                self.rebalance.maybe_prepare_rebalance(group, f"static member {new_id} changed its protocols")
        elif group.is_(COMPLETING):
            # The leader may be assigning to the old member id: start over.
            self.rebalance.prepare_rebalance(group, f"static member {new_id} rejoined during the sync phase")

    def _static_rejoin_written(self, group, member, req, old_id, old, previous_leader):
        new_id = member.member_id

        def on_written(error: ErrorCode):
            if error != ErrorCode.NONE:
                # Undo the replacement: the old member id stays valid, the new one never was.
                if self.rebalance.is_live(group) and group.members.get(new_id) is member:
                    respond = member.join_callback
                    group.update_member(member, old[0], old[1], old[2], None)
                    group.replace_static_member(req.group_instance_id, new_id, old_id)
                    self.rebalance.cancel_timer("heartbeat", group, new_id)
                    self.rebalance.schedule_heartbeat(group, member)
                    if respond is not None:
                        respond(JoinResult(group_write_error(error), UNKNOWN_MEMBER_ID, group.generation_id,
                                           group.protocol_type, group.protocol_name, previous_leader))
                return self._result()
            if req.supports_skip_assignment and group.is_leader(new_id):
                result = JoinResult(ErrorCode.NONE, new_id, group.generation_id, group.protocol_type,
                                    group.protocol_name, new_id, True, group.current_member_metadata())
            else:
                # The old leader id keeps a restarted leader from assigning: a stable group
                # would not pass a new assignment on anyway.
                result = JoinResult(ErrorCode.NONE, new_id, group.generation_id, group.protocol_type,
                                    group.protocol_name, previous_leader)
            group.maybe_invoke_join(member, result)
            return self._result()

        return on_written

    # --- Heartbeat ----------------------------------------------------------------------------
    def heartbeat(self, group_id: str, member_id: str, instance_id: str | None, generation_id: int) -> CoordinatorResult:
        return self._result(self._heartbeat(group_id, member_id, instance_id, generation_id))

    def _heartbeat(self, group_id: str, member_id: str, instance_id: str | None, generation_id: int) -> ErrorCode:
        error = self._member_error(group_id, member_id, instance_id, generation_id)
        if error is not None:
            return error
        group = self.groups.get(group_id)
        if group.is_(EMPTY):
            return ErrorCode.UNKNOWN_MEMBER_ID
        self.touch(group, member_id)
        return ErrorCode.REBALANCE_IN_PROGRESS if group.is_(PREPARING) else ErrorCode.NONE

    def _member_error(self, group_id: str, member_id: str, instance_id: str | None,
                      generation_id: int) -> ErrorCode | None:
        """The checks Heartbeat and SyncGroup share: INVALID_GROUP_ID (empty id),
        UNKNOWN_MEMBER_ID (no such group), COORDINATOR_NOT_AVAILABLE (a dead group), then
        ``ClassicGroup.member_error``; None when the request passes them."""
        if not group_id:
            return ErrorCode.INVALID_GROUP_ID
        group = self.groups.get(group_id)
        if group is None:
            return ErrorCode.UNKNOWN_MEMBER_ID
        if group.is_(DEAD):
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        return group.member_error(member_id, instance_id, generation_id)

    # --- SyncGroup --------------------------------------------------------------------------
    def sync_group(self, req: SyncRequest, respond) -> CoordinatorResult:
        """Answer through ``respond(SyncResult)``: now, or once the leader's assignment is stored."""
        error = self._check_sync(req)
        if error is not None:
            respond(SyncResult(error))
            return self._result()
        group = self.groups[req.group_id]
        member = group.members[req.member_id]
        if group.is_(STABLE):
            self.rebalance.synced(group, req.member_id)
            respond(SyncResult(ErrorCode.NONE, group.protocol_type, group.protocol_name, member.assignment))
            self.touch(group, req.member_id)
            return self._result()
        group.maybe_invoke_sync(member, SyncResult(ErrorCode.REBALANCE_IN_PROGRESS))  # a duplicate
        member.sync_callback = respond
        self.rebalance.synced(group, req.member_id)
        if group.is_leader(req.member_id):
            given = {member_id: bytes(data) for member_id, data in req.assignments}
            assignment = {member_id: given.get(member_id, b"") for member_id in group.members}
            self.rebalance.store_group(group, assignment, self._assignment_written(group, assignment))
        return self._result()

    def _check_sync(self, req: SyncRequest) -> ErrorCode | None:
        error = self._member_error(req.group_id, req.member_id, req.group_instance_id, req.generation_id)
        if error is not None:
            return error
        group = self.groups.get(req.group_id)
        if (req.protocol_type is not None and req.protocol_type != group.protocol_type) or (
                req.protocol_name is not None and req.protocol_name != group.protocol_name):
            return ErrorCode.INCONSISTENT_GROUP_PROTOCOL
        if group.is_(EMPTY):
            return ErrorCode.UNKNOWN_MEMBER_ID
        if group.is_(PREPARING):
            return ErrorCode.REBALANCE_IN_PROGRESS
        return None

    def _assignment_written(self, group: ClassicGroup, assignment: dict[str, bytes]):
        generation = group.generation_id

        def on_written(error: ErrorCode):
            if self.rebalance.is_live(group) and group.is_(COMPLETING) and group.generation_id == generation:
                if error != ErrorCode.NONE:
                    self.rebalance.reset_and_propagate_assignment_error(group, group_write_error(error))
                    self.rebalance.maybe_prepare_rebalance(group, f"storing the assignment failed: {error.name}")
                else:
                    for member in group.members.values():
                        member.assignment = assignment.get(member.member_id, b"")
                    self.rebalance.propagate_assignment(group, ErrorCode.NONE)
                    group.transition_to(STABLE, self.clock.milliseconds())
            return self._result()

        return on_written

    # --- LeaveGroup -------------------------------------------------------------------------
    def leave_group(self, group_id: str, leaving: list[LeavingMember]) -> CoordinatorResult:
        """Response: ``(group error, [error per leaving member])``."""
        if not group_id:
            return self._result((ErrorCode.INVALID_GROUP_ID, []))
        group = self.groups.get(group_id)
        if group is None:
            return self._result((ErrorCode.NONE, [ErrorCode.UNKNOWN_MEMBER_ID] * len(leaving)))
        if group.is_(DEAD):
            return self._result((ErrorCode.COORDINATOR_NOT_AVAILABLE, []))
        return self._result((ErrorCode.NONE, [self._leave_one(group, m) for m in leaving]))

    def _leave_one(self, group: ClassicGroup, leaving: LeavingMember) -> ErrorCode:
        member_id = leaving.member_id
        reason = f"left the group ({leaving.reason or 'no reason given'})"
        if member_id == UNKNOWN_MEMBER_ID:
            # Removal of a static member by its instance id alone (admin tools do this).
            current = group.static_member_id(leaving.group_instance_id)
            if current is None:
                return ErrorCode.UNKNOWN_MEMBER_ID
            self.rebalance.remove_member_and_update_group(group, group.members[current], reason)
            return ErrorCode.NONE
        if group.is_pending_member(member_id):
            self.rebalance.forget_pending_member(group, member_id)
            return ErrorCode.NONE
        if group.is_static_member_fenced(leaving.group_instance_id, member_id):
            return ErrorCode.FENCED_INSTANCE_ID
        if group.has(member_id):
            self.rebalance.remove_member_and_update_group(group, group.members[member_id], reason)
            return ErrorCode.NONE
        return ErrorCode.UNKNOWN_MEMBER_ID

    # --- describe and list ------------------------------------------------------------------
    def describe(self, group_id: str) -> GroupDescription:
        group = self.groups.get(group_id)
        if group is None or group.is_(DEAD):
            return GroupDescription(group_id)
        stable = group.is_(STABLE) and group.protocol_name is not None
        members = tuple(
            MemberDescription(m.member_id, m.group_instance_id, m.client_id, m.client_host,
                              m.metadata(group.protocol_name) if stable else b"",
                              m.assignment if stable else b"")
            for m in group.members.values())
        return GroupDescription(group_id, ErrorCode.NONE, group.state.value, group.protocol_type or "",
                                group.protocol_name if stable else "", members)

    def list_groups(self, states: set[GroupState] | None = None, types: set[str] | None = None) -> list[GroupListing]:
        if types and CLASSIC_GROUP_TYPE not in {t.lower() for t in types}:
            return []
        return [GroupListing(g.group_id, g.protocol_type or "", g.state.value)
                for g in self.groups.values()
                if not g.is_(DEAD) and (not states or g.state in states)]

    # --- loading and unloading -----------------------------------------------------------------
    def replay(self, record: GroupMetadataRecord) -> None:
        """Apply a group record read back from the log (a tombstone removes the group)."""
        if record.value is None:
            self.drop(record.group_id)
        else:
            self.rebalance.cancel_timers(record.group_id)
            now = self.clock.milliseconds()
            self.groups[record.group_id] = ClassicGroup.from_record_value(record.group_id, record.value, now)

    def on_loaded(self) -> None:
        """After loading: every loaded member must heartbeat within its session timeout."""
        for group in self.groups.values():
            for member in group.members.values():
                self.rebalance.schedule_heartbeat(group, member)

    def unload(self) -> None:
        """This broker no longer coordinates these groups: answer NOT_COORDINATOR to waiters."""
        for group in list(self.groups.values()):
            for member in group.members.values():
                group.maybe_invoke_join(member, JoinResult.failed(member.member_id, ErrorCode.NOT_COORDINATOR))
                group.maybe_invoke_sync(member, SyncResult(ErrorCode.NOT_COORDINATOR))
            self.drop(group.group_id)
