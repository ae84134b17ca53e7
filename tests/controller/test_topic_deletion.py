"""Topic deletion through the replica and partition state machines."""

from __future__ import annotations

import uuid

from odradek.controller import events as ev
from odradek.controller.commands import (
    EPOCH_DURING_DELETE,
    DeleteZnode,
    LEADER_DURING_DELETE,
    StopReplicaRequest,
    UpdateMetadataRequest,
)
from odradek.controller.controller import Controller
from odradek.controller.controller_context import PartitionStateName as P
from odradek.controller.controller_context import ReplicaStateName as R
from odradek.controller.snapshot import read_snapshot
from odradek.metadata import layout
from odradek.metadata.layout import TopicAssignment
from odradek.protocol.generated.error_codes import ErrorCode

from tests.controller.harness import Cluster

T = TopicAssignment("doomed", uuid.UUID(int=5), {0: (1000, 1001), 1: (1001, 1002)})


def doomed_cluster(brokers=(1000, 1001, 1002)) -> Cluster:
    c = Cluster(brokers=list(brokers))
    c.create_topic(T)
    c.store.create(layout.topic_config_path("doomed"), layout.encode_config({}), make_parents=True)
    c.store.create(layout.delete_topic_path("doomed"))
    return c


def replica_states(c: Cluster) -> dict:
    return {r: s for r, s in c.ctx.replica_states.items() if r[0][0] == "doomed"}


def answer_all(c: Cluster) -> None:
    """Every broker answers the StopReplica requests of the last event: success."""
    stops = {b: c.stop_replica(b) for b in c.live}
    for b, parts in stops.items():
        if parts:
            c.run(ev.TopicDeletionStopReplicaResponse(b, deleted=tuple(sorted(parts))))


def test_deletion_starts_with_stop_replica_delete_on_every_replica():
    c = doomed_cluster()
    c.run(ev.TopicDeletion(("doomed",)))
    assert all(c.ctx.partition_state(("doomed", p)) is P.NON_EXISTENT for p in (0, 1))
    assert set(replica_states(c).values()) == {R.DELETION_STARTED}
    for b, parts in ((1000, {0}), (1001, {0, 1}), (1002, {1})):
        stops = c.stop_replica(b)
        assert {p for _, p in stops} == parts
        for stop in stops.values():
            assert stop.delete_partition and stop.leader_epoch == EPOCH_DURING_DELETE
    (um,) = c.sent(UpdateMetadataRequest, 1000)
    assert {s.leader for s in um.partition_states} == {LEADER_DURING_DELETE}


def test_deletion_completes_when_every_replica_answered():
    c = doomed_cluster()
    c.run(ev.TopicDeletion(("doomed",)))
    c.run(ev.TopicDeletionStopReplicaResponse(1000, deleted=(("doomed", 0),)))
    assert c.store.exists(layout.topic_path("doomed")) is not None  # others still pending
    c.run(ev.TopicDeletionStopReplicaResponse(1001, deleted=(("doomed", 0), ("doomed", 1))))
    c.run(ev.TopicDeletionStopReplicaResponse(1002, deleted=(("doomed", 1),)))
    for path in (
        layout.topic_path("doomed"),
        layout.topic_config_path("doomed"),
        layout.delete_topic_path("doomed"),
    ):
        assert c.store.exists(path) is None, path
    assert "doomed" not in c.ctx.all_topics()
    assert replica_states(c) == {}


def test_deletion_waits_for_a_dead_replica_and_resumes_when_it_returns():
    c = doomed_cluster()
    c.kill(1002)
    c.run(ev.TopicDeletion(("doomed",)))
    assert c.ctx.replica_state((("doomed", 1), 1002)) is R.DELETION_INELIGIBLE
    assert "doomed" in c.ctx.topics_ineligible_for_deletion
    answer_all(c)
    assert c.store.exists(layout.topic_path("doomed")) is not None
    c.start(1002)
    assert c.ctx.replica_state((("doomed", 1), 1002)) is R.DELETION_STARTED
    assert c.stop_replica(1002)[("doomed", 1)].delete_partition
    c.run(ev.TopicDeletionStopReplicaResponse(1002, deleted=(("doomed", 1),)))
    assert c.store.exists(layout.topic_path("doomed")) is None


def test_failed_stop_replica_marks_ineligible_and_a_restart_retries():
    c = doomed_cluster()
    c.run(ev.TopicDeletion(("doomed",)))
    c.run(ev.TopicDeletionStopReplicaResponse(1000, failed=(("doomed", 0),)))
    assert c.ctx.replica_state((("doomed", 0), 1000)) is R.DELETION_INELIGIBLE
    c.run(ev.TopicDeletionStopReplicaResponse(1001, deleted=(("doomed", 0), ("doomed", 1))))
    c.run(ev.TopicDeletionStopReplicaResponse(1002, deleted=(("doomed", 1),)))
    assert "doomed" in c.ctx.all_topics()
    c.kill(1000)
    c.start(1000)
    c.run(ev.TopicDeletionStopReplicaResponse(1000, deleted=(("doomed", 0),)))
    assert "doomed" not in c.ctx.all_topics()


def test_deleting_an_unknown_topic_removes_its_mark():
    c = Cluster(brokers=[1000])
    c.store.create(layout.delete_topic_path("ghost"))
    c.run(ev.TopicDeletion(("ghost",)))
    assert c.store.exists(layout.delete_topic_path("ghost")) is None


