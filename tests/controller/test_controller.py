"""Controller event handling, end to end over the embedded store (`harness.Cluster` executes
the commands as the edge will and checks the invariants after every event)."""

from __future__ import annotations

import uuid

import pytest

from odradek.controller import events as ev
from odradek.controller.commands import (
    LeaderAndIsrRequest,
    SetZnode,
    written_partitions,
    StopReplicaRequest,
    UpdateMetadataRequest,
)
from odradek.controller.controller import Controller
from odradek.controller.controller_context import PartitionStateName as P
from odradek.controller.controller_context import ReplicaStateName as R
from odradek.controller.snapshot import read_snapshot
from odradek.metadata import layout
from odradek.metadata.errors import BadVersionError
from odradek.metadata.layout import PartitionState, TopicAssignment
from odradek.protocol.generated.error_codes import ErrorCode

from tests.controller.harness import BROKERS, Cluster, worked_example_topic

# topicA with start index 0 and follower shift 3 over 1000-1004 (see test_assignment.py)
TOPIC_A = {
    0: (1000, 1004), 1: (1001, 1000), 2: (1002, 1001), 3: (1003, 1002), 4: (1004, 1003),
    5: (1000, 1001), 6: (1001, 1002), 7: (1002, 1003), 8: (1003, 1004), 9: (1004, 1000),
}


@pytest.fixture
def cluster():
    c = Cluster()
    c.create_topic(worked_example_topic())
    return c


def topic(name, partitions, topic_id=7):
    return TopicAssignment(name, uuid.UUID(int=topic_id), partitions)


# -- topic creation ---------------------------------------------------------------------------


def test_worked_example_assignment():
    assert dict(worked_example_topic().partitions) == TOPIC_A


def test_new_topic_creation(cluster):
    ctx = cluster.ctx
    for p, replicas in TOPIC_A.items():
        state = cluster.state("topicA", p)
        assert (state.leader, state.isr, state.leader_epoch, state.controller_epoch) == (
            replicas[0], replicas, 0, 1,
        )
        assert ctx.partition_state(("topicA", p)) is P.ONLINE
        assert all(ctx.replica_state((("topicA", p), r)) is R.ONLINE for r in replicas)
    for b in BROKERS:
        lai = cluster.leader_and_isr(b)
        assert sorted(p for _, p in lai) == sorted(p for p, rs in TOPIC_A.items() if b in rs)
        assert all(s.is_new and s.replicas == TOPIC_A[s.partition] for s in lai.values())
        (request,) = cluster.sent(LeaderAndIsrRequest, b)
        assert request.topic_ids == (("topicA", uuid.UUID(int=42)),)
        assert {lb.broker_id for lb in request.live_leaders} == {s.leader for s in lai.values()}
        (um,) = cluster.sent(UpdateMetadataRequest, b)
        assert len(um.partition_states) == 10


def test_topic_without_id_gets_one_written_back():
    c = Cluster()
    c.controller.new_topic_id = lambda: uuid.UUID(int=99)
    c.create_topic(TopicAssignment("old", layout.ZERO_UUID, {0: (1000,)}))
    assert c.read_topics()[0].topic_id == uuid.UUID(int=99)
    assert c.ctx.topic_ids["old"] == uuid.UUID(int=99)


def test_partition_modifications_create_new_partitions(cluster):
    t = cluster.read_topics()[0]
    partitions = {**t.partitions, 10: (1001, 1002)}
    more = TopicAssignment("topicA", t.topic_id, partitions, zk_version=t.zk_version)
    cluster.store.set(layout.topic_path("topicA"), more.to_json())
    cluster.run(ev.PartitionModifications(more))
    assert cluster.state("topicA", 10).leader == 1001
    assert set(cluster.leader_and_isr(1002)) == {("topicA", 10)}


# -- broker failure ---------------------------------------------------------------------------


