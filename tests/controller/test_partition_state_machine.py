"""The partition state machine: the transition table, and what each transition writes and
sends, driven directly over a hand-built context."""

from __future__ import annotations

import itertools

import pytest

from odradek.controller.commands import (
    CreateZnode,
    LeaderAndIsrRequest,
    LiveBroker,
    SetZnode,
    UpdateMetadataRequest,
)
from odradek.controller.controller_context import ControllerContext, ReplicaAssignment
from odradek.controller.controller_context import PartitionStateName as P
from odradek.controller.leader_election import ElectionStrategy
from odradek.controller.partition_state_machine import (
    VALID_PREVIOUS_STATES,
    IllegalStateChange,
    PartitionStateMachine,
    StateChangeFailed,
    check_partition_transition,
)
from odradek.controller.request_batch import RequestBatch
from odradek.metadata import layout
from odradek.metadata.layout import PartitionState

TP = ("t", 0)

VALID = {
    (P.NON_EXISTENT, P.NEW),
    (P.NEW, P.ONLINE), (P.ONLINE, P.ONLINE), (P.OFFLINE, P.ONLINE),
    (P.NEW, P.OFFLINE), (P.ONLINE, P.OFFLINE), (P.OFFLINE, P.OFFLINE),
    (P.OFFLINE, P.NON_EXISTENT),
}


@pytest.mark.parametrize("current,target", list(itertools.product(P, P)))
def test_transition_table(current, target):
    if (current, target) in VALID:
        check_partition_transition(TP, current, target)
    else:
        with pytest.raises(IllegalStateChange):
            check_partition_transition(TP, current, target)
    assert ((current, target) in VALID) == (current in VALID_PREVIOUS_STATES[target])


def machine(live=(1, 2, 3), replicas=(1, 2, 3)):
    ctx = ControllerContext(controller_id=1, epoch=3, epoch_zk_version=9)
    ctx.live_brokers = {b: LiveBroker(b, 10 + b) for b in live}
    ctx.assignments[TP] = ReplicaAssignment(tuple(replicas))
    ctx.topic_ids["t"] = layout.new_kafka_uuid()
    batch = RequestBatch(ctx)
    return ctx, batch, PartitionStateMachine(ctx, batch)


def test_illegal_transitions_are_refused_and_state_kept():
    ctx, batch, psm = machine()
    results = psm.handle_state_changes([TP], P.OFFLINE)
    assert isinstance(results[TP], IllegalStateChange)  # NonExistent -> Offline
    assert ctx.partition_state(TP) is P.NON_EXISTENT
    assert batch.is_empty()


def test_new_to_online_creates_the_state_znode_and_sends_is_new():
    ctx, batch, psm = machine(live=(2, 3))
    psm.handle_state_changes([TP], P.NEW)
    psm.handle_state_changes([TP], P.ONLINE, ElectionStrategy.OFFLINE)
    assert ctx.partition_state(TP) is P.ONLINE
    assert ctx.leadership[TP] == PartitionState(2, 0, (2, 3), 3)
    assert ctx.leadership[TP].zk_version == 0
    commands = batch.drain()
    create = [c for c in commands if isinstance(c, CreateZnode) and c.partition == TP]
    assert create[0].path == "/brokers/topics/t/partitions/0/state"
    assert create[0].epoch_zk_version == 9
    assert PartitionState.from_json(create[0].data) == ctx.leadership[TP]
    lai = {c.broker_id: c for c in commands if isinstance(c, LeaderAndIsrRequest)}
    assert sorted(lai) == [2, 3]  # the ISR
    assert all(c.partition_states[0].is_new for c in lai.values())
    assert lai[2].broker_epoch == 12 and lai[2].controller_epoch == 3
    ums = [c for c in commands if isinstance(c, UpdateMetadataRequest)]
    assert sorted(c.broker_id for c in ums) == [2, 3]
    assert ums[0].partition_states[0].offline_replicas == (1,)


def test_new_to_online_without_live_replica_stays_new():
    ctx, batch, psm = machine(live=())
    psm.handle_state_changes([TP], P.NEW)
    results = psm.handle_state_changes([TP], P.ONLINE, ElectionStrategy.OFFLINE)
    assert isinstance(results[TP], StateChangeFailed)
    assert ctx.partition_state(TP) is P.NEW
    assert batch.is_empty()


def test_offline_to_online_is_a_conditional_write_at_the_read_version():
    ctx, batch, psm = machine(live=(2, 3))
    ctx.partition_states[TP] = P.OFFLINE
    ctx.leadership[TP] = PartitionState(1, 6, (1, 2), 2, zk_version=11)
    psm.handle_state_changes([TP], P.ONLINE, ElectionStrategy.OFFLINE)
    (write,) = [c for c in batch.drain() if isinstance(c, SetZnode)]
    assert write.expected_version == 11 and write.epoch_zk_version == 9
    assert PartitionState.from_json(write.data) == PartitionState(2, 7, (2,), 3)
    assert ctx.leadership[TP].zk_version == 12
    guard = write.guard()  # checked in the same multi
    assert guard.path == layout.CONTROLLER_EPOCH and guard.version == 9


def test_online_requires_a_strategy_unless_new():
    ctx, batch, psm = machine()
    ctx.partition_states[TP] = P.OFFLINE
    ctx.leadership[TP] = PartitionState(1, 0, (1,), 3, 0)
    with pytest.raises(ValueError):
        psm.handle_state_changes([TP], P.ONLINE)


def test_state_written_by_a_newer_controller_is_not_touched():
    ctx, batch, psm = machine(live=(2, 3))
    ctx.partition_states[TP] = P.OFFLINE
    ctx.leadership[TP] = PartitionState(1, 6, (1, 2), 4, 11)  # epoch 4 > ours (3)
    results = psm.handle_state_changes([TP], P.ONLINE, ElectionStrategy.OFFLINE)
    assert isinstance(results[TP], StateChangeFailed)
    assert batch.is_empty()


def test_clean_election_failure_leaves_partition_offline():
    ctx, batch, psm = machine(live=(3,))
    ctx.partition_states[TP] = P.OFFLINE
    ctx.leadership[TP] = PartitionState(1, 6, (1, 2), 2, 11)
    results = psm.handle_state_changes([TP], P.ONLINE, ElectionStrategy.OFFLINE)
    assert isinstance(results[TP], StateChangeFailed)
    assert ctx.partition_state(TP) is P.OFFLINE
    assert ctx.leadership[TP].leader_epoch == 6


def test_initialize_from_leadership():
    ctx, batch, psm = machine(live=(2,))
    ctx.assignments[("t", 1)] = ReplicaAssignment((1, 2))
    ctx.assignments[("t", 2)] = ReplicaAssignment((1, 2))
    ctx.leadership[("t", 0)] = PartitionState(2, 0, (2,), 1, 0)
    ctx.leadership[("t", 1)] = PartitionState(1, 0, (1,), 1, 0)
    psm.initialize()
    assert [ctx.partition_state(("t", p)) for p in range(3)] == [P.ONLINE, P.OFFLINE, P.NEW]
