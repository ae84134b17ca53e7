"""Which leaderships the auto leader rebalance moves back (Kafka's
``checkAndTriggerAutoLeaderRebalance``, run every ``leader.imbalance.check.interval.seconds``
when ``auto.leader.rebalance.enable``)."""

from __future__ import annotations

from collections import defaultdict

from odradek.controller.commands import TopicPartition
from odradek.controller.controller_context import ControllerContext


def imbalanced_partitions(ctx: ControllerContext, percentage: int) -> list[TopicPartition]:
    """Partitions not led by their preferred replica (the first of the assignment), for every
    live broker, not shutting down, whose share of such partitions among those it prefers
    exceeds ``leader.imbalance.per.broker.percentage``; none while reassignments or deletions
    are in progress (Kafka waits for those too). Whether the preferred replica may lead (in
    the ISR) is the election's business (`Controller.on_preferred_replica_election`)."""
    if ctx.topics_to_delete or ctx.partitions_being_reassigned():
        return []
    preferred_of: dict[int, list[TopicPartition]] = defaultdict(list)
    for tp in ctx.all_partitions():
        replicas = ctx.replicas(tp)
        if replicas and tp in ctx.leadership:
            preferred_of[replicas[0]].append(tp)
    out: list[TopicPartition] = []
    for broker, partitions in sorted(preferred_of.items()):
        if broker not in ctx.live_brokers or broker in ctx.shutting_down:
            continue
        off = [tp for tp in partitions if ctx.leadership[tp].leader != broker]
        if off and len(off) * 100 > percentage * len(partitions):
            out += off
    return sorted(out)
