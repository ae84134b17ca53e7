"""Random sequences of broker failures (their sessions expiring, or their processes found gone
first: `events.BrokerProcessGone`), restarts, controlled shutdowns, follower catch-ups and
preferred elections; after every event the invariants hold (`harness.Cluster` checks the
store against the controller, leaders in ISRs, one leader per epoch; here also: clean
elections only pick previous ISR members, dead brokers leave ISRs, and a partition with a
live eligible ISR member has a live leader)."""

from __future__ import annotations

import uuid
from dataclasses import replace

from hypothesis import given, settings
from hypothesis import strategies as st

from odradek.controller import events as ev
from odradek.controller.assignment import assign_replicas_rack_unaware
from odradek.controller.controller_context import PartitionStateName as P
from odradek.metadata import layout
from odradek.metadata.layout import NO_LEADER, TopicAssignment

from tests.controller.harness import BROKERS, Cluster

OPS = (
    "kill", "start", "shutdown", "catch_up", "preferred", "controller_failover", "reassign",
    "delete", "answer", "direct_shrink", "notify", "process_gone",
)


def make_cluster(unclean: bool) -> Cluster:
    c = Cluster(unclean=unclean)
    parts = assign_replicas_rack_unaware(8, 3, BROKERS, fixed_start_index=1, replica_shift=2)
    parts[8] = [1002]  # one single-replica partition
    c.create_topic(TopicAssignment("t", uuid.UUID(int=3), parts))
    c.create_topic(TopicAssignment("u", uuid.UUID(int=4), {0: (1000, 1003), 1: (1004, 1001)}))
    return c


def answer_deletes(c: Cluster, pending: dict) -> None:
    """Live brokers answer the StopReplica-with-delete requests they received."""
    while pending:
        broker = min(pending)
        parts = tuple(sorted(pending.pop(broker)))
        if broker in c.live and parts:
            c.run(ev.TopicDeletionStopReplicaResponse(broker, deleted=parts))
            note_deletes(c, pending)


def note_deletes(c: Cluster, pending: dict) -> None:
    for broker in c.live:
        for tp, stop in c.stop_replica(broker).items():
            if stop.delete_partition:
                pending.setdefault(broker, set()).add(tp)


def catch_up(c: Cluster, broker: int) -> dict:
    """Broker ``broker``, where it leads, adds every live follower to the ISR; returns the
    ISRs asked for (a reassignment completing in the same event may elect from them)."""
    entries = []
    for tp, state in sorted(c.ctx.leadership.items()):
        if state.leader != broker:
            continue
        isr = tuple(r for r in c.ctx.replicas(tp) if r in c.live)
        if isr != state.isr:
            entries.append((tp, state.leader_epoch, isr, state.zk_version))
    c.run(ev.AlterPartition(broker, c.live[broker].epoch, tuple(entries)))
    return {tp: isr for tp, _, isr, _ in entries}


def direct_shrink(c: Cluster, broker: int) -> None:
    """ZooKeeper-mode leaders shrink their ISRs to themselves in the store directly, at the
    version they know; the controller hears of it later, or meets it as a conflict."""
    for tp in sorted(c.ctx.leadership):
        if c.store.exists(layout.partition_state_path(*tp)) is None:
            continue
        state = c.state(*tp)
        if state.leader == broker and len(state.isr) > 1:
            shrunk = replace(state, isr=(broker,))
            c.store.set(layout.partition_state_path(*tp), shrunk.to_json(), state.zk_version)


def failover(c: Cluster) -> None:
    from odradek.controller.controller import Controller
    from odradek.controller.snapshot import read_snapshot

    c.run(ev.Resign())
    data, version = c.store.get(layout.CONTROLLER_EPOCH)
    epoch = layout.decode_controller_epoch(data)
    c.store.set(layout.CONTROLLER_EPOCH, layout.encode_controller_epoch(epoch + 1), version)
    c.controller = Controller(min(c.live, default=1000))
    c.run(ev.Startup(read_snapshot(c.store, c.controller.broker_id, c.broker_epochs(), c.unclean)))


