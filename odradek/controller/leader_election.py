"""Leader election: Kafka's ``Election`` and ``PartitionLeaderElectionAlgorithms``
(``core/src/main/scala/kafka/controller/Election.scala`` and ``PartitionStateMachine.scala``).

Each strategy takes a partition's current leader and ISR (a `layout.PartitionState` read at
``zk_version``) and returns an `ElectionResult` whose ``leader_and_isr`` is the new state, or
None when no replica may lead. The new state has:

* ``leader_epoch`` one more than the current one: one leader per leader epoch, and epochs
  strictly increase;
* a leader that is in the new ISR;
* ``controller_epoch`` of the electing controller;
* ``zk_version`` unchanged: it is the version the conditional write of the state znode must
  expect (the state machine turns it into a `commands.SetZnode`).

Strategies, over the assignment order (the preferred replica first):

=================  =========================================================================
offline            first live replica that is in the ISR; ISR: its live members. With
                   ``unclean.leader.election.enable``, when no ISR member is live: first live
                   replica, ISR just it (``unclean`` is set: records may be lost).
reassign           first live replica of the reassignment's target that is in the ISR.
preferred          the first replica of the assignment, if live and in the ISR.
controlled         first live ISR member not shutting down; the ISR loses the brokers
shutdown           shutting down.
=================  =========================================================================

Worked example: replicas [1000, 1004, 1001], ISR [1000, 1004], leader 1000 at epoch 3;
1000 dies. Offline election picks 1004 (1001 is live but not in the ISR) with ISR [1004]
at epoch 4. If 1004 is dead too, a clean election finds no leader; an unclean one picks 1001,
ISR [1001], epoch 4.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, replace

from odradek.controller.commands import TopicPartition
from odradek.controller.controller_context import ControllerContext
from odradek.metadata.layout import NO_LEADER, PartitionState


class ElectionStrategy(enum.Enum):
    """Kafka's ``PartitionLeaderElectionStrategy`` (offline's ``allowUnclean`` comes from the
    topic's config, or `OFFLINE_UNCLEAN` to force it, as an admin-requested unclean election)."""

    OFFLINE = "offline"
    OFFLINE_UNCLEAN = "offline_unclean"
    REASSIGN = "reassign"
    PREFERRED = "preferred"
    CONTROLLED_SHUTDOWN = "controlled_shutdown"


@dataclass(frozen=True, slots=True)
class ElectionResult:
    """The outcome for one partition: the new state (None: no leader could be chosen), the
    brokers to send it to, and whether an out-of-sync replica was chosen."""

    partition: TopicPartition
    leader_and_isr: PartitionState | None
    recipients: tuple[int, ...]
    unclean: bool = False


def new_leader_and_isr(
    current: PartitionState, leader: int, isr: tuple[int, ...], controller_epoch: int
) -> PartitionState:
    """``current`` with a new leader and ISR at the next leader epoch (Kafka's
    ``LeaderAndIsr.newLeaderAndIsr``); ``zk_version`` stays the read version."""
    if leader != NO_LEADER and leader not in isr:
        raise ValueError(f"leader {leader} is not in the ISR {isr}")
    return replace(
        current,
        leader=leader,
        isr=tuple(isr),
        leader_epoch=current.leader_epoch + 1,
        controller_epoch=controller_epoch,
    )


def offline_leader(
    assignment: tuple[int, ...], isr: tuple[int, ...], live: set[int], unclean: bool
) -> tuple[int | None, bool]:
    """Kafka's ``offlinePartitionLeaderElection``: ``(leader or None, was it unclean)``."""
    for replica in assignment:
        if replica in live and replica in isr:
            return replica, False
    if unclean:
        for replica in assignment:
            if replica in live:
                return replica, True
    return None, False


def reassign_leader(target: tuple[int, ...], isr: tuple[int, ...], live: set[int]) -> int | None:
    """Kafka's ``reassignPartitionLeaderElection``."""
    return next((r for r in target if r in live and r in isr), None)


def preferred_leader(
    assignment: tuple[int, ...], isr: tuple[int, ...], live: set[int]
) -> int | None:
    """Kafka's ``preferredReplicaPartitionLeaderElection``: the first replica or nobody."""
    if assignment and assignment[0] in live and assignment[0] in isr:
        return assignment[0]
    return None


