"""The controller context's queries."""

from __future__ import annotations

from odradek.controller.commands import LiveBroker
from odradek.controller.controller_context import (
    ControllerContext,
    PartitionStateName,
    ReplicaAssignment,
    ReplicaStateName,
)
from odradek.metadata.layout import PartitionState


def context() -> ControllerContext:
    ctx = ControllerContext(controller_id=1, epoch=1)
    ctx.live_brokers = {b: LiveBroker(b, b) for b in (1, 2, 3)}
    ctx.shutting_down = {3}
    ctx.assignments = {
        ("a", 0): ReplicaAssignment((1, 2)),
        ("a", 1): ReplicaAssignment((2, 4)),
        ("b", 0): ReplicaAssignment((4, 5, 1), (1,), (5,)),
    }
    ctx.leadership = {
        ("a", 0): PartitionState(1, 0, (1, 2), 1),
        ("a", 1): PartitionState(4, 0, (4,), 1),
        ("b", 0): PartitionState(4, 0, (4, 5), 1),
    }
    return ctx


def test_brokers():
    ctx = context()
    assert ctx.live_broker_ids() == {1, 2}
    assert ctx.live_or_shutting_down_ids() == {1, 2, 3}
    assert ctx.is_replica_online(3, include_shutting_down=True)
    assert not ctx.is_replica_online(3)
    assert not ctx.is_replica_online(4, include_shutting_down=True)
    assert ctx.broker_epoch(2) == 2 and ctx.broker_epoch(9) == -1


def test_partitions_and_replicas():
    ctx = context()
    assert ctx.partitions_for_topic("a") == [("a", 0), ("a", 1)]
    assert ctx.replicas_on_brokers({4}) == [(("a", 1), 4), (("b", 0), 4)]
    assert ctx.partitions_on_broker(1) == [("a", 0), ("b", 0)]
    assert ctx.offline_replicas(("b", 0)) == (4, 5)
    ctx.assignments[("c", 0)] = ReplicaAssignment((2, 3))
    assert ctx.offline_replicas(("c", 0)) == (3,)  # in controlled shutdown: offline, as in Kafka
    assert ctx.partitions_with_offline_leader() == [("a", 1), ("b", 0)]
    ctx.topics_to_delete.add("b")
    assert ctx.partitions_with_offline_leader() == [("a", 1)]
    assert ctx.partitions_being_reassigned() == [("b", 0)]
    assert ctx.assignments[("b", 0)].target_replicas == (4, 1)


def test_unknown_states_are_non_existent():
    ctx = context()
    assert ctx.partition_state(("z", 0)) is PartitionStateName.NON_EXISTENT
    assert ctx.replica_state((("z", 0), 1)) is ReplicaStateName.NON_EXISTENT


def test_unclean_by_topic_or_default():
    ctx = context()
    assert not ctx.unclean_enabled("a")
    ctx.unclean_topics.add("a")
    assert ctx.unclean_enabled("a") and not ctx.unclean_enabled("b")
    ctx.unclean_default = True
    assert ctx.unclean_enabled("b")


def test_remove_topic_forgets_everything():
    ctx = context()
    ctx.replica_states[(("a", 0), 1)] = ReplicaStateName.ONLINE
    ctx.partition_states[("a", 0)] = PartitionStateName.ONLINE
    ctx.topics_to_delete.add("a")
    ctx.remove_topic("a")
    assert ctx.partitions_for_topic("a") == []
    assert not ctx.replica_states and not ctx.partition_states
    assert ("a", 0) not in ctx.leadership and "a" not in ctx.topics_to_delete


def test_copy_is_independent():
    ctx = context()
    snap = ctx.copy()
    ctx.shutting_down.add(1)
    ctx.leadership[("a", 0)] = PartitionState(2, 1, (2,), 1)
    ctx.live_brokers.pop(2)
    assert snap.shutting_down == {3} and snap.leadership[("a", 0)].leader == 1
    assert 2 in snap.live_brokers
    ctx.restore(snap)
    assert ctx.shutting_down == {3} and 2 in ctx.live_brokers
    ctx.shutting_down.add(9)
    assert snap.shutting_down == {3}


# -- the per-topic index of assignments and replica states ---------------------------------

from hypothesis import given  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from odradek.controller.controller_context import TopicIndexedDict  # noqa: E402

_tps = st.tuples(st.sampled_from("xyz"), st.integers(0, 3))
_keys = st.one_of(_tps, st.tuples(_tps, st.integers(1, 3)))
_ops = st.lists(st.tuples(st.sampled_from(["set", "del", "pop", "setdefault", "update",
                                           "popitem", "copy", "clear"]), _keys), max_size=40)


@given(_ops)
def test_the_topic_index_follows_every_change(ops):
    d, plain = TopicIndexedDict(), {}
    for op, key in ops:
        if op == "set":
            d[key] = plain[key] = 1
        elif op == "del" and key in plain:
            del d[key], plain[key]
        elif op == "pop":
            assert d.pop(key, None) == plain.pop(key, None)
        elif op == "setdefault":
            assert d.setdefault(key, 2) == plain.setdefault(key, 2)
        elif op == "update":
            d.update({key: 3})
            plain.update({key: 3})
        elif op == "popitem" and plain:
            k, _ = d.popitem()
            del plain[k]
        elif op == "copy":
            d = d.copy()
        elif op == "clear" and len(plain) > 6:
            d.clear()
            plain.clear()
        assert d == plain
        for topic in "xyz":
            expected = {k for k in plain if (k[0] if isinstance(k[0], str) else k[0][0]) == topic}
            assert d.keys_of(topic) == expected
        assert set(d.by_topic) == {k[0] if isinstance(k[0], str) else k[0][0] for k in plain}


def test_a_context_indexes_whatever_dict_it_is_given_and_its_copies():
    ctx = context()
    assert isinstance(ctx.assignments, TopicIndexedDict)
    assert ctx.partitions_for_topic("a") == [("a", 0), ("a", 1)]
    assert ctx.all_topics() == {"a", "b"}
    ctx.replica_states = {(("a", 0), 1): ReplicaStateName.ONLINE,
                          (("b", 0), 4): ReplicaStateName.ONLINE}
    copy = ctx.copy()
    ctx.remove_topic("a")
    assert ctx.all_topics() == {"b"} and list(ctx.replica_states) == [(("b", 0), 4)]
    assert copy.partitions_for_topic("a") == [("a", 0), ("a", 1)]
    ctx.restore(copy)
    assert ctx.replica_states.keys_of("a") == {(("a", 0), 1)}
