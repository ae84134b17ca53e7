"""`ControllerMetrics`: the counts Kafka's ``KafkaController`` publishes as gauges, computed
from the controller's context by its event thread after each item it handles (Kafka's
``updateMetrics``, run by its event thread after each event), and read by the metrics scrape
from any thread.

Publication is one reference assignment of a frozen value, so a scrape sees the counts of
one moment, never a context half-way through an event; the scrape never iterates the
context, which only the event thread may touch.

The counts, as Kafka's ``kafka.controller:type=KafkaController`` gauges:

- ``global_topic_count``: topics the controller knows (``GlobalTopicCount``);
- ``global_partition_count``: partitions with a leadership state (``GlobalPartitionCount``);
- ``preferred_replica_imbalance_count``: partitions whose leader is not their preferred
  replica (the first of the assignment); while a reassignment adds the preferred replica, the
  partition counts only while that replica is in the ISR, whoever leads (Kafka's
  ``hasPreferredLeader``); topics queued for deletion are left out
  (``PreferredReplicaImbalanceCount``);
- ``topics_to_delete_count``: topics queued for deletion (``TopicsToDeleteCount``);
- ``replicas_to_delete_count``: replicas of those topics not yet deleted successfully
  (``ReplicasToDeleteCount``);
- ``topics_ineligible_to_delete_count``: topics whose deletion waits (a replica offline, a
  reassignment: ``TopicsIneligibleToDeleteCount``);
- ``replicas_ineligible_to_delete_count``: replicas of topics queued for deletion in state
  ReplicaDeletionIneligible (``ReplicasIneligibleToDeleteCount``).

Cost: O(partitions + replica states), on the event thread, once per handled item; handling
an item already copies the context (`Controller.handle`), which is of the same order.
"""

from __future__ import annotations

from dataclasses import dataclass

from odradek.controller.controller_context import ControllerContext, ReplicaStateName


@dataclass(frozen=True, slots=True)
class ControllerMetrics:
    global_topic_count: int = 0
    global_partition_count: int = 0
    preferred_replica_imbalance_count: int = 0
    topics_to_delete_count: int = 0
    replicas_to_delete_count: int = 0
    topics_ineligible_to_delete_count: int = 0
    replicas_ineligible_to_delete_count: int = 0


# What a broker that is not the active controller reports (Kafka's gauges are 0 there).
INACTIVE = ControllerMetrics()


def controller_metrics(ctx: ControllerContext) -> ControllerMetrics:
    """The counts of the active controller's ``ctx`` (call on the event thread only)."""
    deleting = ctx.topics_to_delete
    to_delete = ineligible = 0
    for tp, assignment in ctx.assignments.items() if deleting else ():
        if tp[0] in deleting:
            for replica in assignment.replicas:
                state = ctx.replica_states.get((tp, replica))
                to_delete += state is not ReplicaStateName.DELETION_SUCCESSFUL
                ineligible += state is ReplicaStateName.DELETION_INELIGIBLE
    return ControllerMetrics(
        global_topic_count=len(ctx.all_topics()),
        global_partition_count=len(ctx.leadership),
        preferred_replica_imbalance_count=_preferred_replica_imbalance(ctx),
        topics_to_delete_count=len(deleting),
        replicas_to_delete_count=to_delete,
        topics_ineligible_to_delete_count=len(ctx.topics_ineligible_for_deletion),
        replicas_ineligible_to_delete_count=ineligible,
    )


def _preferred_replica_imbalance(ctx: ControllerContext) -> int:
    imbalanced = 0
    for tp, state in ctx.leadership.items():
        assignment = ctx.assignments.get(tp)
        if assignment is None or not assignment.replicas or tp[0] in ctx.topics_to_delete:
            continue
        preferred = assignment.replicas[0]
        if preferred in assignment.adding:
            # a reassignment's new replica: not counted until it joins the ISR; from then
            # until the reassignment completes, counted whoever leads (as Kafka does)
            imbalanced += preferred in state.isr
        else:
            imbalanced += state.leader != preferred
    return imbalanced
