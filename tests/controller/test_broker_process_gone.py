"""`events.BrokerProcessGone`: a broker whose process is gone fails at once (Kafka's
``onBrokerFailure``), while its znode still lists it, and stays fenced until that znode goes
or the broker registers anew. A broker that found a registration gone before it took the
controller's seat fails it in its failover (`events.ClusterSnapshot.fenced_registrations`).

``cluster.live`` (`harness.Cluster`) is what the controller must take as live (the harness
checks every UpdateMetadata against it): `gone` takes the broker out of it but leaves its
znode, which the BrokerChange events here then list, as the store's watch would read it."""

from __future__ import annotations

import pytest

from odradek.controller import events as ev
from odradek.controller.commands import LeaderAndIsrRequest, LiveBroker, UpdateMetadataRequest
from odradek.controller.controller import Controller
from odradek.controller.snapshot import read_snapshot
from odradek.metadata import layout

from tests.controller.harness import Cluster, broker, worked_example_topic


@pytest.fixture
def cluster():
    c = Cluster()
    c.create_topic(worked_example_topic())
    return c


def gone(cluster: Cluster, broker_id: int) -> LiveBroker:
    """The process of ``broker_id`` is gone; its znode stays. Returns its stale registration."""
    stale = cluster.live.pop(broker_id)
    cluster.run(ev.BrokerProcessGone(broker_id, stale.epoch))
    return stale


def broker_change(cluster: Cluster, *stale: LiveBroker) -> list:
    """``/brokers/ids`` read again: the live brokers and the ``stale`` znodes still there."""
    return cluster.run(ev.BrokerChange(tuple(cluster.live.values()) + stale))


def test_leaders_move_to_isr_members_while_the_znode_remains(cluster):
    gone(cluster, 1000)
    assert cluster.state("topicA", 0).leader == 1004  # replicas (1000, 1004)
    assert cluster.state("topicA", 5).leader == 1001  # replicas (1000, 1001)
    for p in range(10):
        assert 1000 not in cluster.state("topicA", p).isr
    assert 1000 not in cluster.ctx.live_brokers
    assert cluster.store.exists(layout.broker_path(1000)) is not None
    assert not cluster.sent(LeaderAndIsrRequest, 1000)
    assert cluster.leader_and_isr(1004)[("topicA", 0)].leader == 1004
    assert cluster.sent(UpdateMetadataRequest)  # without 1000: the harness checks it


def test_the_stale_registration_stays_fenced_and_its_expiry_changes_nothing(cluster):
    stale = gone(cluster, 1000)
    states = {p: cluster.state("topicA", p) for p in range(10)}
    # another broker bounces: /brokers/ids is read again, 1000's old znode still in it
    cluster.live[1003] = broker(1003, next(cluster.epochs))
    broker_change(cluster, stale)
    assert 1000 not in cluster.ctx.live_brokers
    assert not cluster.sent(LeaderAndIsrRequest, 1000)
    assert cluster.state("topicA", 0).leader == 1004
    # the session expires: the znode goes, and the watch finds the broker gone already
    cluster.store.delete(layout.broker_path(1000))
    states = {p: cluster.state("topicA", p) for p in range(10)}
    broker_change(cluster)
    assert not cluster.sent(LeaderAndIsrRequest)
    assert {p: cluster.state("topicA", p) for p in range(10)} == states
    assert cluster.ctx.fenced_registrations == {}


def test_a_new_registration_ends_the_fence(cluster):
    stale = gone(cluster, 1000)
    cluster.live[1000] = broker(1000, next(cluster.epochs))  # restarted: registered anew
    broker_change(cluster)
    assert cluster.ctx.live_brokers[1000].epoch != stale.epoch
    assert cluster.leader_and_isr(1000)  # it hears its partitions again, as a follower
    assert cluster.ctx.fenced_registrations == {}


def test_a_stale_report_changes_nothing(cluster):
    live = cluster.live[1000]
    assert cluster.run(ev.BrokerProcessGone(1000, live.epoch + 100)) == []
    assert 1000 in cluster.ctx.live_brokers
    assert cluster.state("topicA", 0).leader == 1000
    gone(cluster, 1000)
    assert cluster.run(ev.BrokerProcessGone(1000, live.epoch)) == []  # handled once


def test_the_fence_is_part_of_the_context_a_conflict_restores(cluster):
    """A conflict restores the context from before the event (`events.LeaderAndIsrConflict`)
    and handles the event again: the fence must be in that context, not beside it."""
    before = cluster.ctx.copy()
    stale = gone(cluster, 1000)
    assert before.fenced_registrations == {}
    assert cluster.ctx.fenced_registrations == {1000: stale.epoch}
    assert cluster.ctx.copy().fenced_registrations == {1000: stale.epoch}


def failover_to_1001(cluster: Cluster, epoch_1000: int, fenced: dict[int, int]) -> list:
    """The controller 1000 resigns (or its process is gone; its znode at ``epoch_1000`` stays):
    1001 takes the seat, knowing ``fenced`` gone itself (`controller_liveness`)."""
    cluster.run(ev.Resign())
    data, version = cluster.store.get(layout.CONTROLLER_EPOCH)
    cluster.store.set(layout.CONTROLLER_EPOCH, layout.encode_controller_epoch(2), version)
    cluster.controller = Controller(1001)
    epochs = {**cluster.broker_epochs(), 1000: epoch_1000}  # the znode read
    return cluster.run(ev.Startup(read_snapshot(cluster.store, 1001, epochs, False, fenced)))


def test_a_registration_found_gone_before_the_seat_fails_in_the_failover(cluster):
    stale = cluster.live.pop(1000)  # what the harness checks every UpdateMetadata against
    failover_to_1001(cluster, stale.epoch, {1000: stale.epoch})
    assert 1000 not in cluster.ctx.live_brokers and cluster.ctx.fenced_registrations == {1000: stale.epoch}
    assert cluster.state("topicA", 0).leader == 1004  # replicas (1000, 1004): moved at once
    for p in range(10):
        assert 1000 not in cluster.state("topicA", p).isr
    assert not cluster.sent(LeaderAndIsrRequest, 1000)
    assert cluster.store.exists(layout.broker_path(1000)) is not None


def test_a_fence_for_another_registration_is_ignored_at_the_failover(cluster):
    live = cluster.live[1000]
    failover_to_1001(cluster, live.epoch, {1000: live.epoch + 100})  # re-registered since it was found gone
    assert cluster.ctx.live_brokers[1000].epoch == live.epoch and cluster.ctx.fenced_registrations == {}
    assert cluster.state("topicA", 0).leader == 1000
