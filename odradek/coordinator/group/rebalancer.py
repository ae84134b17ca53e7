"""``Rebalancer``: the timed half of Kafka's classic group protocol, for the groups of a shard.

The group metadata manager answers requests; this class runs what happens between them:

- a **join phase**: PreparingRebalance lasts until every known member has rejoined (then it
  ends at once) or the rebalance timeout (the largest of the members') runs out. For an empty
  group the first join phase instead waits ``group.initial.rebalance.delay.ms``, again and
  again while new members keep arriving, at most the rebalance timeout in all. At its end,
  dynamic members that did not rejoin are removed and a generation starts: every waiting
  JoinGroup is answered (the leader with every member's metadata);
- a **sync phase**: members that got their JoinGroup response but send no SyncGroup within
  the rebalance timeout are removed and the group rebalances again;
- **sessions**: a member that sends nothing for its session timeout is removed (members
  waiting in a JoinGroup or SyncGroup are exempt: they cannot heartbeat; brand-new members
  are not, after Kafka's 5-minute new-member timeout); a member told its id
  (MEMBER_ID_REQUIRED) that does not join with it within the session timeout is forgotten.

Timers are named entries in the shard's ``TimerQueue`` (``kind\\0group\\0member``); each timer
function checks that its group is still the live one (a group deleted and recreated under the
same id is another group) and returns the writes it caused. Writes (GroupMetadata records,
``replay=False``: the membership is already in memory) are buffered here until the manager's
operation, or the timer, hands them out in its ``CoordinatorResult``.
"""

from __future__ import annotations

import logging

from odradek.coordinator.group.classic_group import ClassicGroup
from odradek.coordinator.group.coordinator_record import GroupMetadataRecord
from odradek.coordinator.group.coordinator_result import CoordinatorResult, Write
from odradek.coordinator.group.group_config import GroupConfig
from odradek.coordinator.group.group_requests import UNKNOWN_MEMBER_ID
from odradek.coordinator.group.group_results import JoinResult, SyncResult
from odradek.coordinator.group.group_state import GroupState
from odradek.coordinator.group.member import GroupMember
from odradek.coordinator.group.timer_queue import TimerQueue
from odradek.protocol.generated.error_codes import ErrorCode

log = logging.getLogger("odradek.coordinator.group")

EMPTY, PREPARING, COMPLETING, STABLE, DEAD = (
    GroupState.EMPTY, GroupState.PREPARING_REBALANCE, GroupState.COMPLETING_REBALANCE,
    GroupState.STABLE, GroupState.DEAD,
)
TIMER_KINDS = ("heartbeat", "pending", "join", "sync")


def timer_key(kind: str, group_id: str, member_id: str = "") -> str:
    return f"{kind}\0{group_id}\0{member_id}"


def join_response(group: ClassicGroup, member_id: str, with_members: bool = True) -> JoinResult:
    """This generation's JoinGroup answer for ``member_id`` (the member list for the leader)."""
    members = group.current_member_metadata() if with_members and group.is_leader(member_id) else ()
    return JoinResult(ErrorCode.NONE, member_id, group.generation_id, group.protocol_type,
                      group.protocol_name, group.leader_id or "", False, members)


