"""Topic deletion through the replica and partition state machines."""

from __future__ import annotations

import uuid

from odradek.controller import events as ev
from odradek.controller.commands import (
    EPOCH_DURING_DELETE,
    LEADER_DURING_DELETE,
    StopReplicaRequest,
    UpdateMetadataRequest,
)
from odradek.controller.controller_context import PartitionStateName as P
from odradek.controller.controller_context import ReplicaStateName as R
from odradek.metadata import layout
from odradek.metadata.layout import TopicAssignment

from tests.controller.harness import Cluster

T = TopicAssignment("doomed", uuid.UUID(int=5), {0: (1000, 1001), 1: (1001, 1002)})


def doomed_cluster() -> Cluster:
    c = Cluster(brokers=[1000, 1001, 1002])
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
