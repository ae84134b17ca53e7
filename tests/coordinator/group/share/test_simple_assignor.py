"""SimpleAssignor: every partition gets ceil(members / partitions) members, members' counts
differ by at most one, what a member had is kept where balance allows, same answer for the
same input."""

from __future__ import annotations

import random
import uuid

from odradek.coordinator.group.consumer.assignment import MemberSubscription, TopicMetadata
from odradek.coordinator.group.share.simple_assignor import SimpleAssignor, assign_scope

T1, T2 = uuid.UUID(int=1), uuid.UUID(int=2)
TOPICS = {T1: TopicMetadata(T1, "t1", 4, {}), T2: TopicMetadata(T2, "t2", 2, {})}


def members(spec, assigned=None):
    assigned = assigned or {}
    return {m: MemberSubscription(m, None, None, frozenset(ts), assigned.get(m, {})) for m, ts in spec.items()}


def counts(result):
    return sorted(sum(len(ps) for ps in a.values()) for a in result.values())


def holders(result, topic, partition):
    return sorted(m for m, a in result.items() if partition in a.get(topic, ()))


def test_fewer_members_than_partitions_each_partition_once():
    result = SimpleAssignor().assign(members({"a": [T1], "b": [T1], "c": [T1]}), TOPICS)
    assert counts(result) == [1, 1, 2]
    assert all(len(holders(result, T1, p)) == 1 for p in range(4))


def test_more_members_than_partitions_shares_partitions():
    spec = {m: [T2] for m in "abcde"}  # 5 members, 2 partitions: 3 members each, 6 assignments
    result = SimpleAssignor().assign(members(spec), TOPICS)
    assert counts(result) == [1, 1, 1, 1, 2]
    assert [len(holders(result, T2, p)) for p in range(2)] == [3, 3]


def test_scope_properties_under_random_histories():
    rng = random.Random(7)
    for _ in range(300):
        n, k = rng.randint(1, 9), rng.randint(1, 9)
        ids = [f"m{i}" for i in range(n)]
        parts = [("t", p) for p in range(k)]
        old = {m: {tp for tp in parts if rng.random() < 0.4} for m in ids}
        out = assign_scope(ids, parts, old)
        sharing = -(-n // k)
        assert all(sum(tp in out[m] for m in ids) == sharing for tp in parts)
        sizes = [len(out[m]) for m in ids]
        assert max(sizes) - min(sizes) <= 1 and sum(sizes) == sharing * k
        assert out == assign_scope(list(reversed(ids)), list(reversed(parts)), old)  # order-free


def test_sticky_when_a_member_joins():
    spec = {"a": [T1], "b": [T1]}
    first = SimpleAssignor().assign(members(spec), TOPICS)
    second = SimpleAssignor().assign(members({**spec, "c": [T1]}, first), TOPICS)
    moved = sum(len(first[m][T1] - second[m].get(T1, frozenset())) for m in "ab")
    assert moved == 1 and counts(second) == [1, 1, 2]


def test_heterogeneous_balances_each_topic_alone():
    result = SimpleAssignor().assign(members({"a": [T1], "b": [T2], "c": [T1, T2]}), TOPICS)
    assert sorted(len(result[m].get(T1, ())) for m in "ac") == [2, 2]
    assert sorted(len(result[m].get(T2, ())) for m in "bc") == [1, 1]
    assert T2 not in result["a"] and T1 not in result["b"]


def test_unassignable_partitions_are_left_out():
    result = SimpleAssignor().assign(members({"a": [T1]}), TOPICS, lambda t, p: p < 2)
    assert result == {"a": {T1: frozenset({0, 1})}}


def test_no_subscribed_topic_gives_empty_assignments():
    assert SimpleAssignor().assign(members({"a": [], "b": [uuid.uuid4()]}), TOPICS) == {"a": {}, "b": {}}
