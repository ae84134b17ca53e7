"""Partition reassignment: Kafka's ``KafkaController.onPartitionReassignment`` (KIP-455), without
I/O. Vocabulary: ORS the original replicas, TRS the target replicas, RS the full set during the
move (TRS then ORS, distinct), AR = TRS - ORS the adding replicas, RR = ORS - TRS the removing
ones.

Requests come from AlterPartitionReassignments (`alter_reassignments`: targets checked as
Kafka's ``validateReplicas`` does, INVALID_REPLICA_ASSIGNMENT; UNKNOWN_TOPIC_OR_PARTITION for a
partition that does not exist or whose topic is being deleted; None cancels, going back to
ORS, NO_REASSIGNMENT_IN_PROGRESS when nothing is in progress) and from
``/admin/reassign_partitions`` (`on_zk_reassignment`). A new target always starts from ORS
(Kafka's ``reassignTo``), so a changed or cancelled reassignment never counts replicas that
had not caught up as origin.

Start (or change of target, or cancellation):

* U1/U2: the topic znode and the context get RS, AR and RR (a conditional write of
  ``/brokers/topics/<t>`` at the version last read or written);
* U3: replicas of the previous RS not in the new one are stopped and deleted;
* A1: the leader epoch is bumped (same leader and ISR) and every replica of RS hears it;
* A2: the adding replicas become NewReplica, so they start fetching.

Completion, checked after every ISR change, once every target replica is in the ISR:

* B1: AR become OnlineReplica; B2: the assignment becomes TRS;
* B3: if the leader is not in TRS (or dead) a new one is elected from TRS by the reassign
  strategy, else the leader epoch is bumped so the shrunk replica set is announced;
* B4/B5: RR go Offline (out of the ISR), then through deletion to NonExistentReplica
  (StopReplica with delete);
* B6: the topic znode gets TRS with empty AR and RR; B7: the partition leaves
  ``/admin/reassign_partitions`` (deleted when empty: Kafka keeps the znode while its
  reassignments run, so the old tools' "reassignment in progress" check holds);
  B8: UpdateMetadata to everyone; when no partition of the topic is left being reassigned,
  a deletion of the topic waiting for it resumes.

A topic queued for deletion is never reassigned anew (UNKNOWN_TOPIC_OR_PARTITION), but one
queued while its reassignment runs waits for it: `on_partition_reassignment` marks it
ineligible for deletion (as Kafka's does) and completion resumes it (`topic_deletion`).

A partition not being reassigned whose new target is its replica set (or a reordering of it)
completes at once: phase B only, the new order (preferred leader) written and announced.

Worked example: t-0 on [1, 2, 3] reassigned to [4, 5, 6]: RS is [4, 5, 6, 1, 2, 3], AR
[4, 5, 6], RR [1, 2, 3]; when the ISR holds 4, 5 and 6 the leader moves to 4 (the first of
TRS in the ISR) and 1, 2, 3 are stopped and deleted.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

from odradek.controller import events as ev
from odradek.controller.commands import (
    AlterPartitionReassignmentsReply,
    DeleteZnode,
    ListPartitionReassignmentsReply,
    SetExistingZnode,
    SetZnode,
    TopicPartition,
)
from odradek.controller.controller_context import ControllerContext, ReplicaAssignment
from odradek.controller.controller_context import PartitionStateName as P
from odradek.controller.controller_context import ReplicaStateName as R
from odradek.controller.leader_election import ElectionStrategy, new_leader_and_isr
from odradek.controller.partition_state_machine import PartitionStateMachine, write_leader_and_isr
from odradek.controller.replica_state_machine import ReplicaStateMachine
from odradek.controller.request_batch import RequestBatch
from odradek.controller.topic_deletion import TopicDeletionManager
from odradek.controller.watched_events import REASSIGN_PARTITIONS, encode_reassignment
from odradek.metadata import layout
from odradek.metadata.layout import TopicAssignment
from odradek.protocol.generated.error_codes import ErrorCode


def reassignment_of(original: tuple[int, ...], target: tuple[int, ...]) -> ReplicaAssignment:
    """Kafka's ``ReplicaAssignment.fromOldAndNewReplicas``."""
    full = tuple(dict.fromkeys(target + original))
    adding = tuple(r for r in target if r not in original)
    removing = tuple(r for r in original if r not in target)
    return ReplicaAssignment(full, adding, removing)


def origin_replicas(assignment: ReplicaAssignment) -> tuple[int, ...]:
    """ORS: the replicas before the reassignment in progress (all of them when none is)."""
    return tuple(r for r in assignment.replicas if r not in assignment.adding)


def reassign_to(assignment: ReplicaAssignment, target: tuple[int, ...]) -> ReplicaAssignment:
    """Kafka's ``ReplicaAssignment.reassignTo``: from the origin replicas, never from the
    targets of a reassignment in progress (those may not have caught up)."""
    return reassignment_of(origin_replicas(assignment), tuple(target))


