"""A regex member's topics after a coordinator reload (consumer_group_manager._resolve): the
DESCRIBE check of its principal is not stored, so until it heartbeats again its regex matches
only the topics of its target and current assignment; a topic it may not describe is never
matched for it, whoever else's heartbeat recomputes the assignment first."""

from __future__ import annotations

from tests.coordinator.group.consumer.consumer_harness import ConsumerShardHarness, Member


def only_orders_a(topic: str) -> bool:
    return topic == "orders-a"


def test_a_reloaded_regex_member_matches_no_topic_it_may_not_describe_until_it_heartbeats():
    h = ConsumerShardHarness()
    a_id, b_id = h.topic("orders-a", 2), h.topic("orders-b", 4)
    a = Member(h, "g", [], subscribed_topic_regex="orders-.*", describable=only_orders_a)
    for _ in range(2):
        a.beat()
    assert set(h.group("g").target_of(a.member_id)) == {a_id}

    fresh = ConsumerShardHarness()
    fresh.image = h.image
    for record in h.log:
        fresh.shard.replay(record)
    fresh.shard.on_loaded()
    b = Member(fresh, "g", ["orders-b"])
    b.beat()  # recomputes the target with a's topics as the reloaded coordinator sees them
    group = fresh.group("g")
    assert b_id not in group.target_of(a.member_id), "orders-b matched without a's DESCRIBE check"
    assert set(group.target_of(a.member_id)) == {a_id}
    assert set(group.target_of(b.member_id)) == {b_id}

    a.h = fresh  # a heartbeats to the new coordinator, with its principal's check
    assert a.beat(full=True).error == 0
    assert b_id not in fresh.group("g").target_of(a.member_id)


def test_a_reloaded_regex_member_without_acls_matches_everything_again_once_it_heartbeats():
    h = ConsumerShardHarness()
    a_id = h.topic("orders-a", 2)
    a = Member(h, "g", [], subscribed_topic_regex="orders-.*")
    a.beat()
    fresh = ConsumerShardHarness()
    fresh.image = h.image
    for record in h.log:
        fresh.shard.replay(record)
    fresh.shard.on_loaded()
    c_id = fresh.topic("orders-c", 2)
    a.h = fresh
    a.beat(full=True)
    a.beat()
    assert set(fresh.group("g").target_of(a.member_id)) == {a_id, c_id}
