"""``FollowerState``: what a partition's leader knows of one follower (Kafka's ``ReplicaState``).

The leader learns it only from the follower's Fetch requests: the fetch offset is the
follower's log end offset (everything below it is in the follower's log), and the time of
the request tells how far behind the follower is. ``last_caught_up_time_ms`` is the latest
time ``t`` at which the follower had everything the leader had at ``t``; the ISR rules
(``isr``) compare it with ``replica.lag.time.max.ms``.

Why two fetches are needed to say "caught up": a follower that fetches from offset 100 when
the leader's log ends at 100 is caught up at that moment. One that fetches from 100 while
the leader is at 105 (a produce arrived meanwhile) is not, but if the leader was at 100 when
the previous fetch came (``last_fetch_leader_log_end_offset``), the follower was caught up at
that previous fetch's time. Without this rule, a follower of a partition with a steady stream
of small produces would never look caught up and would leave the ISR (Kafka's
``Replica.updateFetchStateOrThrow``).

Immutable: each fetch replaces the value, so readers (the high watermark, the ISR checks)
never see half an update.
"""

from __future__ import annotations

from dataclasses import dataclass

# A log end offset not known yet (Kafka's UNKNOWN_OFFSET_METADATA): a new leader knows its
# followers' offsets only from their first fetch.
UNKNOWN_OFFSET = -1


@dataclass(frozen=True, slots=True)
class FollowerState:
    log_start_offset: int = UNKNOWN_OFFSET
    log_end_offset: int = UNKNOWN_OFFSET
    # The leader's log end offset when the previous fetch arrived.
    last_fetch_leader_log_end_offset: int = 0
    last_fetch_time_ms: int = 0
    last_caught_up_time_ms: int = 0

    def is_caught_up(self, leader_end_offset: int, now_ms: int, max_lag_ms: int) -> bool:
        """Caught up: at the leader's log end offset, or caught up within ``max_lag_ms``
        (``replica.lag.time.max.ms``)."""
        return leader_end_offset == self.log_end_offset or now_ms - self.last_caught_up_time_ms <= max_lag_ms

    def after_fetch(self, fetch_offset: int, log_start_offset: int, fetch_time_ms: int,
                    leader_end_offset: int) -> FollowerState:
        """The state after a Fetch from ``fetch_offset`` at ``fetch_time_ms``, when the leader's
        log ends at ``leader_end_offset`` (Kafka's ``updateFetchStateOrThrow``)."""
        caught_up = self.last_caught_up_time_ms
        if fetch_offset >= leader_end_offset:
            caught_up = max(caught_up, fetch_time_ms)
        elif fetch_offset >= self.last_fetch_leader_log_end_offset:
            caught_up = max(caught_up, self.last_fetch_time_ms)
        return FollowerState(
            log_start_offset=log_start_offset,
            log_end_offset=fetch_offset,
            last_fetch_leader_log_end_offset=max(leader_end_offset, self.last_fetch_leader_log_end_offset),
            last_fetch_time_ms=fetch_time_ms,
            last_caught_up_time_ms=caught_up,
        )

    def reset(self, now_ms: int, leader_end_offset: int, is_new_leader: bool, in_sync: bool) -> FollowerState:
        """The state when this broker becomes (or stays) leader, for a follower that is
        ``in_sync`` (in the ISR) or not (Kafka's ``resetReplicaState``). An ISR member counts as
        caught up now; one outside counts as never caught up, so that it does not hold back the
        high watermark. A new leader forgets the follower's offsets (it learns them from the
        next fetch); a re-elected one keeps them."""
        caught_up = now_ms if in_sync else 0
        if is_new_leader:
            return FollowerState(last_fetch_leader_log_end_offset=UNKNOWN_OFFSET, last_caught_up_time_ms=caught_up)
        return FollowerState(
            log_start_offset=self.log_start_offset,
            log_end_offset=self.log_end_offset,
            last_fetch_leader_log_end_offset=leader_end_offset,
            last_fetch_time_ms=now_ms if in_sync else 0,
            last_caught_up_time_ms=caught_up,
        )
