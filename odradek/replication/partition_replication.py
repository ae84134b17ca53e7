"""``PartitionReplication``: a partition's replication state (a mixin of ``Partition``, kept
apart because it is one concept: Kafka's ``Partition.makeLeader``, ``makeFollower``,
``updateFollowerFetchState``, ``maybeExpandIsr``, ``maybeShrinkIsr`` and
``maybeIncrementLeaderHW``).

Roles come from LeaderAndIsr (``become_leader``, ``become_follower``). As leader the partition
keeps what each follower's fetches told (``followers``, ``replication/follower_state.py``),
proposes ISR changes (``isr.expand_isr``, ``isr.shrink_isr``) as ``pending_isr`` until the
controller's state holds them (``commit_isr``) or they lose (``abandon_isr_change``), and
moves the high watermark, only forward, to the lowest log end offset among the leader, the
maximal ISR and the caught-up followers (``maybe_advance_high_watermark``). The decisions are
pure functions in ``replication/isr.py``; the fields are ``Partition``'s (``partition``).
"""

from __future__ import annotations

from dataclasses import dataclass

from odradek.replication.follower_state import FollowerState
from odradek.replication.isr import IsrChange, expand_isr, high_watermark_bound, maximal_isr, shrink_isr

_NO_FOLLOWER = FollowerState()


@dataclass(frozen=True, slots=True)
class FollowerFetchUpdate:
    """What a follower's fetch changed: whether the high watermark moved (wake acks=all
    produces and fetches waiting on it), and an ISR change to make durable, if any."""

    high_watermark_moved: bool
    isr_change: IsrChange | None


class PartitionReplication:
    """Roles, ISR and high watermark of ``Partition`` (a mixin: its fields are the partition's)."""

    def become_leader(self, broker_id: int, leader_epoch: int, replicas, isr, now_ms: int,
                      zk_version: int | None = None) -> None:
        """Take the leadership ``LeaderAndIsr`` gave (Kafka's ``makeLeader``): a new epoch
        begins at the log end offset (in the log's leader epoch cache too), and the followers'
        states are reset (``FollowerState.reset``). ``zk_version``: see the field (None
        keeps it)."""
        if zk_version is not None:
            self.zk_version = zk_version
        is_new_leader = self.leader_id != broker_id
        leo = self.log_end_offset
        if is_new_leader or leader_epoch != self.leader_epoch or self.leader_epoch_start_offset < 0:
            self.log.assign_leader_epoch(leader_epoch)
            self.leader_epoch_start_offset = leo
        self.leader_id = broker_id
        self.leader_epoch = leader_epoch
        self.replicas = tuple(replicas)
        self.isr = tuple(isr)
        self.pending_isr = None
        old = self.followers
        self.followers = {
            r: old.get(r, _NO_FOLLOWER).reset(now_ms, leo, is_new_leader, r in self.isr)
            for r in self.replicas if r != broker_id
        }
        self.maybe_advance_high_watermark(now_ms)

    def become_follower(self, leader_id: int, leader_epoch: int, replicas, isr,
                        zk_version: int | None = None) -> bool:
        """Follow ``leader_id`` (-1: no leader yet) at ``leader_epoch``, as ``LeaderAndIsr``
        said (Kafka's ``makeFollower``). The high watermark is kept (the fetcher moves it:
        min(leader's HW, own log end offset)); the log's leader epoch cache is not touched
        (a follower learns epochs from the leader's batches). What only a leader keeps goes:
        the followers' fetch states, a pending ISR change, the epoch's start offset; so
        ``is_leader`` is False from here on and produces are refused. ``isr`` is kept as
        the controller stated it, for information only: a follower never acts on it.
        ``zk_version``: see the field (None keeps it). Returns whether the leader or the
        epoch changed."""
        changed = self.leader_id != leader_id or self.leader_epoch != leader_epoch
        self.leader_id = leader_id
        self.leader_epoch = leader_epoch
        self.replicas = tuple(replicas)
        self.isr = tuple(isr)
        if zk_version is not None:
            self.zk_version = zk_version
        self.followers = {}
        self.pending_isr = None
        self.leader_epoch_start_offset = -1
        return changed

    def update_follower_fetch_state(self, replica_id: int, fetch_offset: int, log_start_offset: int,
                                    now_ms: int) -> FollowerFetchUpdate | None:
        """A Fetch from follower ``replica_id`` at ``fetch_offset`` arrived at ``now_ms``
        (Kafka's ``updateFollowerFetchState``): record it, then see whether the follower may
        join the ISR and whether the high watermark moves. None when ``replica_id`` is not a
        replica of this partition."""
        follower = self.followers.get(replica_id)
        if follower is None:
            return None
        before = follower.log_end_offset
        self.followers[replica_id] = follower.after_fetch(fetch_offset, log_start_offset, now_ms,
                                                          self.log_end_offset)
        change = self.maybe_expand_isr(replica_id)
        moved = before != fetch_offset and self.maybe_advance_high_watermark(now_ms)
        return FollowerFetchUpdate(moved, change)

    def maybe_expand_isr(self, replica_id: int, eligible: bool = True) -> IsrChange | None:
        """The ISR with ``replica_id`` added, when it caught up (``isr.expand_isr``); it becomes
        ``pending_isr``: make it durable, then ``commit_isr``."""
        follower = self.followers.get(replica_id)
        if follower is None:
            return None
        change = expand_isr(self.leader_epoch, self.isr, self.pending_isr, replica_id, follower,
                            self.high_watermark, self.leader_epoch_start_offset, eligible)
        if change is not None:
            self.pending_isr = change
        return change

    def maybe_shrink_isr(self, now_ms: int) -> IsrChange | None:
        """The ISR without the followers that lag by more than ``replica.lag.time.max.ms``
        (``isr.shrink_isr``), as ``pending_isr``: make it durable, then ``commit_isr``."""
        change = shrink_isr(self.leader_epoch, self.isr, self.pending_isr, self.leader_id, self.followers,
                            self.log_end_offset, now_ms, self.replica_lag_time_max_ms)
        if change is not None:
            self.pending_isr = change
        return change

    def commit_isr(self, isr, now_ms: int | None = None) -> bool:
        """The controller's state now holds ``isr`` (the pending change, or what the controller
        answered instead): use it. Returns whether the high watermark moved."""
        self.isr = tuple(isr)
        self.pending_isr = None
        return self.maybe_advance_high_watermark(now_ms)

    def abandon_isr_change(self) -> None:
        """The pending change could not be made durable (a newer controller or leader epoch
        won): forget it; the next check may propose again."""
        self.pending_isr = None

    def maybe_advance_high_watermark(self, now_ms: int | None = None) -> bool:
        """HW = the lowest log end offset among the leader, the maximal ISR and the followers
        that are caught up (``isr.high_watermark_bound``); it only moves forward. Returns True
        when it moved. Without followers (one replica) this is the log end offset."""
        bound = self.log_end_offset
        if self.followers or len(self.isr) > 1:
            if now_ms is None:
                now_ms = self.clock.milliseconds() if self.clock is not None else 0
            bound = high_watermark_bound(self.leader_id, bound, self.followers,
                                         maximal_isr(self.isr, self.pending_isr), now_ms,
                                         self.replica_lag_time_max_ms)
        if bound > self.high_watermark:
            self.high_watermark = bound
            self.producer_state.on_high_watermark(bound)  # the LSO the cleaner reads moves too
            return True
        return False