def test_a_topic_being_deleted_gets_no_leader_elections():
    c = doomed_cluster()
    c.run(ev.TopicDeletion(("doomed",)))
    before = c.state("doomed", 0).leader_epoch
    c.kill(1000)
    assert c.state("doomed", 0).leader_epoch == before
    assert not any(isinstance(r, StopReplicaRequest) and r.broker_id == 1000 for r in c.requests)


# -- a deletion waits for a reassignment of the topic ------------------------------------------


def alter_isr(c: Cluster, tp, isr) -> int:
    """The leader of ``tp`` asks for ``isr``; the error code of the answer."""
    state = c.state(*tp)
    c.run(ev.AlterPartition(state.leader, c.live[state.leader].epoch,
                            ((tp, state.leader_epoch, tuple(isr), state.zk_version),)))
    return c.replies[0].partitions[0].error


def reassigning_doomed() -> Cluster:
    """``doomed`` queued for deletion while both its partitions move to 1003."""
    c = doomed_cluster(brokers=(1000, 1001, 1002, 1003))
    c.run(ev.PartitionReassignment({("doomed", 0): (1000, 1003), ("doomed", 1): (1001, 1003)}))
    c.run(ev.TopicDeletion(("doomed",)))
    return c


def test_deletion_waits_while_the_topic_is_being_reassigned():
    c = reassigning_doomed()
    assert c.ctx.is_queued_for_deletion("doomed")
    assert "doomed" in c.ctx.topics_ineligible_for_deletion
    assert c.sent(StopReplicaRequest) == []
    assert "doomed" not in c.ctx.topics_deletion_started
    assert c.ctx.partition_state(("doomed", 0)) is P.ONLINE
    assert not set(replica_states(c).values()) & {R.DELETION_STARTED, R.DELETION_INELIGIBLE}
    assert c.store.exists(layout.delete_topic_path("doomed")) is not None


def test_deletion_resumes_when_the_last_reassignment_of_the_topic_completes():
    c = reassigning_doomed()
    assert alter_isr(c, ("doomed", 0), (1000, 1001, 1003)) == 0  # the ISR still moves
    assert c.read_topics()[0].partitions[0] == (1000, 1003)  # partition 0 done
    assert c.sent(StopReplicaRequest, 1000) == []  # partition 1 still moving: no deletion
    assert "doomed" in c.ctx.topics_ineligible_for_deletion
    assert alter_isr(c, ("doomed", 1), (1001, 1002, 1003)) == 0
    assert "doomed" not in c.ctx.topics_ineligible_for_deletion
    assert "doomed" in c.ctx.topics_deletion_started
    for b, parts in ((1000, {0}), (1001, {1}), (1003, {0, 1})):  # the new replicas too
        stops = c.stop_replica(b)
        assert {p for (_, p), s in stops.items() if s.delete_partition} == parts, b
    answer_all(c)
    assert "doomed" not in c.ctx.all_topics()
    assert c.store.exists(layout.topic_path("doomed")) is None
    assert c.store.exists(layout.delete_topic_path("doomed")) is None


def test_a_topic_whose_deletion_started_takes_no_isr_change():
    c = doomed_cluster()
    c.run(ev.TopicDeletion(("doomed",)))
    epoch = c.live[1000].epoch
    c.run(ev.AlterPartition(1000, epoch, ((("doomed", 0), 0, (1000,), 0),)))
    assert c.replies[0].partitions[0].error is ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


def test_a_new_controller_keeps_the_deletion_waiting_for_the_reassignment():
    c = reassigning_doomed()
    c.run(ev.Resign())
    _, version = c.store.get(layout.CONTROLLER_EPOCH)
    c.store.set(layout.CONTROLLER_EPOCH, layout.encode_controller_epoch(2), version)
    c.controller = Controller(1001)
    c.run(ev.Startup(read_snapshot(c.store, 1001, c.broker_epochs())))
    assert c.ctx.is_queued_for_deletion("doomed")
    assert "doomed" in c.ctx.topics_ineligible_for_deletion
    assert c.sent(StopReplicaRequest) == []
    assert alter_isr(c, ("doomed", 0), (1000, 1001, 1003)) == 0
    assert alter_isr(c, ("doomed", 1), (1001, 1002, 1003)) == 0
    answer_all(c)
    assert c.store.exists(layout.topic_path("doomed")) is None


def test_a_topic_queued_for_deletion_is_not_reassigned_anew():
    c = doomed_cluster()
    c.run(ev.TopicDeletion(("doomed",)))
    c.run(ev.ApiPartitionReassignment({("doomed", 0): (1000, 1002)}))
    ((_, error, _),) = c.replies[0].results
    assert error is ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


def test_completion_names_the_partition_znodes_it_deletes():
    """The topic's znode goes with the znodes of its partitions named (children first), so
    the writer deletes them without reading the subtree (``znode_writer``)."""
    c = doomed_cluster()
    c.run(ev.TopicDeletion(("doomed",)))
    c.run(ev.TopicDeletionStopReplicaResponse(1000, deleted=(("doomed", 0),)))
    c.run(ev.TopicDeletionStopReplicaResponse(1001, deleted=(("doomed", 0), ("doomed", 1))))
    commands = c.run(ev.TopicDeletionStopReplicaResponse(1002, deleted=(("doomed", 1),)))
    (topic,) = [w for w in commands if isinstance(w, DeleteZnode) and w.path == layout.topic_path("doomed")]
    assert topic.recursive
    assert topic.subtree == (
        layout.partition_state_path("doomed", 0), layout.partition_path("doomed", 0),
        layout.partition_state_path("doomed", 1), layout.partition_path("doomed", 1),
        layout.partitions_path("doomed"),
    )
