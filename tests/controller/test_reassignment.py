"""Partition reassignment: start (RS, AR, RR written, adding replicas started), completion
when the targets joined the ISR (leader moved into TRS, removed replicas stopped and deleted)."""

from __future__ import annotations

import uuid

from odradek.controller import events as ev
from odradek.controller.controller_context import ReplicaAssignment
from odradek.controller.controller_context import ReplicaStateName as R
from odradek.controller.reassignment import reassignment_of
from odradek.metadata.layout import TopicAssignment

from tests.controller.harness import Cluster

TP = ("t", 0)


def test_reassignment_of_worked_example():
    assert reassignment_of((1, 2, 3), (4, 5, 6)) == ReplicaAssignment(
        (4, 5, 6, 1, 2, 3), (4, 5, 6), (1, 2, 3)
    )
    assert reassignment_of((1, 2), (1, 3)) == ReplicaAssignment((1, 3, 2), (3,), (2,))


def cluster() -> Cluster:
    c = Cluster()
    c.create_topic(TopicAssignment("t", uuid.UUID(int=8), {0: (1000, 1001), 1: (1001, 1000)}))
    return c


def catch_up(c: Cluster, isr) -> None:
    state = c.state(*TP)
    c.run(ev.AlterPartition(state.leader, c.live[state.leader].epoch,
                            ((TP, state.leader_epoch, tuple(isr), state.zk_version),)))
    assert c.replies[0].partitions[0].error == 0


def test_move_to_new_brokers():
    c = cluster()
    c.run(ev.PartitionReassignment({TP: (1002, 1003)}))
    topic = c.read_topics()[0]
    assert topic.partitions[0] == (1002, 1003, 1000, 1001)
    assert topic.adding_replicas[0] == (1002, 1003)
    assert topic.removing_replicas[0] == (1000, 1001)
    assert topic.partitions[1] == (1001, 1000)
    state = c.state(*TP)
    assert (state.leader, state.leader_epoch) == (1000, 1)  # A1: epoch bumped
    for b in (1002, 1003):
        assert c.leader_and_isr(b)[TP].replicas == (1002, 1003, 1000, 1001)
        assert c.ctx.replica_state((TP, b)) is R.NEW

    catch_up(c, (1000, 1001, 1002, 1003))  # the new replicas caught up: complete
    state = c.state(*TP)
    assert (state.leader, state.isr) == (1002, (1002, 1003))
    topic = c.read_topics()[0]
    assert topic.partitions[0] == (1002, 1003)
    assert 0 not in topic.adding_replicas and 0 not in topic.removing_replicas
    for b in (1000, 1001):
        assert c.stop_replica(b)[TP].delete_partition
        assert (TP, b) not in c.ctx.replica_states
    assert c.ctx.replica_state((TP, 1002)) is R.ONLINE
    assert c.controller.reassignment.partitions_being_reassigned() == []


def test_leader_kept_when_in_target():
    c = cluster()
    c.run(ev.PartitionReassignment({TP: (1000, 1002)}))
    catch_up(c, (1000, 1001, 1002))
    state = c.state(*TP)
    assert (state.leader, state.isr, state.leader_epoch) == (1000, (1000, 1002), 3)
    assert c.read_topics()[0].partitions[0] == (1000, 1002)
    assert c.stop_replica(1001)[TP].delete_partition


def test_nothing_to_do_and_unknown_partitions_are_ignored():
    c = cluster()
    commands = c.run(ev.PartitionReassignment({TP: (1000, 1001), ("nope", 0): (1000,)}))
    assert commands == []


def test_reassignment_resumed_by_new_controller():
    from odradek.controller.controller import Controller
    from odradek.controller.snapshot import read_snapshot
    from odradek.metadata import layout

    c = cluster()
    c.run(ev.PartitionReassignment({TP: (1002, 1003)}))
    c.run(ev.Resign())
    data, version = c.store.get(layout.CONTROLLER_EPOCH)
    c.store.set(layout.CONTROLLER_EPOCH, layout.encode_controller_epoch(2), version)
    c.controller = Controller(1001)
    c.run(ev.Startup(read_snapshot(c.store, 1001, c.broker_epochs())))
    assert c.controller.reassignment.partitions_being_reassigned() == [TP]
    catch_up(c, (1000, 1001, 1002, 1003))
    assert c.read_topics()[0].partitions[0] == (1002, 1003)
