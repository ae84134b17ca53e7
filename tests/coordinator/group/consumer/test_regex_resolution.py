"""A consumer group's regexes resolved as Kafka 4.x (regex_resolution): a regex new to the group
is resolved after the heartbeat that brought it (its literal topics assigned first), by a timer
that writes ConsumerGroupRegularExpression records and bumps the group epoch; refreshes are
batched (at most one per 10 s, only for an unresolved regex or new topics); the last
subscriber leaving tombstones the regex; replay restores the resolutions."""

from __future__ import annotations

from odradek.coordinator.group.consumer.consumer_group_records import (
    GroupEpochRecord,
    RegularExpressionRecord,
    ResolvedRegularExpression,
)
from odradek.coordinator.group.consumer.regex_resolution import REGEX_BATCH_REFRESH_MIN_INTERVAL_MS
from odradek.coordinator.group.coordinator_record import decode_record
from odradek.protocol.generated.error_codes import ErrorCode as E
from tests.coordinator.group.consumer.consumer_harness import ConsumerShardHarness, Member

REGEX = "orders-.*"


def regex_records(h: ConsumerShardHarness) -> list[RegularExpressionRecord]:
    return [r for r in h.log if isinstance(r, RegularExpressionRecord)]


def topics_of(h: ConsumerShardHarness, member: Member) -> set[str]:
    return {h.image.topic_ids[t] for t, _ in member.partitions()}


def settle(h: ConsumerShardHarness, *members, rounds: int = 3) -> None:
    """Heartbeats with the timers run between rounds (the runtime runs them at once)."""
    for _ in range(rounds):
        for m in members:
            m.beat()
        h.tick()


def wait(h: ConsumerShardHarness, ms: int, *members) -> None:
    """Let ``ms`` pass with the members heartbeating every 500 ms (within their session)."""
    while ms > 0:
        step = min(500, ms)
        h.tick(step)
        ms -= step
        for m in members:
            m.beat()
        h.tick()


def resolved_group(h: ConsumerShardHarness) -> Member:
    h.topic("orders-1", 2)
    a = Member(h, "g", [], subscribed_topic_regex=REGEX)
    settle(h, a)
    assert topics_of(h, a) == {"orders-1"}
    return a


def test_a_new_regex_gets_the_literal_topics_first_and_its_matches_after_the_timer():
    h = ConsumerShardHarness()
    h.topic("orders-1", 2)
    h.topic("literal", 1)
    a = Member(h, "g", ["literal"], subscribed_topic_regex=REGEX)
    assert a.beat().error == E.NONE
    epoch = h.group("g").group_epoch
    assert topics_of(h, a) == {"literal"}
    assert regex_records(h) == []
    assert a.beat().error == E.NONE  # no timer has run: still the literal topic alone
    assert topics_of(h, a) == {"literal"} and h.group("g").group_epoch == epoch

    h.tick()  # the resolution lands
    [record] = regex_records(h)
    assert record.regex == REGEX and record.resolved.topics == {"orders-1"}
    assert h.group("g").group_epoch == epoch + 1
    settle(h, a)
    assert topics_of(h, a) == {"literal", "orders-1"}


def test_a_regex_already_resolved_in_the_group_bumps_the_epoch_at_once():
    h = ConsumerShardHarness()
    a = resolved_group(h)
    epoch = h.group("g").group_epoch
    b = Member(h, "g", [], subscribed_topic_regex=REGEX)
    b.beat()
    assert h.group("g").group_epoch == epoch + 1
    for _ in range(3):  # no timer: the group's resolution serves b at once
        a.beat()
        b.beat()
    assert topics_of(h, a) | topics_of(h, b) == {"orders-1"}
    assert len(regex_records(h)) == 1


def test_topics_created_70_ms_apart_are_resolved_in_one_refresh():
    h = ConsumerShardHarness()
    a = resolved_group(h)
    wait(h, 1_000, a)
    h.topic("orders-2", 1)
    a.beat()  # new topics, but the last resolution is less than 10 s old
    h.tick(70)
    h.topic("orders-3", 1)
    a.beat()
    h.tick()
    assert len(regex_records(h)) == 1
    epoch = h.group("g").group_epoch
    # the first heartbeat 10 s after the last resolution schedules the refresh
    wait(h, REGEX_BATCH_REFRESH_MIN_INTERVAL_MS, a)
    records = regex_records(h)
    assert len(records) == 2 and records[-1].resolved.topics == {"orders-1", "orders-2", "orders-3"}
    assert h.group("g").group_epoch == epoch + 1  # one rebalance for both topics
    settle(h, a)
    assert topics_of(h, a) == {"orders-1", "orders-2", "orders-3"}


