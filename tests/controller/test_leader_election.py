"""Kafka's election algorithms, each case by hand."""

from __future__ import annotations

import pytest

from odradek.controller.commands import LiveBroker
from odradek.controller.controller_context import ControllerContext, ReplicaAssignment
from odradek.controller.leader_election import (
    ElectionStrategy,
    controlled_shutdown_leader,
    elect,
    initial_leader_and_isr,
    new_leader_and_isr,
    offline_leader,
    preferred_leader,
    reassign_leader,
)
from odradek.metadata.layout import PartitionState

TP = ("t", 0)


def context(live, replicas=(1000, 1004, 1001), shutting_down=(), unclean=False, epoch=5):
    ctx = ControllerContext(controller_id=1000, epoch=epoch, epoch_zk_version=4)
    ctx.live_brokers = {b: LiveBroker(b, 1) for b in live}
    ctx.shutting_down = set(shutting_down)
    ctx.assignments[TP] = ReplicaAssignment(tuple(replicas))
    ctx.unclean_default = unclean
    return ctx


def state(leader, isr, epoch=3, zk_version=7):
    return PartitionState(leader, epoch, tuple(isr), 2, zk_version)


# -- the algorithms -----------------------------------------------------------------------------


def test_offline_picks_first_live_isr_member_in_assignment_order():
    assert offline_leader((1, 2, 3), (3, 2), {2, 3}, False) == (2, False)
    assert offline_leader((1, 2, 3), (3,), {2, 3}, False) == (3, False)


def test_offline_without_live_isr_member():
    assert offline_leader((1, 2, 3), (1,), {2, 3}, False) == (None, False)
    assert offline_leader((1, 2, 3), (1,), {3, 2}, True) == (2, True)
    assert offline_leader((1, 2, 3), (1,), set(), True) == (None, False)


def test_reassign_preferred_and_controlled_shutdown():
    assert reassign_leader((4, 5, 6), (5, 6), {4, 5, 6}) == 5
    assert reassign_leader((4, 5), (1,), {4, 5}) is None
    assert preferred_leader((1, 2), (1, 2), {1, 2}) == 1
    assert preferred_leader((1, 2), (2,), {1, 2}) is None  # preferred out of the ISR
    assert preferred_leader((1, 2), (1, 2), {2}) is None  # preferred dead
    assert controlled_shutdown_leader((1, 2, 3), (1, 2, 3), {1, 2, 3}, {1}) == 2
    assert controlled_shutdown_leader((1, 2), (1,), {1, 2}, {1}) is None


# -- elections in context -----------------------------------------------------------------------


def test_worked_example_offline_clean():
    ctx = context(live={1004, 1001})
    result = elect(ctx, TP, state(1000, (1000, 1004)), ElectionStrategy.OFFLINE)
    new = result.leader_and_isr
    assert (new.leader, new.isr, new.leader_epoch) == (1004, (1004,), 4)
    assert new.controller_epoch == 5
    assert new.zk_version == 7  # the version the conditional write expects
    assert not result.unclean
    assert result.recipients == (1004, 1001)


def test_worked_example_offline_no_isr_alive():
    ctx = context(live={1001})
    result = elect(ctx, TP, state(1000, (1000, 1004)), ElectionStrategy.OFFLINE)
    assert result.leader_and_isr is None


def test_worked_example_offline_unclean_by_topic_config_or_strategy():
    for ctx, strategy in (
        (context(live={1001}, unclean=True), ElectionStrategy.OFFLINE),
        (context(live={1001}), ElectionStrategy.OFFLINE_UNCLEAN),
    ):
        result = elect(ctx, TP, state(1000, (1000, 1004)), strategy)
        assert result.unclean
        new = result.leader_and_isr
        assert (new.leader, new.isr, new.leader_epoch) == (1001, (1001,), 4)


def test_offline_isr_keeps_only_live_members():
    ctx = context(live={1004, 1001})
    result = elect(ctx, TP, state(1000, (1000, 1004, 1001)), ElectionStrategy.OFFLINE)
    assert result.leader_and_isr.isr == (1004, 1001)


def test_offline_does_not_elect_a_shutting_down_broker():
    ctx = context(live={1004, 1001}, shutting_down={1004})
    result = elect(ctx, TP, state(1000, (1000, 1004, 1001)), ElectionStrategy.OFFLINE)
    assert result.leader_and_isr.leader == 1001


def test_controlled_shutdown_moves_leader_and_shrinks_isr():
    ctx = context(live={1000, 1004, 1001}, shutting_down={1000})
    result = elect(ctx, TP, state(1000, (1000, 1004, 1001)), ElectionStrategy.CONTROLLED_SHUTDOWN)
    new = result.leader_and_isr
    assert (new.leader, new.isr, new.leader_epoch) == (1004, (1004, 1001), 4)
    assert 1000 in result.recipients  # it still hears that it is no longer leader


def test_controlled_shutdown_without_other_isr_member():
    ctx = context(live={1000, 1004, 1001}, shutting_down={1000})
    result = elect(ctx, TP, state(1000, (1000,)), ElectionStrategy.CONTROLLED_SHUTDOWN)
    assert result.leader_and_isr is None


def test_preferred_election_keeps_isr():
    ctx = context(live={1000, 1004, 1001})
    result = elect(ctx, TP, state(1004, (1004, 1000)), ElectionStrategy.PREFERRED)
    new = result.leader_and_isr
    assert (new.leader, new.isr, new.leader_epoch) == (1000, (1004, 1000), 4)


def test_reassign_elects_from_target_replicas():
    ctx = context(live={1000, 1001, 1002, 1003}, replicas=(1000, 1001, 1002, 1003))
    ctx.assignments[TP] = ReplicaAssignment((1000, 1001, 1002, 1003), (1002, 1003), (1000, 1001))
    result = elect(ctx, TP, state(1000, (1000, 1001, 1002, 1003)), ElectionStrategy.REASSIGN)
    assert result.leader_and_isr.leader == 1002
    assert result.recipients == (1002, 1003)


def test_initial_leader_and_isr():
    ctx = context(live={1004, 1001})
    first = initial_leader_and_isr(ctx, TP)
    assert (first.leader, first.isr, first.leader_epoch, first.controller_epoch) == (
        1004, (1004, 1001), 0, 5,
    )
    assert initial_leader_and_isr(context(live=set()), TP) is None


def test_new_leader_must_be_in_isr():
    with pytest.raises(ValueError):
        new_leader_and_isr(state(1, (1, 2)), 3, (1, 2), 1)