def controlled_shutdown_leader(
    assignment: tuple[int, ...], isr: tuple[int, ...], live: set[int], shutting_down: set[int]
) -> int | None:
    """Kafka's ``controlledShutdownPartitionLeaderElection``."""
    return next(
        (r for r in assignment if r in live and r in isr and r not in shutting_down), None
    )


def elect_offline(
    ctx: ControllerContext, tp: TopicPartition, current: PartitionState, allow_unclean: bool
) -> ElectionResult:
    assignment = ctx.replicas(tp)
    live = [r for r in assignment if ctx.is_replica_online(r, tp=tp)]
    unclean_ok = allow_unclean or ctx.unclean_enabled(tp[0])
    leader, unclean = offline_leader(assignment, current.isr, set(live), unclean_ok)
    if leader is None:
        return ElectionResult(tp, None, tuple(live))
    if leader in current.isr:
        isr = tuple(r for r in current.isr if ctx.is_replica_online(r, tp=tp))
    else:
        isr = (leader,)
    return ElectionResult(
        tp, new_leader_and_isr(current, leader, isr, ctx.epoch), tuple(live), unclean
    )


def elect_reassign(
    ctx: ControllerContext, tp: TopicPartition, current: PartitionState
) -> ElectionResult:
    target = ctx.assignments[tp].target_replicas
    live = {r for r in target if ctx.is_replica_online(r, tp=tp)}
    leader = reassign_leader(target, current.isr, live)
    if leader is None:
        return ElectionResult(tp, None, target)
    return ElectionResult(tp, new_leader_and_isr(current, leader, current.isr, ctx.epoch), target)


def elect_preferred(
    ctx: ControllerContext, tp: TopicPartition, current: PartitionState
) -> ElectionResult:
    assignment = ctx.replicas(tp)
    live = {r for r in assignment if ctx.is_replica_online(r, tp=tp)}
    leader = preferred_leader(assignment, current.isr, live)
    if leader is None:
        return ElectionResult(tp, None, assignment)
    return ElectionResult(
        tp, new_leader_and_isr(current, leader, current.isr, ctx.epoch), assignment
    )


def elect_controlled_shutdown(
    ctx: ControllerContext, tp: TopicPartition, current: PartitionState
) -> ElectionResult:
    assignment = ctx.replicas(tp)
    live = tuple(r for r in assignment if ctx.is_replica_online(r, include_shutting_down=True, tp=tp))
    leader = controlled_shutdown_leader(assignment, current.isr, set(live), ctx.shutting_down)
    if leader is None:
        return ElectionResult(tp, None, live)
    isr = tuple(r for r in current.isr if r not in ctx.shutting_down)
    return ElectionResult(tp, new_leader_and_isr(current, leader, isr, ctx.epoch), live)


def elect(
    ctx: ControllerContext, tp: TopicPartition, current: PartitionState, strategy: ElectionStrategy
) -> ElectionResult:
    """Run ``strategy`` for one partition whose current state is ``current``."""
    if strategy is ElectionStrategy.OFFLINE:
        return elect_offline(ctx, tp, current, False)
    if strategy is ElectionStrategy.OFFLINE_UNCLEAN:
        return elect_offline(ctx, tp, current, True)
    if strategy is ElectionStrategy.REASSIGN:
        return elect_reassign(ctx, tp, current)
    if strategy is ElectionStrategy.PREFERRED:
        return elect_preferred(ctx, tp, current)
    return elect_controlled_shutdown(ctx, tp, current)


def initial_leader_and_isr(
    ctx: ControllerContext, tp: TopicPartition
) -> PartitionState | None:
    """A new partition's first state (Kafka's ``initializeLeaderAndIsrForPartitions``): the
    first live replica leads, all live replicas are the ISR, leader epoch 0; None if no
    replica is live. ``zk_version`` -1: the state znode is created, not set."""
    live = tuple(r for r in ctx.replicas(tp) if ctx.is_replica_online(r, tp=tp))
    if not live:
        return None
    return PartitionState(live[0], 0, live, ctx.epoch, -1)
