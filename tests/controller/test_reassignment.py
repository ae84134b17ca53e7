"""Partition reassignment: start (RS, AR, RR written, adding replicas started), completion
when the targets joined the ISR (leader moved into TRS, removed replicas stopped and deleted),
AlterPartitionReassignments' checks and cancellation, ListPartitionReassignments, and
``/admin/reassign_partitions`` kept until its partitions are done."""

from __future__ import annotations

import uuid

from odradek.controller import events as ev
from odradek.controller.controller_context import ReplicaAssignment
from odradek.controller.controller_context import ReplicaStateName as R
from odradek.controller.reassignment import reassignment_of
from odradek.controller.watched_events import REASSIGN_PARTITIONS, encode_reassignment, read_watched_event
from odradek.metadata.layout import TopicAssignment
from odradek.protocol.generated.error_codes import ErrorCode

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


def reassign(c: Cluster, requested: dict) -> dict:
    """AlterPartitionReassignments through the controller: ``{tp: (error, message)}``."""
    c.run(ev.ApiPartitionReassignment(requested))
    (reply,) = c.replies
    assert reply.error == ErrorCode.NONE
    return {tp: (error, message) for tp, error, message in reply.results}


def listed(c: Cluster, partitions=None) -> dict:
    c.run(ev.ListPartitionReassignments(partitions))
    return {tp: (replicas, adding, removing) for tp, replicas, adding, removing in c.replies[0].reassignments}


def test_api_errors_as_kafka_gives_them():
    c = cluster()
    c.kill(1004)
    results = reassign(c, {TP: (), ("t", 1): (1000, 1000), ("t", 2): (1000,), ("nope", 0): (1000,),
                           ("t", 3): (-1, 1000), ("t", 4): (1004,), ("gone", 0): None})
    bad = ErrorCode.INVALID_REPLICA_ASSIGNMENT
    assert results[TP] == (bad, "Empty replica list specified in partition reassignment.")
    assert results[("t", 1)][0] == bad and "Duplicate replica ids" in results[("t", 1)][1]
    assert results[("t", 3)][0] == bad and "Invalid broker id" in results[("t", 3)][1]
    assert results[("t", 4)][0] == bad and "not alive" in results[("t", 4)][1]
    assert results[("t", 2)] == results[("nope", 0)] == (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                                                          "The partition does not exist.")
    assert results[("gone", 0)] == (ErrorCode.NO_REASSIGNMENT_IN_PROGRESS, None)
    assert reassign(c, {("t", 1): None}) == {("t", 1): (ErrorCode.NO_REASSIGNMENT_IN_PROGRESS, None)}
    assert c.read_topics()[0].partitions == {0: (1000, 1001), 1: (1001, 1000)}


def test_api_reassignment_listed_then_done():
    c = cluster()
    assert reassign(c, {TP: (1002, 1003)}) == {TP: (ErrorCode.NONE, None)}
    assert listed(c) == {TP: ((1002, 1003, 1000, 1001), (1002, 1003), (1000, 1001))}
    assert listed(c, [("t", 1), ("nope", 3)]) == {}
    assert listed(c, [TP]) == listed(c)
    catch_up(c, (1000, 1001, 1002, 1003))
    assert listed(c) == {}
    assert c.read_topics()[0].partitions[0] == (1002, 1003)


def test_cancel_goes_back_to_the_origin_replicas_and_deletes_the_new_ones():
    c = cluster()
    reassign(c, {TP: (1000, 1002)})
    epoch = c.state(*TP).leader_epoch
    assert reassign(c, {TP: None}) == {TP: (ErrorCode.NONE, None)}
    topic = c.read_topics()[0]
    assert topic.partitions[0] == (1000, 1001) and 0 not in topic.adding_replicas
    assert c.stop_replica(1002)[TP].delete_partition
    assert (TP, 1002) not in c.ctx.replica_states
    state = c.state(*TP)
    assert (state.leader, state.isr) == (1000, (1000, 1001)) and state.leader_epoch > epoch
    assert listed(c) == {}


def test_new_target_starts_from_the_origin_replicas():
    c = cluster()
    reassign(c, {TP: (1002, 1003)})
    reassign(c, {TP: (1004,)})  # 1002 and 1003 never caught up: they are no origin
    topic = c.read_topics()[0]
    assert topic.partitions[0] == (1004, 1000, 1001)
    assert (topic.adding_replicas[0], topic.removing_replicas[0]) == ((1004,), (1000, 1001))
    for b in (1002, 1003):
        assert c.stop_replica(b)[TP].delete_partition
    assert c.ctx.replica_state((TP, 1004)) is R.NEW


def test_reordering_completes_at_once():
    c = cluster()
    assert reassign(c, {TP: (1001, 1000)}) == {TP: (ErrorCode.NONE, None)}
    assert c.read_topics()[0].partitions[0] == (1001, 1000)
    assert c.leader_and_isr(1001)[TP].replicas == (1001, 1000)  # announced, epoch bumped
    assert listed(c) == {}


def test_not_controller():
    c = cluster()
    c.run(ev.Resign())
    assert c.run(ev.ApiPartitionReassignment({TP: (1002,)}))[0].error == ErrorCode.NOT_CONTROLLER
    assert c.run(ev.ListPartitionReassignments())[0].error == ErrorCode.NOT_CONTROLLER


def zk_request(c: Cluster, targets: dict) -> None:
    """An operator writes /admin/reassign_partitions; the controller's watch reads it."""
    c.store.create(REASSIGN_PARTITIONS, encode_reassignment(targets), make_parents=True)
    c.run(read_watched_event(c.store, "reassign"))


def zk_node(c: Cluster) -> dict | None:
    if c.store.exists(REASSIGN_PARTITIONS) is None:
        return None
    event = read_watched_event(c.store, "reassign")
    return dict(event.targets)


def test_zk_reassignment_stays_until_done_and_failures_are_dropped():
    c = cluster()
    zk_request(c, {TP: (1002, 1003), ("t", 1): (1001, 1000), ("nope", 0): (1000,)})
    assert c.read_topics()[0].partitions == {0: (1002, 1003, 1000, 1001), 1: (1001, 1000)}
    assert zk_node(c) == {TP: (1002, 1003)}  # t-1 done at once, nope-0 failed
    c.run(read_watched_event(c.store, "reassign"))  # its own write fired the watch: nothing new
    assert c.requests == []
    catch_up(c, (1000, 1001, 1002, 1003))
    assert zk_node(c) is None
    assert c.read_topics()[0].partitions[0] == (1002, 1003)


def test_api_request_takes_a_partition_off_the_zk_reassignment():
    c = cluster()
    zk_request(c, {TP: (1002, 1003), ("t", 1): (1002, 1003)})
    reassign(c, {TP: (1004, 1000)})
    assert zk_node(c) == {("t", 1): (1002, 1003)}
    assert c.read_topics()[0].partitions[0] == (1004, 1000, 1001)


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
