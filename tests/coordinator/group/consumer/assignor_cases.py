"""Builders, hypothesis strategies and invariant checks shared by the assignor tests."""

from __future__ import annotations

import uuid
from collections.abc import Mapping

from hypothesis import strategies as st

from odradek.coordinator.group.consumer.assignment import MemberSubscription, TopicMetadata

Assignment = dict[str, dict[uuid.UUID, frozenset[int]]]


def topic_id(n: int) -> uuid.UUID:
    return uuid.UUID(int=n)


def topic(n: int, partitions: int, racks: Mapping[int, frozenset[str]] | None = None) -> TopicMetadata:
    return TopicMetadata(topic_id(n), f"topic-{n}", partitions, dict(racks or {}))


def member(
    member_id: str,
    subscribed: set[uuid.UUID] | frozenset[uuid.UUID],
    assigned: Mapping[uuid.UUID, frozenset[int]] | None = None,
    *,
    instance_id: str | None = None,
    rack: str | None = None,
) -> MemberSubscription:
    return MemberSubscription(member_id, instance_id, rack, frozenset(subscribed), dict(assigned or {}))


def with_current(
    members: Mapping[str, MemberSubscription], assignment: Assignment
) -> dict[str, MemberSubscription]:
    """The members again, each with ``assignment``'s part as its current target."""
    return {
        m: MemberSubscription(s.member_id, s.instance_id, s.rack_id, s.subscribed_topic_ids,
                              assignment.get(m, {}))
        for m, s in members.items()
    }


def owners(assignment: Assignment) -> dict[tuple[uuid.UUID, int], str]:
    """(topic id, partition) -> member id; fails if a partition has two owners."""
    result: dict[tuple[uuid.UUID, int], str] = {}
    for member_id, topics in assignment.items():
        for t, partitions in topics.items():
            for p in partitions:
                assert (t, p) not in result, f"{t}-{p} assigned to {result[(t, p)]} and {member_id}"
                result[(t, p)] = member_id
    return result


def sizes(assignment: Assignment) -> dict[str, int]:
    return {m: sum(len(ps) for ps in topics.values()) for m, topics in assignment.items()}


def check_valid(
    members: Mapping[str, MemberSubscription],
    topics: Mapping[uuid.UUID, TopicMetadata],
    assignment: Assignment,
) -> None:
    """Every member is a key; every partition of a subscribed topic has exactly one owner,
    who subscribes to its topic; no empty partition sets; nothing outside the topics."""
    assert set(assignment) == set(members)
    subscribed = set().union(*(s.subscribed_topic_ids for s in members.values())) if members else set()
    expected = {(t, p) for t in subscribed for p in range(topics[t].num_partitions)}
    owned = owners(assignment)
    assert set(owned) == expected
    for member_id, assigned in assignment.items():
        for t, partitions in assigned.items():
            assert partitions, f"{member_id} has an empty set for {t}"
            assert isinstance(partitions, frozenset)
            assert t in members[member_id].subscribed_topic_ids, f"{member_id} got unsubscribed {t}"


def check_topic_balance(members: Mapping[str, MemberSubscription], assignment: Assignment) -> None:
    """For every topic, a subscriber holding one of its partitions has at most one
    partition more than any other subscriber of the topic."""
    size = sizes(assignment)
    subscribed = set().union(*(s.subscribed_topic_ids for s in members.values()))
    for t in subscribed:
        subscribers = [m for m, s in members.items() if t in s.subscribed_topic_ids]
        holders = [m for m in subscribers if assignment[m].get(t)]
        if holders:
            assert max(size[m] for m in holders) <= min(size[m] for m in subscribers) + 1, (t, size)


@st.composite
def groups(draw, *, homogeneous: bool | None = None, racks: bool = False, max_members: int = 8):
    """(members, topics) with an empty current assignment. ``homogeneous``: all members
    subscribe to the same topics (True), each to its own non-empty set (False), or either."""
    topic_count = draw(st.integers(1, 4))
    rack_names = ["r0", "r1", "r2"]
    topics = {}
    for n in range(1, topic_count + 1):
        partitions = draw(st.integers(0, 12))
        partition_racks = {}
        if racks:
            for p in range(partitions):
                partition_racks[p] = frozenset(draw(st.sets(st.sampled_from(rack_names), min_size=1, max_size=2)))
        topics[topic_id(n)] = topic(n, partitions, partition_racks)
    ids = sorted(topics)
    member_ids = draw(st.lists(st.text("abcdef", min_size=1, max_size=4), min_size=1,
                               max_size=max_members, unique=True))
    if homogeneous is None:
        homogeneous = draw(st.booleans())
    shared = frozenset(draw(st.sets(st.sampled_from(ids), min_size=1)))
    members = {}
    for m in member_ids:
        subscribed = shared if homogeneous else frozenset(draw(st.sets(st.sampled_from(ids), min_size=1)))
        rack = draw(st.sampled_from(rack_names + [None])) if racks else None
        members[m] = member(m, subscribed, rack=rack)
    return members, topics


@st.composite
def arbitrary_current(draw, members_and_topics):
    """Replace each member's current assignment by arbitrary partitions, including ones of
    unsubscribed or unknown topics, out of range, or also held by another member."""
    members, topics = draw(members_and_topics)
    ids = sorted(topics) + [topic_id(99)]
    assignment = {}
    for m in members:
        current = {}
        for t in draw(st.sets(st.sampled_from(ids), max_size=3)):
            partitions = frozenset(draw(st.sets(st.integers(0, 14), min_size=1, max_size=6)))
            current[t] = partitions
        assignment[m] = current
    return with_current(members, assignment), topics
