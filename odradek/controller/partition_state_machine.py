"""The partition state machine: Kafka's ``ZkPartitionStateMachine``
(``core/src/main/scala/kafka/controller/PartitionStateMachine.scala``), without I/O.

States and the transitions allowed into each (anything else is refused)::

    NonExistentPartition -> NewPartition            assignment known, no leader yet
    New/Online/Offline   -> OnlinePartition         a leader is elected (from New: the first
                                                    live replica, ISR = live replicas, epoch 0,
                                                    the state znode created; otherwise by an
                                                    `ElectionStrategy`, the znode set)
    New/Online/Offline   -> OfflinePartition        the leader died
    OfflinePartition     -> NonExistentPartition    the topic was deleted

A transition to Online that finds no leader (no live replica; no live ISR member under a
clean election) leaves the partition where it was. Every new leader and ISR is written with a
conditional `commands.SetZnode` (or `CreateZnode`) at the version the controller holds, and
the context then holds the version that write produces; LeaderAndIsr goes to the partition's
replicas and UpdateMetadata to every live broker (`request_batch.RequestBatch`).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace

from odradek.controller.commands import CreateZnode, SetZnode, TopicPartition
from odradek.controller.controller_context import ControllerContext
from odradek.controller.controller_context import PartitionStateName as P
from odradek.controller.leader_election import (
    ElectionResult,
    ElectionStrategy,
    elect,
    initial_leader_and_isr,
)
from odradek.controller.request_batch import RequestBatch
from odradek.metadata import layout
from odradek.metadata.layout import PartitionState

VALID_PREVIOUS_STATES: dict[P, frozenset[P]] = {
    P.NEW: frozenset({P.NON_EXISTENT}),
    P.ONLINE: frozenset({P.NEW, P.ONLINE, P.OFFLINE}),
    P.OFFLINE: frozenset({P.NEW, P.ONLINE, P.OFFLINE}),
    P.NON_EXISTENT: frozenset({P.OFFLINE}),
}


class StateChangeFailed(Exception):
    """A partition or replica could not be moved (Kafka's ``StateChangeFailedException``)."""


class IllegalStateChange(StateChangeFailed):
    """The target state may not be reached from the current one."""


def check_partition_transition(tp: TopicPartition, current: P, target: P) -> None:
    """Raise `IllegalStateChange` unless ``current -> target`` is a valid transition."""
    if current not in VALID_PREVIOUS_STATES[target]:
        allowed = ", ".join(sorted(s.value for s in VALID_PREVIOUS_STATES[target]))
        raise IllegalStateChange(
            f"Partition {tp[0]}-{tp[1]} should be in one of {allowed} states before moving "
            f"to {target.value} state. Instead it is in {current.value} state"
        )


PartitionResult = ElectionResult | PartitionState | StateChangeFailed


class PartitionStateMachine:
    """Moves partitions between states, adding commands to ``batch``."""

    def __init__(self, ctx: ControllerContext, batch: RequestBatch) -> None:
        self.ctx = ctx
        self.batch = batch

    def initialize(self) -> None:
        """Kafka's ``initializePartitionState``: New without a leader and ISR, else Online if
        the leader is live, else Offline."""
        for tp in self.ctx.all_partitions():
            state = self.ctx.leadership.get(tp)
            if state is None:
                self.ctx.partition_states[tp] = P.NEW
            elif self.ctx.is_replica_online(state.leader, tp=tp):
                self.ctx.partition_states[tp] = P.ONLINE
            else:
                self.ctx.partition_states[tp] = P.OFFLINE

    def trigger_online_partition_state_change(self, topic: str | None = None) -> dict:
        """Try to bring every New or Offline partition (of ``topic``) online with the offline
        strategy, topics queued for deletion excepted."""
        partitions = [
            tp
            for tp in self.ctx.partitions_in_states({P.OFFLINE, P.NEW}, topic)
            if not self.ctx.is_queued_for_deletion(tp[0])
        ]
        return self.handle_state_changes(partitions, P.ONLINE, ElectionStrategy.OFFLINE)

    def handle_state_changes(
        self,
        partitions: Iterable[TopicPartition],
        target: P,
        election: ElectionStrategy | None = None,
    ) -> dict[TopicPartition, PartitionResult]:
        """Move ``partitions`` to ``target``; return, per partition, the election result, the
        new leader and ISR (from New), or the reason it failed. Refused partitions keep
        their state. ``election`` is required for Online (for partitions not New)."""
        partitions = list(partitions)
        results: dict[TopicPartition, PartitionResult] = {}
        valid = []
        for tp in partitions:
            try:
                check_partition_transition(tp, self.ctx.partition_state(tp), target)
                valid.append(tp)
            except IllegalStateChange as exc:
                results[tp] = exc
        if target is P.ONLINE:
            results.update(self._to_online(valid, election))
        else:
            for tp in valid:
                self.ctx.partition_states[tp] = target
        return results

    def _to_online(
        self, partitions: list[TopicPartition], election: ElectionStrategy | None
    ) -> dict[TopicPartition, PartitionResult]:
        results: dict[TopicPartition, PartitionResult] = {}
        for tp in partitions:
            if self.ctx.partition_state(tp) is P.NEW:
                results[tp] = self._initialize(tp)
            else:
                if election is None:
                    raise ValueError("an election strategy is required to move to OnlinePartition")
                results[tp] = self._elect(tp, election)
        return results

    def _initialize(self, tp: TopicPartition) -> PartitionState | StateChangeFailed:
        """New -> Online: create the state znode (and its parents) with the first state; a
        state znode already created (read back after a conflict) is taken as it is."""
        adopted = self.ctx.adopted_states.pop(tp, None) or self.ctx.leadership.get(tp)
        if adopted is not None:
            self.ctx.leadership[tp] = adopted
            self.ctx.partition_states[tp] = P.ONLINE
            self.batch.add_leader_and_isr(adopted.isr, tp, adopted, is_new=True)
            return adopted
        state = initial_leader_and_isr(self.ctx, tp)
        if state is None:
            return StateChangeFailed(
                f"No assigned replica of {tp[0]}-{tp[1]} is alive: {self.ctx.replicas(tp)}"
            )
        guard = self.ctx.epoch_zk_version
        self.batch.add_write(CreateZnode(layout.partitions_path(tp[0]), guard, exists_ok=True))
        self.batch.add_write(CreateZnode(layout.partition_path(*tp), guard, exists_ok=True))
        self.batch.add_write(
            CreateZnode(
                layout.partition_state_path(*tp), guard, state.to_json(), topic_partition=tp
            )
        )
        written = replace(state, zk_version=0)
        self.ctx.leadership[tp] = written
        self.ctx.partition_states[tp] = P.ONLINE
        self.batch.add_leader_and_isr(written.isr, tp, written, is_new=True)
        return written

    def _elect(
        self, tp: TopicPartition, strategy: ElectionStrategy
    ) -> ElectionResult | StateChangeFailed:
        """Offline/Online -> Online by ``strategy``."""
        current = self.ctx.leadership.get(tp)
        if current is None:
            return StateChangeFailed(f"LeaderAndIsr of {tp[0]}-{tp[1]} does not exist")
        if current.controller_epoch > self.ctx.epoch:
            return StateChangeFailed(
                f"State of {tp[0]}-{tp[1]} was written by controller epoch "
                f"{current.controller_epoch}, newer than ours ({self.ctx.epoch})"
            )
        result = elect(self.ctx, tp, current, strategy)
        if result.leader_and_isr is None:
            return StateChangeFailed(
                f"Failed to elect leader for partition {tp[0]}-{tp[1]} under strategy "
                f"{strategy.value}"
            )
        written = write_leader_and_isr(self.ctx, self.batch, tp, result.leader_and_isr)
        self.batch.add_leader_and_isr(result.recipients, tp, written, is_new=False)
        self.ctx.partition_states[tp] = P.ONLINE
        return replace(result, leader_and_isr=written)


def write_leader_and_isr(
    ctx: ControllerContext, batch: RequestBatch, tp: TopicPartition, new: PartitionState
) -> PartitionState:
    """Queue the conditional write of ``new`` (whose ``zk_version`` is the version it was read
    at) and record in the context the state as written (``zk_version`` one more than the
    version the queued write expects).

    The leader epoch never decreases and grows with every change of leader (one leader per
    leader epoch; an ISR change alone, as AlterPartition makes, keeps it), and the leader, if
    any, is in the ISR: these are checked here, the one place every new state goes through."""
    old = ctx.leadership.get(tp)
    if old is not None and (
        new.leader_epoch < old.leader_epoch
        or (new.leader_epoch == old.leader_epoch and new.leader != old.leader)
    ):
        raise AssertionError(f"leader epoch of {tp} would not grow: {old} -> {new}")
    if new.leader != layout.NO_LEADER and new.leader not in new.isr:
        raise AssertionError(f"leader of {tp} outside its ISR: {new}")
    queued = batch.add_state_write(
        SetZnode(
            layout.partition_state_path(*tp),
            ctx.epoch_zk_version,
            new.to_json(),
            new.zk_version,
            topic_partition=tp,
        ),
        new,
    )
    # one more than the version the write expects: a write this batch held for the
    # partition may have been replaced by this one (`RequestBatch.add_state_write`)
    written = replace(new, zk_version=queued.expected_version + 1)
    ctx.leadership[tp] = written
    return written
