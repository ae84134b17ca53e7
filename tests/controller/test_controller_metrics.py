"""The counts behind Kafka's controller gauges, from a controller context."""

from __future__ import annotations

from odradek.controller.commands import LiveBroker
from odradek.controller.controller_context import ControllerContext, ReplicaAssignment, ReplicaStateName
from odradek.controller.controller_metrics import ControllerMetrics, controller_metrics
from odradek.metadata.layout import PartitionState


def context() -> ControllerContext:
    ctx = ControllerContext(controller_id=1, epoch=1)
    ctx.live_brokers = {b: LiveBroker(b, b) for b in (1, 2, 3)}
    ctx.assignments = {
        ("a", 0): ReplicaAssignment((1, 2)),  # led by its preferred replica
        ("a", 1): ReplicaAssignment((2, 1)),  # led by 1: imbalanced
        ("a", 2): ReplicaAssignment((3, 1)),  # no leadership state yet
        # reassignments adding the preferred replica 3: imbalanced only once 3 is in the ISR
        ("r", 0): ReplicaAssignment((3, 1, 2), adding=(3,), removing=(2,)),
        ("r", 1): ReplicaAssignment((3, 1, 2), adding=(3,), removing=(2,)),
        ("gone", 0): ReplicaAssignment((1, 2, 3)),  # queued for deletion: never imbalanced
        ("gone", 1): ReplicaAssignment((2, 3)),
    }
    ctx.leadership = {
        ("a", 0): PartitionState(1, 0, (1, 2), 1),
        ("a", 1): PartitionState(1, 0, (1, 2), 1),
        ("r", 0): PartitionState(1, 0, (1, 2), 1),
        ("r", 1): PartitionState(1, 0, (1, 2, 3), 1),
        ("gone", 0): PartitionState(2, 0, (2,), 1),
        ("gone", 1): PartitionState(3, 0, (3,), 1),
    }
    ctx.topics_to_delete = {"gone"}
    ctx.topics_ineligible_for_deletion = {"gone"}
    states = {
        (("gone", 0), 1): ReplicaStateName.DELETION_SUCCESSFUL,
        (("gone", 0), 2): ReplicaStateName.DELETION_STARTED,
        (("gone", 0), 3): ReplicaStateName.DELETION_INELIGIBLE,
        (("gone", 1), 2): ReplicaStateName.DELETION_SUCCESSFUL,
        (("gone", 1), 3): ReplicaStateName.DELETION_INELIGIBLE,
        (("a", 0), 1): ReplicaStateName.ONLINE,
    }
    ctx.replica_states = states
    return ctx


def test_counts_of_a_context_with_a_reassignment_and_a_deletion():
    assert controller_metrics(context()) == ControllerMetrics(
        global_topic_count=3,
        global_partition_count=6,
        preferred_replica_imbalance_count=2,  # a-1, and r-1 (3 joined the ISR, 1 still leads)
        topics_to_delete_count=1,
        replicas_to_delete_count=3,  # gone-0: 2 and 3, gone-1: 3
        topics_ineligible_to_delete_count=1,
        replicas_ineligible_to_delete_count=2,
    )


def test_an_empty_context_counts_nothing():
    assert controller_metrics(ControllerContext()) == ControllerMetrics()


def test_a_topic_leaves_the_imbalance_once_queued_for_deletion():
    ctx = context()
    ctx.topics_to_delete = {"a"}  # and "gone" no longer
    ctx.topics_ineligible_for_deletion = set()
    counts = controller_metrics(ctx)
    assert counts.preferred_replica_imbalance_count == 3  # r-1, gone-0 (led by 2), gone-1 (by 3)
    assert counts.replicas_to_delete_count == 6  # a's replicas have no deletion state yet
    assert counts.replicas_ineligible_to_delete_count == 0