_NO_PARTITION = "The partition does not exist."
PartitionResult = tuple[ErrorCode, str | None]


@dataclass(eq=False)
class ReassignmentManager:
    """Moves partitions to new replicas; see the module docstring."""

    ctx: ControllerContext
    batch: RequestBatch
    psm: PartitionStateMachine
    rsm: ReplicaStateMachine
    deletion: TopicDeletionManager

    # -- requests ----------------------------------------------------------------------------

    def alter_reassignments(
        self, requested: Mapping[TopicPartition, tuple[int, ...] | None]
    ) -> AlterPartitionReassignmentsReply:
        """AlterPartitionReassignments (Kafka's ``processApiPartitionReassignment``): each
        partition's targets checked (`validate_replicas`), None cancels; a partition named by
        ``/admin/reassign_partitions`` is taken off it, the latest request winning."""
        results: dict[TopicPartition, PartitionResult] = {}
        to_reassign: dict[TopicPartition, ReplicaAssignment] = {}
        for tp, target in requested.items():
            error = None if target is None else self.validate_replicas(tp, tuple(target))
            if error is not None:
                results[tp] = error
                continue
            built = self._build(tp, None if target is None else tuple(target))
            if built is None:
                results[tp] = (ErrorCode.NO_REASSIGNMENT_IN_PROGRESS, None)
            else:
                to_reassign[tp] = built
        self._forget_zk(lambda tp, _: tp in to_reassign)
        results.update(self._trigger(to_reassign))
        return AlterPartitionReassignmentsReply(
            -1, ErrorCode.NONE, tuple((tp, e, m) for tp, (e, m) in results.items())
        )

    def list_reassignments(self, partitions: Iterable[TopicPartition] | None) -> ListPartitionReassignmentsReply:
        """ListPartitionReassignments: the asked partitions (None: all) being reassigned."""
        ctx = self.ctx
        asked = ctx.partitions_being_reassigned() if partitions is None else partitions
        found = []
        for tp in dict.fromkeys(asked):
            a = ctx.assignments.get(tp)
            if a is not None and a.is_being_reassigned:
                found.append((tp, a.replicas, a.adding, a.removing))
        return ListPartitionReassignmentsReply(-1, ErrorCode.NONE, tuple(found))

    def on_zk_reassignment(self, targets: Mapping[TopicPartition, tuple[int, ...]]) -> None:
        """``/admin/reassign_partitions`` now holds ``targets`` (Kafka's
        ``processZkPartitionReassignment``). Partitions asked for anew (not already known
        with the same targets: the controller's own tidying of the znode fires its watch
        too) are reassigned; those that fail are taken off the znode."""
        ctx = self.ctx
        if not targets:  # nothing asked: the znode would only stand in the way of the next
            self.batch.add_write(DeleteZnode(REASSIGN_PARTITIONS, ctx.epoch_zk_version))
        known = ctx.zk_reassignments
        fresh = {tp: tuple(t) for tp, t in targets.items() if known.get(tp) != tuple(t)}
        ctx.zk_reassignments = {tp: tuple(t) for tp, t in targets.items()}
        to_reassign, failed = {}, set()
        for tp, target in sorted(fresh.items()):
            if not target or len(set(target)) != len(target):
                failed.add(tp)
            else:
                to_reassign[tp] = reassign_to(self._assignment(tp), target)
        results = self._trigger(to_reassign)
        failed |= {tp for tp, (error, _) in results.items() if error is not ErrorCode.NONE}
        self._forget_zk(lambda tp, _: tp in failed)

    def validate_replicas(self, tp: TopicPartition, target: tuple[int, ...]) -> PartitionResult | None:
        """Kafka's ``validateReplicas``: INVALID_REPLICA_ASSIGNMENT for an empty list,
        duplicates, negative ids, or new replicas on brokers that are not alive."""
        bad = ErrorCode.INVALID_REPLICA_ASSIGNMENT
        if not target:
            return bad, "Empty replica list specified in partition reassignment."
        if len(set(target)) != len(target):
            return bad, f"Duplicate replica ids in partition reassignment replica list: {list(target)}"
        if any(r < 0 for r in target):
            return bad, f"Invalid broker id in replica list: {list(target)}"
        adding = reassign_to(self._assignment(tp), target).adding
        live = set(self.ctx.live_brokers)
        if not set(adding) <= live:
            return bad, (f"Replica assignment has brokers that are not alive. Replica list: "
                         f"{list(adding)}, live broker list: {sorted(live)}")
        return None

    def _assignment(self, tp: TopicPartition) -> ReplicaAssignment:
        return self.ctx.assignments.get(tp) or ReplicaAssignment(())

    def _build(self, tp: TopicPartition, target: tuple[int, ...] | None) -> ReplicaAssignment | None:
        """Kafka's ``maybeBuildReassignment``: None (cancel) goes back to the origin replicas
        of a reassignment in progress; None when there is nothing to cancel."""
        current = self._assignment(tp)
        if current.is_being_reassigned:
            return reassign_to(current, origin_replicas(current) if target is None else target)
        return None if target is None else reassign_to(current, target)

    def _trigger(
        self, reassignments: Mapping[TopicPartition, ReplicaAssignment]
    ) -> dict[TopicPartition, PartitionResult]:
        """Kafka's ``maybeTriggerPartitionReassignment``."""
        ctx, results = self.ctx, {}
        for tp, reassignment in reassignments.items():
            if ctx.is_queued_for_deletion(tp[0]) or not ctx.replicas(tp) or tp not in ctx.leadership:
                results[tp] = (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, _NO_PARTITION)
            else:
                self.on_partition_reassignment(tp, reassignment)
                results[tp] = (ErrorCode.NONE, None)
        return results

    # -- the reassignment ---------------------------------------------------------------------

    def on_partition_reassignment(self, tp: TopicPartition, new: ReplicaAssignment) -> None:
        """Kafka's ``onPartitionReassignment``: U1-U3, then phase A or phase B; a deletion
        of the topic waits meanwhile."""
        self.deletion.mark_ineligible([tp[0]])
        current = self.ctx.assignments[tp]
        if current != new:
            self._set_assignment(tp, new)  # U1, U2
            unneeded = [r for r in current.replicas if r not in new.replicas]
            if unneeded:
                self._stop_removed(tp, unneeded)  # U3
        self.maybe_complete(tp, start=True)

    def reassign(self, tp: TopicPartition, target: tuple[int, ...]) -> bool:
        """Start moving ``tp`` to ``target`` (from its origin replicas); False if it cannot
        (unknown, being deleted, no leader yet, empty or duplicate targets)."""
        if not target or len(set(target)) != len(target):
            return False
        new = reassign_to(self._assignment(tp), tuple(target))
        return self._trigger({tp: new})[tp][0] is ErrorCode.NONE

    def maybe_complete(self, tp: TopicPartition, start: bool = False) -> None:
        """Finish the reassignment of ``tp`` if every target replica is in its ISR (a
        partition not being reassigned counts as complete when ``start``); when ``start``,
        otherwise begin it (A1, A2)."""
        ctx = self.ctx
        assignment = ctx.assignments.get(tp)
        state = ctx.leadership.get(tp)
        if assignment is None or state is None:
            return
        if not assignment.is_being_reassigned:
            if start:
                self._complete(tp, assignment)
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
        if leader in done.replicas and ctx.is_replica_online(leader, tp=tp):
            self._bump_leader_epoch(tp)  # B3
        else:
            if ctx.partition_state(tp) is P.ONLINE or ctx.partition_state(tp) is P.OFFLINE:
                self.psm.handle_state_changes([tp], P.ONLINE, ElectionStrategy.REASSIGN)
        self._stop_removed(tp, list(assignment.removing))  # B4, B5
        self.write_topic(tp[0])  # B6
        self._forget_zk(lambda p, replicas: p == tp and replicas == done.replicas)  # B7
        self.batch.add_update_metadata(ctx.live_or_shutting_down_ids(), [tp])  # B8
        if not any(p[0] == tp[0] for p in ctx.partitions_being_reassigned()):
            self.deletion.resume_for([tp[0]])

    def _forget_zk(self, done: Callable[[TopicPartition, tuple[int, ...]], bool]) -> None:
        """Kafka's ``maybeRemoveFromZkReassignment``: take the partitions ``done`` names off
        ``/admin/reassign_partitions``; the znode goes when none is left."""
        ctx = self.ctx
        left = {tp: r for tp, r in ctx.zk_reassignments.items() if not done(tp, r)}
        if len(left) == len(ctx.zk_reassignments):
            return
        ctx.zk_reassignments = left
        if left:
            data = encode_reassignment(left)
            self.batch.add_write(SetExistingZnode(REASSIGN_PARTITIONS, ctx.epoch_zk_version, data))
        else:
            self.batch.add_write(DeleteZnode(REASSIGN_PARTITIONS, ctx.epoch_zk_version))

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



def not_controller_reassignment_reply(event: ev.ControllerEvent):
    """The NOT_CONTROLLER answer to a reassignment request (None for other events)."""
    if isinstance(event, ev.ApiPartitionReassignment):
        return AlterPartitionReassignmentsReply(-1, ErrorCode.NOT_CONTROLLER)
    if isinstance(event, ev.ListPartitionReassignments):
        return ListPartitionReassignmentsReply(-1, ErrorCode.NOT_CONTROLLER)
    return None
