"""Regex subscriptions, ACLs and a coordinator reload (regex_resolution): a resolution keeps only
the topics the principal of the heartbeat that scheduled it may DESCRIBE; a reloaded coordinator
replays the resolved topics (checked when resolved) and resolves again only from a heartbeat,
which brings its principal's check; no other member's heartbeat widens a regex meanwhile."""

from __future__ import annotations

from odradek.coordinator.group.consumer.consumer_group_records import RegularExpressionRecord
from odradek.coordinator.group.consumer.regex_resolution import REGEX_BATCH_REFRESH_MIN_INTERVAL_MS
from tests.coordinator.group.consumer.consumer_harness import ConsumerShardHarness, Member


def only_orders_a(topic: str) -> bool:
    return topic == "orders-a"


def reloaded(h: ConsumerShardHarness) -> ConsumerShardHarness:
    fresh = ConsumerShardHarness()
    fresh.image = h.image
    fresh.clock.set(h.clock.milliseconds() + 1_000)  # the partition moves a second later
    for record in h.log:
        fresh.shard.replay(record)
    fresh.shard.on_loaded()
    return fresh


def wait(h: ConsumerShardHarness, ms: int, *members) -> None:
    """Let ``ms`` pass with the members heartbeating every 500 ms (within their session)."""
    while ms > 0:
        step = min(500, ms)
        h.tick(step)
        ms -= step
        for m in members:
            m.beat()
        h.tick()


def settle(*members, rounds: int = 3) -> None:
    for _ in range(rounds):
        for m in members:
            m.beat()
        members[0].h.tick()


def test_a_resolution_keeps_only_topics_the_heartbeats_principal_may_describe():
    h = ConsumerShardHarness()
    a_id, _ = h.topic("orders-a", 2), h.topic("orders-b", 4)
    a = Member(h, "g", [], subscribed_topic_regex="orders-.*", describable=only_orders_a)
    settle(a)
    assert set(h.group("g").target_of(a.member_id)) == {a_id}
    written = [r for r in h.log if isinstance(r, RegularExpressionRecord)]
    assert [r.resolved.topics for r in written] == [frozenset({"orders-a"})]


def test_a_reloaded_group_keeps_its_checked_resolution_until_a_heartbeat_resolves_again():
    h = ConsumerShardHarness()
    a_id, b_id = h.topic("orders-a", 2), h.topic("orders-b", 4)
    a = Member(h, "g", [], subscribed_topic_regex="orders-.*", describable=only_orders_a)
    settle(a)
    fresh = reloaded(h)
    assert fresh.group("g").resolved_regexes["orders-.*"].topics == {"orders-a"}
    b = Member(fresh, "g", ["orders-b"])
    b.beat()  # recomputes the target with a's replayed resolution
    group = fresh.group("g")
    assert b_id not in group.target_of(a.member_id)
    assert set(group.target_of(a.member_id)) == {a_id}
    assert set(group.target_of(b.member_id)) == {b_id}

    fresh.topic("orders-c", 2)
    a.h = fresh  # a heartbeats to the new coordinator, with its principal's check
    assert a.beat(full=True).error == 0
    wait(fresh, REGEX_BATCH_REFRESH_MIN_INTERVAL_MS + 500, a, b)
    assert len([r for r in fresh.log if isinstance(r, RegularExpressionRecord)]) == 1  # resolved again
    assert fresh.group("g").resolved_regexes["orders-.*"].topics == {"orders-a"}
    assert set(fresh.group("g").target_of(a.member_id)) == {a_id}


def test_a_reloaded_regex_without_acls_matches_new_topics_at_the_next_refresh():
    h = ConsumerShardHarness()
    a_id = h.topic("orders-a", 2)
    a = Member(h, "g", [], subscribed_topic_regex="orders-.*")
    settle(a)
    fresh = reloaded(h)
    c_id = fresh.topic("orders-c", 2)
    a.h = fresh
    a.beat(full=True)
    wait(fresh, REGEX_BATCH_REFRESH_MIN_INTERVAL_MS + 500, a)
    settle(a)
    assert set(fresh.group("g").target_of(a.member_id)) == {a_id, c_id}