def test_broker_failure_moves_leaders_to_isr_members_and_shrinks_isrs(cluster):
    cluster.kill(1000)
    for p, replicas in TOPIC_A.items():
        state = cluster.state("topicA", p)
        assert 1000 not in state.isr
        if 1000 in replicas:
            assert state.leader == next(r for r in replicas if r != 1000)
            assert state.leader_epoch == 1
        else:
            assert state.leader_epoch == 0
    assert not cluster.sent(LeaderAndIsrRequest, 1000)
    lai = cluster.leader_and_isr(1004)
    assert lai[("topicA", 0)].leader == 1004 and lai[("topicA", 0)].leader_epoch == 1
    assert lai[("topicA", 9)].isr == (1004,)


def test_failure_with_no_isr_member_alive_leaves_partition_offline(cluster):
    cluster.kill(1000)
    cluster.kill(1004)
    tp = ("topicA", 0)  # replicas 1000, 1004: both dead
    assert cluster.ctx.partition_state(tp) is P.OFFLINE
    state = cluster.state(*tp)
    assert (state.leader, state.isr) == (-1, (1004,))
    cluster.start(1000)  # not in the ISR: a clean election must wait
    assert cluster.ctx.partition_state(tp) is P.OFFLINE
    cluster.start(1004)
    assert cluster.ctx.partition_state(tp) is P.ONLINE
    assert cluster.state(*tp).leader == 1004


def lagging_replica_cluster(unclean: bool) -> Cluster:
    """t-0 on [1000, 1001] with ISR [1000] only (1001 restarted and has not caught up)."""
    c = Cluster(unclean=unclean)
    c.create_topic(topic("t", {0: (1000, 1001)}))
    c.kill(1001)
    c.start(1001)
    assert c.state("t", 0).isr == (1000,)
    c.kill(1000)
    return c


def test_clean_election_refuses_an_out_of_sync_replica():
    c = lagging_replica_cluster(unclean=False)
    assert c.ctx.partition_state(("t", 0)) is P.OFFLINE
    assert c.state("t", 0).leader == -1
    assert c.controller.unclean_elections == []


def test_unclean_election_when_enabled():
    c = lagging_replica_cluster(unclean=True)
    state = c.state("t", 0)
    assert (state.leader, state.isr) == (1001, (1001,))
    assert c.controller.unclean_elections == [("t", 0)]


def test_bounced_broker_is_failed_then_started(cluster):
    cluster.live[1000] = type(cluster.live[1000])(1000, 99, cluster.live[1000].info)
    cluster.run(ev.BrokerChange(tuple(cluster.live.values())))
    assert cluster.state("topicA", 0).leader == 1004  # leadership moved on the bounce
    assert cluster.leader_and_isr(1000)  # and the new incarnation hears its partitions


# -- controlled shutdown and preferred election -----------------------------------------------


def test_controlled_shutdown_moves_leadership_away(cluster):
    cluster.requests.clear()
    reply = cluster.shutdown(1000)
    assert reply.error is ErrorCode.NONE and reply.remaining == ()
    # as Kafka's UpdateMetadata says, the replicas of a broker shutting down are offline
    said = {(s.topic, s.partition): s.offline_replicas
            for um in cluster.sent(UpdateMetadataRequest, 1004) for s in um.partition_states}
    assert said[("topicA", 0)] == (1000,)
    for p, replicas in TOPIC_A.items():
        state = cluster.state("topicA", p)
        assert state.leader != 1000 and 1000 not in state.isr
    stops = cluster.stop_replica(1000)
    assert {p for _, p in stops} == {1, 9}  # the partitions it followed
    assert not any(s.delete_partition for s in stops.values())
    assert cluster.leader_and_isr(1000)[("topicA", 0)].leader == 1004  # it learns it lost 0
    epochs = {p: cluster.state("topicA", p).leader_epoch for p in TOPIC_A}
    cluster.kill(1000)  # the actual exit changes no leader
    assert {p: cluster.state("topicA", p).leader_epoch for p in TOPIC_A} == epochs


def test_controlled_shutdown_keeps_partitions_without_another_isr_member():
    c = Cluster()
    c.create_topic(topic("t", {0: (1000, 1001), 1: (1000,)}))
    c.kill(1001)
    c.start(1001)
    reply = c.shutdown(1000)
    assert reply.remaining == (("t", 0),)  # t-1 has no other replica: it does not count


