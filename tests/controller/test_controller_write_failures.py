"""The controller when its writes do not land: the orders of events a network partition makes.

Driven in `harness.Cluster`, whose edge does what `ControllerService` does when the store is
unreachable for a whole session timeout: the controller resigns (its context, which already
held the decisions, is dropped), and a controller elected afterwards reads the store afresh.
What must hold: nothing is answered from state that was never written, and after any cut the
next controller's picture is the store's (the harness checks one leader per epoch, leaders in
their ISRs, the controller's context against the store after every event)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from odradek.controller import events as ev
from odradek.controller.controller import Controller
from odradek.controller.snapshot import read_snapshot
from odradek.metadata import layout
from odradek.metadata.layout import NO_LEADER
from odradek.protocol.generated.error_codes import ErrorCode
from tests.controller.harness import BROKERS, Cluster, worked_example_topic

TP = ("topicA", 0)  # replicas (1000, 1004), led by 1000


def make_cluster() -> Cluster:
    c = Cluster()
    c.create_topic(worked_example_topic())
    return c


def shrink_request(c: Cluster, isr: tuple[int, ...]) -> ev.AlterPartition:
    """What the leader of `TP` sends to drop its follower (built from the store's state)."""
    state = c.state(*TP)
    return ev.AlterPartition(
        state.leader, c.live[state.leader].epoch, ((TP, state.leader_epoch, isr, state.zk_version),)
    )


def elect(c: Cluster, broker_id: int) -> None:
    """``broker_id`` wins the next election: a new controller epoch, the context from the store."""
    data, version = c.store.get(layout.CONTROLLER_EPOCH)
    epoch = layout.decode_controller_epoch(data)
    c.store.set(layout.CONTROLLER_EPOCH, layout.encode_controller_epoch(epoch + 1), version)
    c.controller = Controller(broker_id)
    c.run(ev.Startup(read_snapshot(c.store, broker_id, c.broker_epochs(), c.unclean)))


def test_a_write_that_fails_after_the_context_changed_is_never_answered_from_memory():
    c = make_cluster()
    before = c.state(*TP)
    assert before.isr == (1000, 1004)
    c.writes_left = 0  # the controller is cut from the store
    request = shrink_request(c, (1000,))
    c.run(request)
    assert c.write_failures == 1
    assert c.replies == []  # the edge answers NOT_CONTROLLER for a list cut short
    assert not c.controller.active
    # the leader sends the same AlterPartition again: the ISR it asked for was never written,
    # so it must not be told NONE
    c.run(request)
    (reply,) = c.replies
    assert reply.error is ErrorCode.NOT_CONTROLLER
    assert c.state(*TP) == before


def test_after_the_store_is_back_the_same_broker_rebuilds_and_writes_for_real():
    c = make_cluster()
    c.writes_left = 0
    request = shrink_request(c, (1000,))
    c.run(request)
    c.writes_left = None
    elect(c, 1000)  # re-elected at a new epoch: the context read from the store
    assert c.ctx.leadership[TP] == c.state(*TP)
    c.run(request)
    (reply,) = c.replies
    assert reply.error is ErrorCode.NONE and reply.partitions[0].error is ErrorCode.NONE
    assert c.state(*TP).isr == (1000,)


def test_alter_partition_resent_to_a_deposed_controller():
    """Broker 1001 won an election while controller 1000 was cut off; 1000 still thinks it is
    controller and gets the leader's AlterPartition: its write is refused on the controller
    epoch, it resigns, and the request sent again is refused too. The new controller takes it."""
    c = make_cluster()
    deposed = c.controller
    data, version = c.store.get(layout.CONTROLLER_EPOCH)
    c.store.set(layout.CONTROLLER_EPOCH, layout.encode_controller_epoch(2), version)
    request = shrink_request(c, (1000,))
    commands = deposed.handle(request)
    write = next(cmd for cmd in commands if hasattr(cmd, "epoch_zk_version"))
    assert write.epoch_zk_version == version  # guarded by the epoch it was elected at
    try:
        write.apply(c.store)
    except Exception:  # refused by version: the edge resigns
        deposed.handle(ev.Resign())
    else:
        raise AssertionError("a deposed controller's write landed")
    (reply,) = deposed.handle(request)
    assert reply.error is ErrorCode.NOT_CONTROLLER
    assert c.state(*TP).isr == (1000, 1004)
    c.controller = Controller(1001)
    c.run(ev.Startup(read_snapshot(c.store, 1001, c.broker_epochs(), c.unclean)))
    c.run(request)
    assert c.replies[0].partitions[0].error is ErrorCode.NONE
    assert c.state(*TP).isr == (1000,)


@settings(max_examples=40, deadline=None)
@given(writes=st.integers(min_value=0, max_value=12), successor=st.sampled_from(BROKERS[1:]))
def test_session_expiry_in_the_middle_of_a_failover(writes, successor):
    """Broker 1000 dies; the controller's elections of new leaders are cut after ``writes``
    writes (its session expired mid-event). The next controller, reading the store, finishes
    the job: every partition of the dead broker has a live leader from its ISR, one leader per
    leader epoch (the harness checks it after every event)."""
    c = make_cluster()
    led = {tp for tp, s in c.ctx.leadership.items() if s.leader == 1000}
    epochs = {tp: c.state(*tp).leader_epoch for tp in led}
    c.writes_left = writes
    c.kill(1000)
    c.writes_left = None
    if c.controller.active:  # all the writes landed before the cut
        assert c.write_failures == 0
    elect(c, successor)
    for tp in led:
        state = c.state(*tp)
        assert state.leader not in (1000, NO_LEADER), (tp, state)
        assert state.leader in state.isr and state.leader_epoch > epochs[tp]
        assert c.ctx.leadership[tp] == state


@settings(max_examples=30, deadline=None)
@given(writes=st.integers(min_value=0, max_value=6))
def test_a_cut_controlled_shutdown_is_answered_only_by_a_controller_that_wrote_it(writes):
    """A controlled shutdown cut after ``writes`` writes: no reply from the cut controller;
    the broker asks again, and the new controller's answer matches the store."""
    c = make_cluster()
    c.writes_left = writes
    reply = c.shutdown(1000)
    c.writes_left = None
    if c.write_failures:
        assert reply is None and not c.controller.active
        elect(c, 1001)
        reply = c.shutdown(1000)
    assert reply is not None and reply.error is ErrorCode.NONE
    for tp in c.ctx.all_partitions():
        state = c.state(*tp)
        if 1000 in c.ctx.replicas(tp) and len(c.ctx.replicas(tp)) > 1:
            assert state.leader != 1000 or tp in reply.remaining
