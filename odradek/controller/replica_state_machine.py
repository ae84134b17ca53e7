"""The replica state machine: Kafka's ``ZkReplicaStateMachine``
(``core/src/main/scala/kafka/controller/ReplicaStateMachine.scala``), without I/O.

A replica is one partition on one broker. States and the transitions allowed into each::

    NewReplica                 <- NonExistent
    OnlineReplica              <- New, Online, Offline, DeletionIneligible
    OfflineReplica             <- New, Online, Offline, DeletionIneligible
    ReplicaDeletionStarted     <- Offline
    ReplicaDeletionSuccessful  <- DeletionStarted
    ReplicaDeletionIneligible  <- Offline, DeletionStarted
    NonExistentReplica         <- DeletionSuccessful

What each transition sends:

* New: LeaderAndIsr (``is_new``) to the replica if the partition has a leader (and refuses a
  replica that is the leader).
* Online: LeaderAndIsr with the current state to the replica (from New: nothing, the
  partition's own transition to Online sends it).
* Offline: StopReplica without delete to the replica, and the replica leaves the ISR: a
  conditional write of the state with the next leader epoch, leader -1 if it led (the ISR
  keeps its last member, so a clean election can wait for it), then LeaderAndIsr to the other
  replicas.
* DeletionStarted: StopReplica with delete. NonExistent: the replica leaves the assignment.
"""

from __future__ import annotations

from collections.abc import Iterable

from odradek.controller.controller_context import ControllerContext, PartitionReplica
from odradek.controller.controller_context import ReplicaStateName as R
from odradek.controller.leader_election import new_leader_and_isr
from odradek.controller.partition_state_machine import (
    IllegalStateChange,
    StateChangeFailed,
    write_leader_and_isr,
)
from odradek.controller.request_batch import RequestBatch
from odradek.metadata.layout import NO_LEADER

VALID_PREVIOUS_STATES: dict[R, frozenset[R]] = {
    R.NEW: frozenset({R.NON_EXISTENT}),
    R.ONLINE: frozenset({R.NEW, R.ONLINE, R.OFFLINE, R.DELETION_INELIGIBLE}),
    R.OFFLINE: frozenset({R.NEW, R.ONLINE, R.OFFLINE, R.DELETION_INELIGIBLE}),
    R.DELETION_STARTED: frozenset({R.OFFLINE}),
    R.DELETION_SUCCESSFUL: frozenset({R.DELETION_STARTED}),
    R.DELETION_INELIGIBLE: frozenset({R.OFFLINE, R.DELETION_STARTED}),
    R.NON_EXISTENT: frozenset({R.DELETION_SUCCESSFUL}),
}


def check_replica_transition(replica: PartitionReplica, current: R, target: R) -> None:
    """Raise `IllegalStateChange` unless ``current -> target`` is a valid transition."""
    if current not in VALID_PREVIOUS_STATES[target]:
        (topic, partition), broker = replica
        allowed = ", ".join(sorted(s.value for s in VALID_PREVIOUS_STATES[target]))
        raise IllegalStateChange(
            f"Replica {broker} of {topic}-{partition} should be in one of {allowed} states "
            f"before moving to {target.value} state. Instead it is in {current.value} state"
        )


class ReplicaStateMachine:
    """Moves replicas between states, adding commands to ``batch``."""

    def __init__(self, ctx: ControllerContext, batch: RequestBatch) -> None:
        self.ctx = ctx
        self.batch = batch

    def initialize(self) -> None:
        """Kafka's ``initializeReplicaState``: replicas on live brokers Online, the others
        ReplicaDeletionIneligible (from there they may go Offline or Online)."""
        for tp in self.ctx.all_partitions():
            for broker in self.ctx.replicas(tp):
                if self.ctx.is_replica_online(broker, include_shutting_down=True, tp=tp):
                    self.ctx.replica_states[(tp, broker)] = R.ONLINE
                else:
                    self.ctx.replica_states[(tp, broker)] = R.DELETION_INELIGIBLE

    def handle_state_changes(
        self, replicas: Iterable[PartitionReplica], target: R
    ) -> dict[PartitionReplica, StateChangeFailed]:
        """Move ``replicas`` to ``target``; return the replicas refused or failed, with why."""
        failed: dict[PartitionReplica, StateChangeFailed] = {}
        for replica in replicas:
            try:
                check_replica_transition(replica, self.ctx.replica_state(replica), target)
                self._transition(replica, target)
            except StateChangeFailed as exc:
                failed[replica] = exc
        return failed

    def _transition(self, replica: PartitionReplica, target: R) -> None:
        tp, broker = replica
        ctx = self.ctx
        if target is R.NEW:
            state = ctx.leadership.get(tp)
            if state is not None:
                if state.leader == broker:
                    raise StateChangeFailed(
                        f"Replica {broker} of {tp[0]}-{tp[1]} cannot be moved to NewReplica "
                        "state as it is being requested to become leader"
                    )
                self.batch.add_leader_and_isr([broker], tp, state, is_new=True)
        elif target is R.ONLINE:
            self._to_online(replica)
        elif target is R.OFFLINE:
            self._to_offline(replica)
        elif target is R.DELETION_STARTED:
            self.batch.add_stop_replica([broker], tp, delete=True)
        elif target is R.NON_EXISTENT:
            assignment = ctx.assignments.get(tp)
            if assignment is not None:
                ctx.assignments[tp] = assignment.without(broker)
            ctx.replica_states.pop(replica, None)
            return
        ctx.replica_states[replica] = target

    def _to_online(self, replica: PartitionReplica) -> None:
        tp, broker = replica
        ctx = self.ctx
        if ctx.replica_state(replica) is R.NEW:
            assignment = ctx.assignments[tp]
            if broker not in assignment.replicas:  # Kafka adds it (and logs an error)
                ctx.assignments[tp] = type(assignment)(assignment.replicas + (broker,),
                                                       assignment.adding, assignment.removing)
            return
        state = ctx.leadership.get(tp)
        if state is not None:
            self.batch.add_leader_and_isr([broker], tp, state, is_new=False)

    def _to_offline(self, replica: PartitionReplica) -> None:
        """StopReplica to the replica; remove it from the ISR (Kafka's
        ``doRemoveReplicasFromIsr``)."""
        tp, broker = replica
        ctx = self.ctx
        self.batch.add_stop_replica([broker], tp, delete=False)
        state = ctx.leadership.get(tp)
        if state is None:
            self.batch.add_update_metadata(ctx.live_or_shutting_down_ids(), [tp])
            return
        if state.controller_epoch > ctx.epoch:
            raise StateChangeFailed(
                f"State of {tp[0]}-{tp[1]} was written by a newer controller epoch"
            )
        if broker in state.isr:
            leader = NO_LEADER if state.leader == broker else state.leader
            isr = state.isr if len(state.isr) == 1 else tuple(r for r in state.isr if r != broker)
            state = write_leader_and_isr(
                ctx, self.batch, tp, new_leader_and_isr(state, leader, isr, ctx.epoch)
            )
        if not ctx.is_queued_for_deletion(tp[0]):
            others = [r for r in ctx.replicas(tp) if r != broker]
            self.batch.add_leader_and_isr(others, tp, state, is_new=False)