class Rebalancer:
    def __init__(self, config: GroupConfig, clock, timer: TimerQueue, groups: dict[str, ClassicGroup]) -> None:
        self.config = config
        self.clock = clock
        self.timer = timer
        self.groups = groups  # the manager's: timers act only on groups still in it
        self._writes: list[Write] = []
        self._initial_delay: set[str] = set()  # groups whose join timer is the initial delay

    def now(self) -> int:
        return self.clock.milliseconds()

    def is_live(self, group: ClassicGroup) -> bool:
        return self.groups.get(group.group_id) is group

    # --- writes -----------------------------------------------------------------------------
    def store_group(self, group: ClassicGroup, assignment: dict[str, bytes], on_written=None) -> None:
        record = GroupMetadataRecord(group.group_id, group.to_record_value(assignment))
        self._writes.append(Write([record], replay=False, on_written=on_written))

    def result(self, response=None) -> CoordinatorResult:
        """``response`` with every write buffered since the last call."""
        writes, self._writes = self._writes, []
        return CoordinatorResult(response, writes)

    def cancel_timer(self, kind: str, group: ClassicGroup, member_id: str = "") -> None:
        self.timer.cancel(timer_key(kind, group.group_id, member_id))

    def cancel_timers(self, group_id: str) -> None:
        for kind in TIMER_KINDS:
            self.timer.cancel_prefix(timer_key(kind, group_id))
        self._initial_delay.discard(group_id)

    # --- the join phase -------------------------------------------------------------------------
    def maybe_prepare_rebalance(self, group: ClassicGroup, reason: str) -> None:
        if group.can_rebalance():
            self.prepare_rebalance(group, reason)

    def prepare_rebalance(self, group: ClassicGroup, reason: str) -> None:
        if group.is_(COMPLETING):
            self.reset_and_propagate_assignment_error(group, ErrorCode.REBALANCE_IN_PROGRESS)
        self.timer.cancel(timer_key("sync", group.group_id))
        was_empty = group.is_(EMPTY)
        group.transition_to(PREPARING, self.now())
        log.info("group %s preparing to rebalance (generation %d): %s", group.group_id, group.generation_id, reason)
        if was_empty:
            delay = self.config.initial_rebalance_delay_ms
            self._schedule_initial_join(group, delay, max(group.rebalance_timeout_ms() - delay, 0))
        else:
            self._schedule_join(group)
            self.try_complete_join(group)

    def _schedule_join(self, group: ClassicGroup) -> None:
        self._initial_delay.discard(group.group_id)
        self.timer.schedule(timer_key("join", group.group_id), self.now() + group.rebalance_timeout_ms(),
                            lambda: self._on_join_timer(group))

    def _schedule_initial_join(self, group: ClassicGroup, delay_ms: int, remaining_ms: int) -> None:
        self._initial_delay.add(group.group_id)
        self.timer.schedule(timer_key("join", group.group_id), self.now() + delay_ms,
                            lambda: self._on_initial_join_timer(group, delay_ms, remaining_ms))

    def _on_initial_join_timer(self, group: ClassicGroup, delay_ms: int, remaining_ms: int) -> CoordinatorResult:
        if self.is_live(group) and group.is_(PREPARING):
            if group.new_member_added and remaining_ms != 0:
                group.new_member_added = False
                delay = min(self.config.initial_rebalance_delay_ms, remaining_ms)
                self._schedule_initial_join(group, delay, max(remaining_ms - delay_ms, 0))
            else:
                self._complete_join(group)
        return self.result()

    def _on_join_timer(self, group: ClassicGroup) -> CoordinatorResult:
        if self.is_live(group) and group.is_(PREPARING):
            self._complete_join(group)
        return self.result()

    def try_complete_join(self, group: ClassicGroup) -> None:
        """End the join phase now if every member is back (never during the initial delay)."""
        if (group.group_id not in self._initial_delay and group.is_(PREPARING)
                and group.has_all_members_joined()):
            self._complete_join(group)

    def _complete_join(self, group: ClassicGroup) -> None:
        self.timer.cancel(timer_key("join", group.group_id))
        self._initial_delay.discard(group.group_id)
        for member in group.not_yet_rejoined():
            if not member.is_static:
                self.remove_member(group, member)
        if not group.maybe_elect_new_joined_leader() and group.members:
            # Nobody rejoined: wait another rebalance timeout, while sessions expire.
            self._schedule_join(group)
            return
        group.init_next_generation(self.now())
        if group.is_(EMPTY):
            log.info("group %s is empty at generation %d", group.group_id, group.generation_id)
            self.store_group(group, {})
            return
        log.info("group %s generation %d: %d members, protocol %s, leader %s", group.group_id,
                 group.generation_id, len(group.members), group.protocol_name, group.leader_id)
        for member in list(group.members.values()):
            group.maybe_invoke_join(member, join_response(group, member.member_id))
            self.schedule_heartbeat(group, member)
            member.is_new = False
            group.pending_sync_members.add(member.member_id)
        generation = group.generation_id
        self.timer.schedule(timer_key("sync", group.group_id), self.now() + group.rebalance_timeout_ms(),
                            lambda: self._on_sync_timer(group, generation))

    # --- the sync phase -------------------------------------------------------------------------
    def synced(self, group: ClassicGroup, member_id: str) -> None:
        group.pending_sync_members.discard(member_id)
        if not group.pending_sync_members:
            self.timer.cancel(timer_key("sync", group.group_id))

    def _on_sync_timer(self, group: ClassicGroup, generation: int) -> CoordinatorResult:
        current = self.is_live(group) and group.generation_id == generation
        if current and group.state in (COMPLETING, STABLE) and group.pending_sync_members:
            missing = sorted(group.pending_sync_members)
            for member_id in missing:
                self.remove_member(group, group.members[member_id])
            self.prepare_rebalance(group, f"members {missing} sent no SyncGroup")
        return self.result()

    def reset_and_propagate_assignment_error(self, group: ClassicGroup, error: ErrorCode) -> None:
        for member in group.members.values():
            member.assignment = b""
        self.propagate_assignment(group, error)

    def propagate_assignment(self, group: ClassicGroup, error: ErrorCode) -> None:
        for member in group.members.values():
            if member.awaiting_sync:
                group.maybe_invoke_sync(member, SyncResult(error, group.protocol_type, group.protocol_name,
                                                           member.assignment))
                # Its session may have lapsed unnoticed while it waited: start it afresh.
                self.schedule_heartbeat(group, member)

    # --- members ----------------------------------------------------------------------------
    def remove_member(self, group: ClassicGroup, member: GroupMember) -> None:
        """Take a member out, answering whatever it still has waiting."""
        group.maybe_invoke_join(member, JoinResult.failed(UNKNOWN_MEMBER_ID, ErrorCode.UNKNOWN_MEMBER_ID))
        group.maybe_invoke_sync(member, SyncResult(ErrorCode.UNKNOWN_MEMBER_ID))
        group.remove(member.member_id)
        self.timer.cancel(timer_key("heartbeat", group.group_id, member.member_id))

    def remove_member_and_update_group(self, group: ClassicGroup, member: GroupMember, reason: str) -> None:
        self.remove_member(group, member)
        log.info("group %s: removed member %s: %s", group.group_id, member.member_id, reason)
        if group.state in (STABLE, COMPLETING):
            self.maybe_prepare_rebalance(group, reason)
        elif group.is_(PREPARING):
            self.try_complete_join(group)

    # --- sessions ---------------------------------------------------------------------------
    def schedule_heartbeat(self, group: ClassicGroup, member: GroupMember, timeout_ms: int | None = None) -> None:
        timeout = member.session_timeout_ms if timeout_ms is None else timeout_ms
        member_id = member.member_id
        self.timer.schedule(timer_key("heartbeat", group.group_id, member_id), self.now() + timeout,
                            lambda: self._on_session_expired(group, member_id))

    def touch(self, group: ClassicGroup, member_id: str) -> None:
        """A sign of life from a member (a heartbeat, or a commit): its session restarts."""
        member = group.members.get(member_id)
        if member is not None:
            self.schedule_heartbeat(group, member)

    def _on_session_expired(self, group: ClassicGroup, member_id: str) -> CoordinatorResult:
        member = group.members.get(member_id)
        # Members waiting in a JoinGroup or SyncGroup are alive (they cannot heartbeat
        # meanwhile), unless they are new and their long join timeout ran out.
        waiting = member is not None and (member.awaiting_join or member.awaiting_sync)
        if self.is_live(group) and member is not None and not group.is_(DEAD) and (member.is_new or not waiting):
            self.remove_member_and_update_group(group, member, "session timeout expired")
        return self.result()

    def expect_pending_member(self, group: ClassicGroup, member_id: str, timeout_ms: int) -> None:
        group.pending_join_members.add(member_id)
        self.timer.schedule(timer_key("pending", group.group_id, member_id), self.now() + timeout_ms,
                            lambda: self._on_pending_member_expired(group, member_id))

    def forget_pending_member(self, group: ClassicGroup, member_id: str) -> None:
        group.remove(member_id)
        self.timer.cancel(timer_key("pending", group.group_id, member_id))
        self.try_complete_join(group)

    def _on_pending_member_expired(self, group: ClassicGroup, member_id: str) -> CoordinatorResult:
        if self.is_live(group) and group.is_pending_member(member_id):
            self.forget_pending_member(group, member_id)
        return self.result()
