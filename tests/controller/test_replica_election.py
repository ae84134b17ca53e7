"""Admin-requested elections (`replica_election`, the ElectLeaders API), end to end over the
embedded store: the harness executes the commands and checks the invariants after each."""

from __future__ import annotations

import uuid

import pytest

from odradek.controller import events as ev
from odradek.controller.commands import ElectLeadersReply, LeaderAndIsrRequest
from odradek.controller.controller import Controller
from odradek.controller.controller_context import PartitionStateName as P
from odradek.controller.replica_election import ElectionType
from odradek.metadata.layout import TopicAssignment
from odradek.protocol.generated.error_codes import ErrorCode

from tests.controller.harness import Cluster, worked_example_topic

PREFERRED, UNCLEAN = int(ElectionType.PREFERRED), int(ElectionType.UNCLEAN)


@pytest.fixture
def cluster():
    c = Cluster()
    c.create_topic(worked_example_topic())
    return c


def elect(c: Cluster, partitions, election_type=PREFERRED) -> dict:
    """``{(topic, partition): (error, leader)}`` of one ElectLeaders event."""
    c.run(ev.ElectLeaders(None if partitions is None else tuple(partitions), election_type))
    (reply,) = c.replies
    assert isinstance(reply, ElectLeadersReply) and reply.error is ErrorCode.NONE
    return {(o.topic, o.partition): (o.error, o.leader) for o in reply.partitions}


def catch_up(c: Cluster, tp, isr) -> None:
    """The leader of ``tp`` adds the returned replica to the ISR (AlterPartition)."""
    state = c.state(*tp)
    c.run(ev.AlterPartition(state.leader, c.live[state.leader].epoch,
                            ((tp, state.leader_epoch, tuple(isr), state.zk_version),)))


def test_preferred_moves_back_only_where_needed_and_possible(cluster):
    cluster.kill(1000)
    cluster.start(1000)
    catch_up(cluster, ("topicA", 0), (1004, 1000))  # 1000 back in t-0's ISR, not t-5's
    out = elect(cluster, [("topicA", 0), ("topicA", 1), ("topicA", 5)])
    assert out[("topicA", 0)] == (ErrorCode.NONE, 1000)
    assert out[("topicA", 1)] == (ErrorCode.ELECTION_NOT_NEEDED, -1)  # 1001 leads already
    assert out[("topicA", 5)][0] is ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE  # 1000 out of sync
    state = cluster.state("topicA", 0)
    assert (state.leader, state.isr, state.leader_epoch) == (1000, (1004, 1000), 2)
    assert cluster.leader_and_isr(1000)[("topicA", 0)].leader == 1000
    assert cluster.state("topicA", 5).leader == 1001


def test_all_partitions_answers_each_known_partition(cluster):
    cluster.kill(1000)
    cluster.start(1000)
    catch_up(cluster, ("topicA", 9), (1004, 1000))  # t-9 is [1004, 1000]: no move needed
    catch_up(cluster, ("topicA", 0), (1004, 1000))
    out = elect(cluster, None)
    assert set(out) == {("topicA", p) for p in range(10)}
    assert out[("topicA", 0)] == (ErrorCode.NONE, 1000)
    assert out[("topicA", 9)] == (ErrorCode.ELECTION_NOT_NEEDED, -1)


def test_unknown_partitions_and_topics(cluster):
    out = elect(cluster, [("topicA", 10), ("nope", 0), ("topicA", 2)])
    assert out[("topicA", 10)][0] is ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert out[("nope", 0)][0] is ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert out[("topicA", 2)][0] is ErrorCode.ELECTION_NOT_NEEDED


def test_topic_being_deleted(cluster):
    cluster.run(ev.TopicDeletion(("topicA",)))  # waits for StopReplica answers: stays queued
    assert elect(cluster, [("topicA", 0)])[("topicA", 0)][0] is ErrorCode.INVALID_TOPIC_EXCEPTION


def offline_partition_cluster() -> Cluster:
    """t-0 on [1000, 1001], ISR [1000] only; then 1000 dies: no leader (clean elections)."""
    c = Cluster(unclean=False)
    c.create_topic(TopicAssignment("t", uuid.UUID(int=7), {0: (1000, 1001)}))
    c.kill(1001)
    c.start(1001)
    c.kill(1000)
    assert c.ctx.partition_state(("t", 0)) is P.OFFLINE and c.state("t", 0).leader == -1
    return c


def test_unclean_election_elects_an_out_of_sync_replica():
    c = offline_partition_cluster()
    assert elect(c, [("t", 0)])[("t", 0)][0] is ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE
    assert elect(c, [("t", 0)], UNCLEAN)[("t", 0)] == (ErrorCode.NONE, 1001)
    assert c.controller.unclean_elections == [("t", 0)]
    state = c.state("t", 0)
    assert (state.leader, state.isr) == (1001, (1001,))
    assert c.ctx.partition_state(("t", 0)) is P.ONLINE
    assert c.leader_and_isr(1001)[("t", 0)].leader == 1001
    assert elect(c, [("t", 0)], UNCLEAN)[("t", 0)] == (ErrorCode.ELECTION_NOT_NEEDED, -1)


def test_unclean_election_without_a_live_replica():
    c = offline_partition_cluster()
    c.kill(1001)
    out = elect(c, [("t", 0)], UNCLEAN)
    assert out[("t", 0)][0] is ErrorCode.ELIGIBLE_LEADERS_NOT_AVAILABLE
    assert c.state("t", 0).leader == -1
    assert not c.sent(LeaderAndIsrRequest)


def test_unclean_election_with_a_live_leader_is_not_needed(cluster):
    out = elect(cluster, [("topicA", 0), ("topicA", 3)], UNCLEAN)
    assert {e for e, _ in out.values()} == {ErrorCode.ELECTION_NOT_NEEDED}
    assert cluster.controller.unclean_elections == []


def test_inactive_controller_answers_not_controller():
    (reply,) = Controller(1000).handle(ev.ElectLeaders(None, PREFERRED))
    assert isinstance(reply, ElectLeadersReply) and reply.error is ErrorCode.NOT_CONTROLLER
