"""RangeAssignor (odradek/coordinator/group/consumer/range_assignor.py): Kafka's examples,
member order with instance ids, co-partitioning, and hypothesis properties."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from odradek.coordinator.group.consumer.assignment import PartitionAssignorError
from odradek.coordinator.group.consumer.range_assignor import RangeAssignor, member_order

from .assignor_cases import arbitrary_current, check_valid, groups, member, sizes, topic, topic_id, with_current

ASSIGNOR = RangeAssignor()
T1, T2, T3 = topic_id(1), topic_id(2), topic_id(3)


def test_name():
    assert ASSIGNOR.name == "range"


def test_unknown_subscribed_topic_is_an_error():
    with pytest.raises(PartitionAssignorError):
        ASSIGNOR.assign({"a": member("a", {T1})}, {})


def test_two_members_two_co_partitioned_topics():
    topics = {T1: topic(1, 3), T2: topic(2, 3)}
    members = {m: member(m, {T1, T2}) for m in ("M1", "M0")}
    assert ASSIGNOR.assign(members, topics) == {
        "M0": {T1: frozenset({0, 1}), T2: frozenset({0, 1})},
        "M1": {T1: frozenset({2}), T2: frozenset({2})},
    }


def test_more_members_than_partitions():
    topics = {T1: topic(1, 2)}
    members = {m: member(m, {T1}) for m in ("a", "b", "c")}
    assert ASSIGNOR.assign(members, topics) == {"a": {T1: frozenset({0})}, "b": {T1: frozenset({1})}, "c": {}}


def test_heterogeneous_subscriptions_split_each_topic_among_its_subscribers():
    topics = {T1: topic(1, 3), T2: topic(2, 2), T3: topic(3, 4)}
    members = {"a": member("a", {T1, T2}), "b": member("b", {T1, T3}), "c": member("c", {T2, T3})}
    assert ASSIGNOR.assign(members, topics) == {
        "a": {T1: frozenset({0, 1}), T2: frozenset({0})},
        "b": {T1: frozenset({2}), T3: frozenset({0, 1})},
        "c": {T2: frozenset({1}), T3: frozenset({2, 3})},
    }


def test_static_members_come_first_ordered_by_instance_id():
    members = {
        "m-a": member("m-a", {T1}),
        "m-b": member("m-b", {T1}, instance_id="i-2"),
        "m-c": member("m-c", {T1}, instance_id="i-1"),
    }
    assert member_order(members) == ["m-c", "m-b", "m-a"]


def test_static_member_keeps_its_ranges_under_a_new_member_id():
    topics = {T1: topic(1, 4), T2: topic(2, 4)}
    before = {"z1": member("z1", {T1, T2}, instance_id="i0"), "a1": member("a1", {T1, T2}, instance_id="i1")}
    after = {"b2": member("b2", {T1, T2}, instance_id="i0"), "a1": member("a1", {T1, T2}, instance_id="i1")}
    assert ASSIGNOR.assign(before, topics)["z1"] == ASSIGNOR.assign(after, topics)["b2"]


def test_current_assignment_is_ignored():
    topics = {T1: topic(1, 4)}
    members = {"a": member("a", {T1}, {T1: frozenset({2, 3})}), "b": member("b", {T1}, {T1: frozenset({0, 1})})}
    assert ASSIGNOR.assign(members, topics) == {"a": {T1: frozenset({0, 1})}, "b": {T1: frozenset({2, 3})}}


@given(arbitrary_current(groups()))
def test_any_input_gives_a_valid_assignment(case):
    members, topics = case
    check_valid(members, topics, ASSIGNOR.assign(members, topics))


@given(groups())
def test_each_topic_is_split_in_ranges_of_sizes_differing_by_at_most_one(case):
    members, topics = case
    result = ASSIGNOR.assign(members, topics)
    order = member_order(members)
    for t, metadata in topics.items():
        subscribers = [m for m in order if t in members[m].subscribed_topic_ids]
        if not subscribers:
            continue
        ranges = [sorted(result[m].get(t, ())) for m in subscribers]
        assert [p for r in ranges for p in r] == list(range(metadata.num_partitions))
        assert max(map(len, ranges)) - min(map(len, ranges)) <= 1
        assert all(len(a) >= len(b) for a, b in zip(ranges, ranges[1:]))


@given(groups(homogeneous=True))
def test_topics_with_equal_partition_counts_are_co_partitioned(case):
    members, topics = case
    result = ASSIGNOR.assign(members, topics)
    subscribed = sorted(next(iter(members.values())).subscribed_topic_ids)
    for t1 in subscribed:
        for t2 in subscribed:
            if topics[t1].num_partitions == topics[t2].num_partitions:
                for m in members:
                    assert result[m].get(t1) == result[m].get(t2)


@given(arbitrary_current(groups()), st.randoms())
def test_same_members_same_assignment(case, rnd):
    members, topics = case
    first = ASSIGNOR.assign(members, topics)
    shuffled = list(members.items())
    rnd.shuffle(shuffled)
    assert ASSIGNOR.assign(dict(shuffled), topics) == first
    assert ASSIGNOR.assign(with_current(members, first), topics) == first
    assert sum(sizes(first).values()) == sum(
        topics[t].num_partitions for t in set().union(*(s.subscribed_topic_ids for s in members.values()))
    )