def test_no_refresh_without_new_topics_nor_within_10_s():
    h = ConsumerShardHarness()
    a = resolved_group(h)
    epoch = h.group("g").group_epoch
    wait(h, REGEX_BATCH_REFRESH_MIN_INTERVAL_MS + 500, a)  # no new topics: nothing to resolve
    assert len(regex_records(h)) == 1 and h.group("g").group_epoch == epoch
    h.topic("orders-2", 1)
    settle(h, a)
    assert len(regex_records(h)) == 2
    h.topic("orders-3", 1)
    wait(h, REGEX_BATCH_REFRESH_MIN_INTERVAL_MS - 1_000, a)  # new topics, but within 10 s
    assert len(regex_records(h)) == 2
    assert topics_of(h, a) == {"orders-1", "orders-2"}


def test_the_last_subscriber_leaving_a_regex_tombstones_it():
    h = ConsumerShardHarness()
    a = resolved_group(h)
    b = Member(h, "g", [], subscribed_topic_regex=REGEX)
    settle(h, a, b)
    assert a.leave().error == E.NONE
    assert all(r.resolved is not None for r in regex_records(h))
    assert REGEX in h.group("g").resolved_regexes
    assert b.leave().error == E.NONE
    assert regex_records(h)[-1] == RegularExpressionRecord("g", REGEX, None)
    assert h.group("g").resolved_regexes == {}


def test_moving_to_another_regex_tombstones_the_old_one_and_resolves_the_new_one():
    h = ConsumerShardHarness()
    a = resolved_group(h)
    h.topic("books-1", 1)
    r = h.heartbeat("g", a.member_id, a.epoch, owned=a.owned, subscribed_topic_regex="books-.*")
    assert r.error == E.NONE
    a.epoch, a.owned = r.member_epoch, a.owned if r.assignment is None else dict(r.assignment)
    assert regex_records(h)[-1] == RegularExpressionRecord("g", REGEX, None)
    assert h.group("g").resolved_regexes == {}
    # As Kafka, the heartbeat whose change tombstones the old regex still sees its resolution,
    # under 10 s old, and schedules nothing; the next heartbeat finds none and schedules one.
    h.tick()
    assert regex_records(h)[-1].resolved is None
    settle(h, a)
    assert regex_records(h)[-1].regex == "books-.*"
    assert set(h.group("g").resolved_regexes) == {"books-.*"}
    settle(h, a)
    assert topics_of(h, a) == {"books-1"}


def test_replay_restores_the_resolved_regexes_and_deletion_tombstones_them():
    h = ConsumerShardHarness()
    a = resolved_group(h)
    fresh = ConsumerShardHarness()
    for record in h.log:  # through the bytes, as a coordinator loading the partition
        value = record.value_bytes()
        fresh.shard.replay(decode_record(record.key_bytes(), value))
    assert fresh.group("g").resolved_regexes == h.group("g").resolved_regexes
    assert fresh.group("g").resolved_regexes[REGEX].topics == {"orders-1"}

    a.leave()
    tombstone = regex_records(h)[-1]
    assert decode_record(tombstone.key_bytes(), tombstone.value_bytes()) == tombstone
    records = h.shard.consumer.delete_records(fresh.group("g"))
    assert RegularExpressionRecord("g", REGEX, None) in records
    assert records.index(RegularExpressionRecord("g", REGEX, None)) < records.index(GroupEpochRecord("g", None))


def test_a_regular_expression_record_round_trips():
    record = RegularExpressionRecord("g", "a.*", ResolvedRegularExpression(frozenset({"ab", "ac"}), 42, 1234))
    assert decode_record(record.key_bytes(), record.value_bytes()) == record
    assert record.key_bytes()[:2] == (16).to_bytes(2, "big")


def test_an_invalid_regex_is_refused_and_nothing_is_scheduled():
    h = ConsumerShardHarness()
    bad = Member(h, "g", [], subscribed_topic_regex="(")
    assert bad.beat().error == E.INVALID_REGULAR_EXPRESSION
    h.tick()
    assert regex_records(h) == []
