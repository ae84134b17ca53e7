"""The replica state machine: transition table, and OfflineReplica leaving the ISR."""

from __future__ import annotations

import itertools

import pytest

from odradek.controller.commands import (
    EPOCH_DURING_DELETE,
    LeaderAndIsrRequest,
    LiveBroker,
    SetZnode,
    StopReplicaRequest,
)
from odradek.controller.controller_context import ControllerContext, ReplicaAssignment
from odradek.controller.controller_context import ReplicaStateName as R
from odradek.controller.partition_state_machine import IllegalStateChange, StateChangeFailed
from odradek.controller.replica_state_machine import (
    ReplicaStateMachine,
    check_replica_transition,
)
from odradek.controller.request_batch import RequestBatch
from odradek.metadata.layout import PartitionState

TP = ("t", 0)

VALID = {
    (R.NON_EXISTENT, R.NEW),
    *((s, R.ONLINE) for s in (R.NEW, R.ONLINE, R.OFFLINE, R.DELETION_INELIGIBLE)),
    *((s, R.OFFLINE) for s in (R.NEW, R.ONLINE, R.OFFLINE, R.DELETION_INELIGIBLE)),
    (R.OFFLINE, R.DELETION_STARTED),
    (R.DELETION_STARTED, R.DELETION_SUCCESSFUL),
    (R.OFFLINE, R.DELETION_INELIGIBLE),
    (R.DELETION_STARTED, R.DELETION_INELIGIBLE),
    (R.DELETION_SUCCESSFUL, R.NON_EXISTENT),
}


@pytest.mark.parametrize("current,target", list(itertools.product(R, R)))
def test_transition_table(current, target):
    if (current, target) in VALID:
        check_replica_transition((TP, 1), current, target)
    else:
        with pytest.raises(IllegalStateChange):
            check_replica_transition((TP, 1), current, target)


def machine(live=(1, 2, 3), state=None):
    ctx = ControllerContext(controller_id=1, epoch=3, epoch_zk_version=9)
    ctx.live_brokers = {b: LiveBroker(b, 1) for b in live}
    ctx.assignments[TP] = ReplicaAssignment((1, 2, 3))
    if state is not None:
        ctx.leadership[TP] = state
    for b in (1, 2, 3):
        ctx.replica_states[(TP, b)] = R.ONLINE
    batch = RequestBatch(ctx)
    return ctx, batch, ReplicaStateMachine(ctx, batch)


def test_illegal_transition_refused():
    ctx, batch, rsm = machine()
    failed = rsm.handle_state_changes([(TP, 1)], R.DELETION_STARTED)  # Online -> Started
    assert isinstance(failed[(TP, 1)], IllegalStateChange)
    assert ctx.replica_state((TP, 1)) is R.ONLINE


def test_offline_follower_leaves_isr_with_new_leader_epoch():
    ctx, batch, rsm = machine(live=(1, 2), state=PartitionState(1, 4, (1, 2, 3), 3, 5))
    assert rsm.handle_state_changes([(TP, 3)], R.OFFLINE) == {}
    assert ctx.leadership[TP] == PartitionState(1, 5, (1, 2), 3)
    assert ctx.leadership[TP].zk_version == 6
    commands = batch.drain()
    (write,) = [c for c in commands if isinstance(c, SetZnode)]
    assert write.expected_version == 5
    stops = [c for c in commands if isinstance(c, StopReplicaRequest)]
    assert stops == []  # broker 3 is dead: nothing is sent to it
    lai = sorted(c.broker_id for c in commands if isinstance(c, LeaderAndIsrRequest))
    assert lai == [1, 2]


def test_offline_leader_leaves_partition_leaderless_but_keeps_last_isr_member():
    ctx, batch, rsm = machine(live=(2, 3), state=PartitionState(1, 4, (1,), 3, 5))
    rsm.handle_state_changes([(TP, 1)], R.OFFLINE)
    assert ctx.leadership[TP] == PartitionState(-1, 5, (1,), 3)


def test_offline_replica_of_a_shutting_down_broker_gets_stop_replica():
    ctx, batch, rsm = machine(state=PartitionState(1, 4, (1, 2), 3, 5))
    ctx.shutting_down.add(2)
    rsm.handle_state_changes([(TP, 2)], R.OFFLINE)
    stops = [c for c in batch.drain() if isinstance(c, StopReplicaRequest)]
    assert [(s.broker_id, s.partitions[0].delete_partition, s.partitions[0].leader_epoch)
            for s in stops] == [(2, False, 4)]  # the epoch it knows, as Kafka sends


def test_offline_replica_not_in_isr_writes_nothing():
    ctx, batch, rsm = machine(state=PartitionState(1, 4, (1, 2), 3, 5))
    rsm.handle_state_changes([(TP, 3)], R.OFFLINE)
    assert not [c for c in batch.drain() if isinstance(c, SetZnode)]
    assert ctx.leadership[TP].leader_epoch == 4


def test_new_replica_refused_if_it_is_the_leader():
    ctx, batch, rsm = machine(state=PartitionState(1, 4, (1, 2), 3, 5))
    ctx.replica_states.clear()
    failed = rsm.handle_state_changes([(TP, 1), (TP, 2)], R.NEW)
    assert isinstance(failed[(TP, 1)], StateChangeFailed)
    assert ctx.replica_state((TP, 2)) is R.NEW
    lai = [c for c in batch.drain() if isinstance(c, LeaderAndIsrRequest)]
    assert [(c.broker_id, c.partition_states[0].is_new) for c in lai] == [(2, True)]


def test_deletion_path():
    ctx, batch, rsm = machine(state=PartitionState(1, 4, (1, 2, 3), 3, 5))
    replica = (TP, 2)
    rsm.handle_state_changes([replica], R.OFFLINE)
    rsm.handle_state_changes([replica], R.DELETION_STARTED)
    stops = [c for c in batch.drain() if isinstance(c, StopReplicaRequest) and c.broker_id == 2]
    assert stops[0].partitions[0].delete_partition
    assert stops[0].partitions[0].leader_epoch == EPOCH_DURING_DELETE
    rsm.handle_state_changes([replica], R.DELETION_SUCCESSFUL)
    rsm.handle_state_changes([replica], R.NON_EXISTENT)
    assert replica not in ctx.replica_states
    assert ctx.replicas(TP) == (1, 3)
