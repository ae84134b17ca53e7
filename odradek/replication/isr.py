"""The leader's rules for the in-sync replicas (ISR) and the high watermark, as plain functions.

Kafka's ``cluster/Partition.scala`` (``maybeExpandIsr``, ``maybeShrinkIsr``,
``getOutOfSyncReplicas``, ``maybeIncrementLeaderHW``), over values: the ISR, the followers'
``FollowerState``s, offsets and the time. ``replication/partition.py`` applies them.

An ISR change is only a proposal (``IsrChange``): the controller's state (the partition's
state znode, conditionally updated, or AlterPartition) must hold it before the leader uses
it, else a leader could acknowledge records on an ISR that a new controller never saw. While
one is pending no other is made, and the high watermark counts the *maximal* ISR: the
committed ISR plus a replica being added (KIP-497): waiting for more replicas is always
safe, waiting for fewer is not until the change is durable.

- **Expand**: a follower outside the ISR joins once its log end offset reaches the high
  watermark and the offset where the leader's current epoch began: below the latter, it might
  miss records of this epoch that are committed before it could be elected.
- **Shrink**: an ISR follower leaves when it has not been caught up for
  ``replica.lag.time.max.ms`` (30 s by default): stuck (no fetch) or slow (its fetches never
  reach the log end).
- **High watermark**: the least log end offset among the leader and the followers that are in
  the maximal ISR or caught up (those about to join: waiting for them lets a follower of a
  leader-only ISR catch up and join, rather than chase a high watermark that moves with the
  leader's log end offset). It only moves forward.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from odradek.replication.follower_state import FollowerState


@dataclass(frozen=True, slots=True)
class IsrChange:
    """A proposed ISR for the partition at ``leader_epoch``: ``isr``, made of the current one
    with ``added`` added or ``removed`` removed."""

    leader_epoch: int
    isr: tuple[int, ...]
    added: tuple[int, ...] = ()
    removed: tuple[int, ...] = ()


def maximal_isr(isr: tuple[int, ...], pending: IsrChange | None) -> tuple[int, ...]:
    """The ISR the high watermark must wait for: the committed one plus any replica a
    pending change adds (a pending shrink removes nobody yet)."""
    if pending is None or not pending.added:
        return isr
    return isr + tuple(r for r in pending.added if r not in isr)


def can_join_isr(follower: FollowerState, high_watermark: int, leader_epoch_start_offset: int) -> bool:
    """Kafka's ``isFollowerInSync`` for expansion: at or past the high watermark and the start
    of the leader's current epoch."""
    end = follower.log_end_offset
    return end >= high_watermark and leader_epoch_start_offset >= 0 and end >= leader_epoch_start_offset


def expand_isr(leader_epoch: int, isr: tuple[int, ...], pending: IsrChange | None, replica_id: int,
               follower: FollowerState, high_watermark: int, leader_epoch_start_offset: int,
               eligible: bool = True) -> IsrChange | None:
    """The change adding ``replica_id`` to the ISR, or None: one is pending, it is a member
    already, not ``eligible`` (ZooKeeper mode: not a live broker), or not caught up."""
    if pending is not None or replica_id in isr or not eligible:
        return None
    if not can_join_isr(follower, high_watermark, leader_epoch_start_offset):
        return None
    return IsrChange(leader_epoch, isr + (replica_id,), added=(replica_id,))


def out_of_sync_replicas(isr: Iterable[int], leader_id: int, followers: Mapping[int, FollowerState],
                         leader_end_offset: int, now_ms: int, max_lag_ms: int) -> tuple[int, ...]:
    """The ISR followers not caught up within ``max_lag_ms`` (one the leader has no state for
    counts as out of sync)."""
    out = []
    for replica in isr:
        if replica == leader_id:
            continue
        follower = followers.get(replica)
        if follower is None or not follower.is_caught_up(leader_end_offset, now_ms, max_lag_ms):
            out.append(replica)
    return tuple(out)


def shrink_isr(leader_epoch: int, isr: tuple[int, ...], pending: IsrChange | None, leader_id: int,
               followers: Mapping[int, FollowerState], leader_end_offset: int, now_ms: int,
               max_lag_ms: int) -> IsrChange | None:
    """The change removing the out-of-sync followers, or None (none, or one pending)."""
    if pending is not None:
        return None
    out = out_of_sync_replicas(isr, leader_id, followers, leader_end_offset, now_ms, max_lag_ms)
    if not out:
        return None
    return IsrChange(leader_epoch, tuple(r for r in isr if r not in out), removed=out)


def high_watermark_bound(leader_id: int, leader_end_offset: int, followers: Mapping[int, FollowerState],
                         isr: tuple[int, ...], now_ms: int, max_lag_ms: int) -> int:
    """The offset the high watermark may rise to: the least log end offset of the leader
    (``leader_end_offset``) and of the followers in ``isr`` (the maximal ISR) or caught up.
    A follower in the ISR whose offset is not known yet (-1, or no state at all) holds it
    where it is."""
    bound = leader_end_offset
    for replica in isr:
        if replica != leader_id and replica not in followers:
            return -1
    for replica, follower in followers.items():
        end = follower.log_end_offset
        if end < bound and (replica in isr or now_ms - follower.last_caught_up_time_ms <= max_lag_ms):
            bound = end
    return bound