def apply(c: Cluster, op: str, broker: int, pending: dict) -> dict:
    """Run one operation; returns ISRs granted during it, by partition."""
    if op == "delete" and "u" in c.ctx.all_topics():
        c.run(ev.TopicDeletion(("u",)))
    elif op == "answer":
        answer_deletes(c, pending)
    elif op == "direct_shrink" and broker in c.live:
        direct_shrink(c, broker)
    elif op == "notify":  # the ISR change notification of the direct writes arrives
        c.run(ev.IsrChangeNotification({tp: c.state(*tp) for tp in c.ctx.leadership}))
    elif op == "kill" and broker in c.live:
        c.kill(broker)
    elif op == "process_gone" and broker in c.live and broker != c.controller.broker_id:
        stale = c.live.pop(broker)  # its sockets closed; its znode waits for the session
        c.run(ev.BrokerProcessGone(broker, stale.epoch))
        c.run(ev.BrokerChange(tuple(c.live.values()) + (stale,)))  # another change: still fenced
        c.store.delete(layout.broker_path(broker))  # the session expires
        c.run(ev.BrokerChange(tuple(c.live.values())))
    elif op == "start" and broker not in c.live:
        c.start(broker)
    elif op == "shutdown" and broker in c.live:
        c.shutdown(broker)
        c.kill(broker)
    elif op == "catch_up" and broker in c.live:
        return catch_up(c, broker)
    elif op == "preferred":
        c.run(ev.PreferredReplicaElection())
    elif op == "controller_failover":
        failover(c)
    elif op == "reassign":  # partition broker % 9 to the two brokers from ``broker`` on
        i = BROKERS.index(broker)
        target = (BROKERS[i], BROKERS[(i + 1) % len(BROKERS)])
        c.run(ev.PartitionReassignment({("t", broker % 9): target}))
    return {}


def check(c: Cluster, before: dict, unclean: bool) -> None:
    ctx = c.ctx
    eligible = set(c.live) - ctx.shutting_down
    for tp, state in ctx.leadership.items():
        dead_in_isr = [r for r in state.isr if r not in c.live]
        if dead_in_isr:
            assert state.isr == tuple(dead_in_isr) and len(state.isr) == 1, (tp, state)
            assert state.leader == NO_LEADER, (tp, state)
        if ctx.is_queued_for_deletion(tp[0]):
            continue  # no elections for a topic being deleted
        assert state.leader == NO_LEADER or state.leader in ctx.replicas(tp), (tp, state)
        if state.leader not in c.live:
            assert not set(state.isr) & eligible, (tp, state)
            assert ctx.partition_state(tp) is P.OFFLINE
        else:
            assert ctx.partition_state(tp) is P.ONLINE
        old = before.get(tp)
        if old is not None and state.leader not in (old.leader, NO_LEADER) and not unclean:
            assert state.leader in old.isr, (tp, old, state)  # clean: no acknowledged loss


@settings(max_examples=300, deadline=None)
@given(
    unclean=st.booleans(),
    steps=st.lists(st.tuples(st.sampled_from(OPS), st.sampled_from(BROKERS)), max_size=40),
)
def test_invariants_hold_after_every_event(unclean, steps):
    c = make_cluster(unclean)
    pending: dict[int, set] = {}
    for op, broker in steps:
        before = dict(c.ctx.leadership)
        for tp, isr in apply(c, op, broker, pending).items():
            before[tp] = replace(before[tp], isr=tuple(set(before[tp].isr) | set(isr)))
        note_deletes(c, pending)
        check(c, before, unclean)
    answer_deletes(c, pending)
    if c.controller.active and "u" in c.ctx.topics_to_delete and set(c.live) == set(BROKERS):
        assert False, "deletion stuck with every broker live"