def test_controlled_shutdown_of_unknown_or_stale_broker(cluster):
    cluster.run(ev.ControlledShutdown(4242, 1))
    assert cluster.replies[0].error is ErrorCode.BROKER_NOT_AVAILABLE
    cluster.run(ev.ControlledShutdown(1000, 12345))
    assert cluster.replies[0].error is ErrorCode.STALE_BROKER_EPOCH


def alter(c: Cluster, broker: int, tp, isr):
    state = c.state(*tp)
    entry = (tp, state.leader_epoch, isr, state.zk_version)
    c.run(ev.AlterPartition(broker, c.live[broker].epoch, (entry,)))
    return c.replies[0]


def test_preferred_replica_election_after_catch_up(cluster):
    cluster.kill(1000)
    cluster.start(1000)
    tp = ("topicA", 0)
    reply = alter(cluster, 1004, tp, (1004, 1000))  # 1000 caught up
    assert reply.partitions[0].error is ErrorCode.NONE
    cluster.run(ev.PreferredReplicaElection())
    state = cluster.state(*tp)
    assert (state.leader, state.isr, state.leader_epoch) == (1000, (1004, 1000), 2)
    assert cluster.state("topicA", 1).leader == 1001  # 1000 not in its ISR: unchanged


# -- AlterPartition -----------------------------------------------------------------------------


def test_alter_partition_keeps_leader_epoch_and_bumps_version(cluster):
    tp = ("topicA", 0)
    reply = alter(cluster, 1000, tp, (1000,))
    result = reply.partitions[0]
    assert (result.error, result.isr, result.leader_epoch, result.zk_version) == (
        ErrorCode.NONE, (1000,), 0, 1,
    )
    assert cluster.state(*tp).isr == (1000,)
    assert {r.broker_id for r in cluster.sent(UpdateMetadataRequest)} == set(BROKERS)


def test_alter_partition_errors(cluster):
    tp = ("topicA", 0)
    cluster.run(ev.AlterPartition(1000, 555, ((tp, 0, (1000,), 0),)))
    assert cluster.replies[0].error is ErrorCode.STALE_BROKER_EPOCH
    assert alter(cluster, 1004, tp, (1004,)).partitions[0].error is ErrorCode.FENCED_LEADER_EPOCH
    epoch = cluster.live[1000].epoch
    cluster.run(ev.AlterPartition(1000, epoch, ((tp, 0, (1000,), 3),)))
    assert cluster.replies[0].partitions[0].error is ErrorCode.INVALID_UPDATE_VERSION
    cluster.run(ev.AlterPartition(1000, epoch, ((("nope", 0), 0, (1000,), 0),)))
    assert cluster.replies[0].partitions[0].error is ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    cluster.run(ev.AlterPartition(1000, epoch, ((tp, 0, (1004,), 0),)))
    assert cluster.replies[0].partitions[0].error is ErrorCode.INVALID_REQUEST


def test_inactive_controller_answers_not_controller():
    controller = Controller(1000)
    (reply,) = controller.handle(ev.AlterPartition(1000, 1, ()))
    assert reply.error is ErrorCode.NOT_CONTROLLER
    assert controller.handle(ev.BrokerChange(())) == []


# -- failover, fencing, conflicts ---------------------------------------------------------------


def test_failover_resumes_from_the_store(cluster):
    cluster.run(ev.Resign())
    assert not cluster.controller.active
    del cluster.live[1000]
    cluster.store.delete(layout.broker_path(1000))  # dies while nobody is controller
    data, version = cluster.store.get(layout.CONTROLLER_EPOCH)
    cluster.store.set(layout.CONTROLLER_EPOCH, layout.encode_controller_epoch(2), version)
    cluster.controller = Controller(1001)
    cluster.run(ev.Startup(read_snapshot(cluster.store, 1001, cluster.broker_epochs())))
    ctx = cluster.ctx
    assert (ctx.epoch, ctx.epoch_zk_version) == (2, version + 1)
    state = cluster.state("topicA", 0)
    assert (state.leader, state.isr, state.controller_epoch) == (1004, (1004,), 2)
    assert all(ctx.partition_state(tp) is P.ONLINE for tp in ctx.all_partitions())
    assert ctx.replica_state((("topicA", 0), 1000)) is R.OFFLINE
    for b in cluster.live:  # every live replica hears the state in force
        assert set(cluster.leader_and_isr(b)) == {
            ("topicA", p) for p, rs in TOPIC_A.items() if b in rs
        }


