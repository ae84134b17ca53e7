"""The member timers of the KIP-848 consumer groups (``MemberTimers``, mixed into
``ConsumerGroupManager``, consumer_group_manager.py; Kafka's
``GroupMetadataManager.scheduleConsumerGroupSessionTimeout`` and
``scheduleConsumerGroupRebalanceTimeout``).

Two timers per member in the shard's ``TimerQueue``, keyed ``consumer-session:<group>:<member>``
and ``consumer-rebalance:<group>:<member>`` (``timer_key``):

- session: a member that does not heartbeat within its session timeout (the group's
  ``consumer.session.timeout.ms``, else ``group.consumer.session.timeout.ms``; a classic
  member's own JoinGroup timeout) is fenced;
- rebalance: a member in UNREVOKED_PARTITIONS that has not revoked within its rebalance
  timeout is fenced, unless its epoch or state moved on meanwhile.

Fencing is the manager's ``fence_writes`` (records, written by the runtime when the timer
fires). The mixin uses the manager's ``groups``, ``timer``, ``clock``, ``config`` and
``group_config``.
"""

from __future__ import annotations

import logging

from odradek.coordinator.group.consumer.consumer_group_member import ConsumerGroupMember, MemberState
from odradek.coordinator.group.coordinator_result import CoordinatorResult

log = logging.getLogger("odradek.coordinator.group")


def timer_key(kind: str, group_id: str, member_id: str) -> str:
    """``<kind>:<group>:<member>``; ``kind`` is ``consumer-session`` or ``consumer-rebalance``."""
    return f"{kind}:{group_id}:{member_id}"


class MemberTimers:
    """Session and rebalance timeouts of the members (see the module's docstring)."""

    def _fence_if(self, group_id: str, member_id: str, why: str, epoch: int | None = None):
        def fire():
            group = self.groups.get(group_id)
            member = group.member(member_id) if group is not None else None
            if member is None or (epoch is not None and (member.member_epoch != epoch
                                                         or member.state != MemberState.UNREVOKED_PARTITIONS)):
                return None
            log.info("[GroupId %s] member %s fenced: %s", group_id, member_id, why)
            return CoordinatorResult(None, self.fence_writes(group, member))

        return fire

    def session_timeout_ms(self, group_id: str) -> int:
        return int(self.group_config(group_id).get("consumer.session.timeout.ms",
                                                   self.config.consumer_session_timeout_ms))

    def heartbeat_interval_ms(self, group_id: str) -> int:
        return int(self.group_config(group_id).get("consumer.heartbeat.interval.ms",
                                                   self.config.consumer_heartbeat_interval_ms))

    def _schedule_session_timeout(self, group_id: str, member_id: str) -> None:
        self.schedule_session_timeout(group_id, member_id)

    def schedule_session_timeout(self, group_id: str, member_id: str, timeout_ms: int | None = None) -> None:
        """``timeout_ms``: a classic member's JoinGroup session timeout (default:
        the group's ``consumer.session.timeout.ms``, else ``group.consumer.session.timeout.ms``)."""
        timeout = self.session_timeout_ms(group_id) if timeout_ms is None else timeout_ms
        deadline = self.clock.milliseconds() + timeout
        self.timer.schedule(timer_key("consumer-session", group_id, member_id), deadline,
                            self._fence_if(group_id, member_id, "session timed out"))

    def _schedule_rebalance_timeout(self, group_id: str, member: ConsumerGroupMember) -> None:
        key = timer_key("consumer-rebalance", group_id, member.member_id)
        if member.state != MemberState.UNREVOKED_PARTITIONS:
            self.timer.cancel(key)
        elif key not in self.timer:
            deadline = self.clock.milliseconds() + max(member.rebalance_timeout_ms, 0)
            self.timer.schedule(key, deadline, self._fence_if(group_id, member.member_id,
                                                              "partitions not revoked within the rebalance timeout",
                                                              member.member_epoch))

    def _cancel_timers(self, group_id: str, member_id: str) -> None:
        self.timer.cancel(timer_key("consumer-session", group_id, member_id))
        self.timer.cancel(timer_key("consumer-rebalance", group_id, member_id))
