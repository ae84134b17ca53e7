"""Partition reassignment: Kafka's ``KafkaController.onPartitionReassignment`` (KIP-455), without
I/O. Vocabulary: ORS the original replicas, TRS the target replicas, RS the full set during the
move (TRS then ORS, distinct), AR = TRS - ORS the adding replicas, RR = ORS - TRS the removing
ones.

Start (or change of target):

* U1/U2: the topic znode and the context get RS, AR and RR (a conditional write of
  ``/brokers/topics/<t>`` at the version last read or written);
* A1: the leader epoch is bumped (same leader and ISR) and every replica of RS hears it;
* A2: the adding replicas become NewReplica, so they start fetching.

Completion, checked after every ISR change, once every target replica is in the ISR:

* B1: AR become OnlineReplica; B2: the assignment becomes TRS;
* B3: if the leader is not in TRS (or dead) a new one is elected from TRS by the reassign
  strategy, else the leader epoch is bumped so the shrunk replica set is announced;
* B4/B5: RR go Offline (out of the ISR), then through deletion to NonExistentReplica
  (StopReplica with delete);
* B6: the topic znode gets TRS with empty AR and RR; B8: UpdateMetadata to everyone.

Worked example: t-0 on [1, 2, 3] reassigned to [4, 5, 6]: RS is [4, 5, 6, 1, 2, 3], AR
[4, 5, 6], RR [1, 2, 3]; when the ISR holds 4, 5 and 6 the leader moves to 4 (the first of
TRS in the ISR) and 1, 2, 3 are stopped and deleted.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from odradek.controller.commands import SetZnode, TopicPartition
from odradek.controller.controller_context import ControllerContext, ReplicaAssignment
from odradek.controller.controller_context import PartitionStateName as P
from odradek.controller.controller_context import ReplicaStateName as R
from odradek.controller.leader_election import ElectionStrategy, new_leader_and_isr
from odradek.controller.partition_state_machine import PartitionStateMachine, write_leader_and_isr
from odradek.controller.replica_state_machine import ReplicaStateMachine
from odradek.controller.request_batch import RequestBatch
from odradek.metadata import layout
from odradek.metadata.layout import TopicAssignment


def reassignment_of(original: tuple[int, ...], target: tuple[int, ...]) -> ReplicaAssignment:
    """Kafka's ``ReplicaAssignment.fromOldAndNewReplicas``."""
    full = tuple(dict.fromkeys(target + original))
    adding = tuple(r for r in target if r not in original)
    removing = tuple(r for r in original if r not in target)
    return ReplicaAssignment(full, adding, removing)


@dataclass(eq=False)
class ReassignmentManager:
    """Moves partitions to new replicas; see the module docstring."""

    ctx: ControllerContext
    batch: RequestBatch
    psm: PartitionStateMachine
    rsm: ReplicaStateMachine

    def reassign(self, tp: TopicPartition, target: tuple[int, ...]) -> bool:
        """Start moving ``tp`` to ``target``; False if it cannot (unknown, being deleted,
        no leader yet, or nothing to do)."""
        ctx = self.ctx
        current = ctx.assignments.get(tp)
        if current is None or ctx.is_queued_for_deletion(tp[0]) or tp not in ctx.leadership:
            return False
        if not target or len(set(target)) != len(target):
            return False
        new = reassignment_of(current.target_replicas, tuple(target))
        if not new.is_being_reassigned:
            return False
        unneeded = [r for r in current.replicas if r not in new.replicas]
        self._set_assignment(tp, new)  # U1, U2
        if unneeded:
            self._stop_removed(tp, unneeded)
        self.maybe_complete(tp, start=True)
        return True

    def maybe_complete(self, tp: TopicPartition, start: bool = False) -> None:
        """Finish the reassignment of ``tp`` if every target replica is in its ISR; when
        ``start``, otherwise begin it (A1, A2)."""
        ctx = self.ctx
        assignment = ctx.assignments.get(tp)
        state = ctx.leadership.get(tp)
        if assignment is None or state is None or not assignment.is_being_reassigned:
            return
        if set(assignment.target_replicas) <= set(state.isr):
            self._complete(tp, assignment)
        elif start:
            self._bump_leader_epoch(tp)  # A1
            adding = [
                (tp, r)
                for r in assignment.adding
                if ctx.replica_state((tp, r)) is R.NON_EXISTENT
            ]
            self.rsm.handle_state_changes(adding, R.NEW)  # A2

    def partitions_being_reassigned(self) -> list[TopicPartition]:
        return self.ctx.partitions_being_reassigned()

    def _complete(self, tp: TopicPartition, assignment: ReplicaAssignment) -> None:
        ctx = self.ctx
        self.rsm.handle_state_changes([(tp, r) for r in assignment.adding], R.ONLINE)  # B1
        done = ReplicaAssignment(assignment.target_replicas)
        ctx.assignments[tp] = done  # B2
        leader = ctx.leadership[tp].leader
        if leader in done.replicas and ctx.is_replica_online(leader):
            self._bump_leader_epoch(tp)  # B3
        else:
            if ctx.partition_state(tp) is P.ONLINE or ctx.partition_state(tp) is P.OFFLINE:
                self.psm.handle_state_changes([tp], P.ONLINE, ElectionStrategy.REASSIGN)
        self._stop_removed(tp, list(assignment.removing))  # B4, B5
        self.write_topic(tp[0])  # B6
        self.batch.add_update_metadata(ctx.live_or_shutting_down_ids(), [tp])  # B8

    def _stop_removed(self, tp: TopicPartition, removed: Iterable[int]) -> None:
        """Kafka's ``stopRemovedReplicasOfReassignedPartition``."""
        replicas = [(tp, r) for r in removed]
        self.rsm.handle_state_changes(replicas, R.OFFLINE)
        self.rsm.handle_state_changes(replicas, R.DELETION_STARTED)
        self.rsm.handle_state_changes(replicas, R.DELETION_SUCCESSFUL)
        self.rsm.handle_state_changes(replicas, R.NON_EXISTENT)

    def _bump_leader_epoch(self, tp: TopicPartition) -> None:
        """Kafka's ``updateLeaderEpochAndSendRequest``: same leader and ISR, next epoch, to
        every replica of the assignment."""
        ctx = self.ctx
        state = ctx.leadership[tp]
        new = new_leader_and_isr(state, state.leader, state.isr, ctx.epoch)
        written = write_leader_and_isr(ctx, self.batch, tp, new)
        self.batch.add_leader_and_isr(ctx.replicas(tp), tp, written, is_new=False)

    def _set_assignment(self, tp: TopicPartition, assignment: ReplicaAssignment) -> None:
        self.ctx.assignments[tp] = assignment
        self.write_topic(tp[0])

    def write_topic(self, topic: str) -> None:
        """The topic znode from the context, conditional on the version last seen."""
        ctx = self.ctx
        parts = {tp[1]: a for tp, a in ctx.assignments.items() if tp[0] == topic}
        doc = TopicAssignment(
            topic,
            ctx.topic_ids.get(topic, layout.ZERO_UUID),
            {p: a.replicas for p, a in parts.items()},
            {p: a.adding for p, a in parts.items() if a.adding},
            {p: a.removing for p, a in parts.items() if a.removing},
        )
        version = ctx.topic_zk_versions.get(topic, -1)
        self.batch.add_write(
            SetZnode(layout.topic_path(topic), ctx.epoch_zk_version, doc.to_json(), version)
        )
        ctx.topic_zk_versions[topic] = version + 1