def test_failover_writes_each_state_znode_once(cluster):
    """A dead leader is taken out of the ISR and then replaced: one write per state znode
    (`RequestBatch.add_state_write`), and every LeaderAndIsr names the state the znode holds
    at the entry's version."""
    cluster.run(ev.Resign())
    del cluster.live[1000]
    cluster.store.delete(layout.broker_path(1000))
    data, version = cluster.store.get(layout.CONTROLLER_EPOCH)
    cluster.store.set(layout.CONTROLLER_EPOCH, layout.encode_controller_epoch(2), version)
    before = {p: cluster.state("topicA", p).zk_version for p in TOPIC_A}
    cluster.controller = Controller(1001)
    commands = cluster.run(ev.Startup(read_snapshot(cluster.store, 1001, cluster.broker_epochs())))
    paths = [c.path for c in commands if isinstance(c, SetZnode)]
    assert len(paths) == len(set(paths)) == sum(1000 in rs for rs in TOPIC_A.values())
    assert cluster.state("topicA", 0).zk_version == before[0] + 1  # led by 1000: moved once
    for b in cluster.live:
        for (t, p), entry in cluster.leader_and_isr(b).items():
            state = cluster.state(t, p)
            assert (entry.leader, entry.isr, entry.leader_epoch, entry.zk_version) == (
                state.leader, state.isr, state.leader_epoch, state.zk_version)


def test_deposed_controller_cannot_write(cluster):
    data, version = cluster.store.get(layout.CONTROLLER_EPOCH)
    cluster.store.set(layout.CONTROLLER_EPOCH, layout.encode_controller_epoch(2), version)
    with pytest.raises(BadVersionError):
        cluster.kill(1000)
    assert cluster.state("topicA", 0).leader == 1000  # untouched


def test_conflicting_state_write_is_redecided_on_fresh_state(cluster):
    """A leader shrank its ISR in the store itself (ZooKeeper-mode ISR updates) and the
    controller decided a controlled shutdown on the stale state: the write fails, the
    harness (as the edge will) reads back what the commands wrote and the controller handles
    the shutdown again from the context before it, with the fresh state."""
    tp = ("topicA", 0)
    state = cluster.state(*tp)
    shrunk = PartitionState(1000, 0, (1000,), 1)
    cluster.store.set(layout.partition_state_path(*tp), shrunk.to_json(), state.zk_version)
    commands = cluster.controller.handle(ev.ControlledShutdown(1000, cluster.live[1000].epoch))
    assert tp in written_partitions(commands)
    assert cluster.execute(commands) is False  # cut short, the event handled again
    assert cluster.conflicts == 1
    (reply,) = cluster.replies
    assert reply.remaining == (tp,)  # 1004 is not in the ISR any more: 1000 keeps leading
    assert cluster.ctx.leadership[tp] == cluster.state(*tp)
    assert (cluster.state(*tp).leader, cluster.state(*tp).isr) == (1000, (1000,))
    assert cluster.state("topicA", 5).leader == 1001  # the others moved as before


def test_isr_change_notification_adopts_newer_states(cluster):
    tp = ("topicA", 1)
    state = cluster.state(*tp)
    shrunk = PartitionState(1001, 0, (1001,), 1)
    cluster.store.set(layout.partition_state_path(*tp), shrunk.to_json(), state.zk_version)
    cluster.run(ev.IsrChangeNotification({tp: cluster.state(*tp)}))
    assert cluster.ctx.leadership[tp].isr == (1001,)
    (um,) = cluster.sent(UpdateMetadataRequest, 1003)
    assert [(s.partition, s.isr) for s in um.partition_states] == [(1, (1001,))]


def test_stop_replica_only_to_live_brokers(cluster):
    cluster.kill(1000)
    assert not [r for r in cluster.requests if r.broker_id == 1000]
    assert not cluster.sent(StopReplicaRequest)


def test_state_znodes_created_by_someone_else_are_adopted():
    """Today's ``ClusterMetadata.create_topic`` writes the partition states itself: the
    controller's create meets NodeExists, reads them back and adopts them."""
    c = Cluster()
    t = topic("pre", {0: (1001, 1002), 1: (1002, 1003)})
    c.store.create(layout.topic_path("pre"), t.to_json())
    first = PartitionState(1002, 0, (1002, 1001), 1)
    c.store.create(layout.partition_state_path("pre", 0), first.to_json(), make_parents=True)
    c.run(ev.TopicChange(tuple(c.read_topics())))
    assert c.conflicts == 1
    assert c.ctx.leadership[("pre", 0)] == first  # adopted as it was
    assert c.state("pre", 1).leader == 1002  # created
    assert c.leader_and_isr(1001)[("pre", 0)].is_new


# -- log directory failure ---------------------------------------------------------------------


def test_log_dir_failure_moves_only_the_failed_replicas_leadership(cluster):
    # 1000 leads topicA-0 (1000, 1004) and -5 (1000, 1001); its failed dir held only partition 0
    cluster.requests.clear()
    cluster.run(ev.LogDirEventNotification((1000,)))
    # Kafka's onBrokerLogDirFailure: LeaderAndIsr for each of its replicas, to learn which failed
    assert sorted(p for _, p in cluster.leader_and_isr(1000)) == sorted(
        p for p, rs in TOPIC_A.items() if 1000 in rs)
    cluster.run(ev.LeaderAndIsrResponseReceived(1000, (("topicA", 0),)))
    # every broker, 1000 itself included, hears that replica is offline (Metadata answers it)
    for b in BROKERS:
        said = {(s.topic, s.partition): s.offline_replicas
                for um in cluster.sent(UpdateMetadataRequest, b) for s in um.partition_states}
        assert said[("topicA", 0)] == (1000,), b
        assert said.get(("topicA", 5), ()) == ()
    moved = cluster.state("topicA", 0)
    assert (moved.leader, moved.isr, moved.leader_epoch) == (1004, (1004,), 1)
    kept = cluster.state("topicA", 5)
    assert (kept.leader, kept.isr, kept.leader_epoch) == (1000, (1000, 1001), 0)
    assert cluster.ctx.offline_replicas(("topicA", 0)) == (1000,)
    assert not cluster.ctx.is_replica_online(1000, tp=("topicA", 0))
    # the failed replica is not elected again while its broker runs; a restart forgets it
    cluster.kill(1004)
    assert cluster.state("topicA", 0).leader == -1
    cluster.kill(1000)
    cluster.start(1000)
    assert cluster.ctx.offline_replicas(("topicA", 0)) == (1004,)


def test_storage_errors_of_a_broker_without_a_failed_dir_change_nothing(cluster):
    # (a log a full disk could not create: the broker takes the role once it can)
    cluster.run(ev.LeaderAndIsrResponseReceived(1000, (("topicA", 0),)))
    assert cluster.state("topicA", 0).leader == 1000
    assert cluster.ctx.offline_replicas(("topicA", 0)) == ()


def test_alter_partition_refuses_to_add_an_ineligible_replica(cluster):
    """Kafka's ineligible replicas: a broker shutting down, or gone, does not join an ISR (the
    leader may still see it fetch for a moment after its controlled shutdown)."""
    tp = ("topicA", 0)  # replicas (1000, 1004), led by 1000
    assert alter(cluster, 1000, tp, (1000,)).partitions[0].error is ErrorCode.NONE
    reply = cluster.shutdown(1004)
    assert reply.error is ErrorCode.NONE
    result = alter(cluster, 1000, tp, (1000, 1004)).partitions[0]
    assert result.error is ErrorCode.INELIGIBLE_REPLICA
    assert cluster.state(*tp).isr == (1000,)
    cluster.kill(1004)
    assert alter(cluster, 1000, tp, (1000, 1004)).partitions[0].error is ErrorCode.INELIGIBLE_REPLICA
    cluster.start(1004)
    assert alter(cluster, 1000, tp, (1000, 1004)).partitions[0].error is ErrorCode.NONE
