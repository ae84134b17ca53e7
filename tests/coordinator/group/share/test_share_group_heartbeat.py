"""ShareGroupHeartbeat on a shard without sockets: join, the assignment at once, sharing when
members outnumber partitions, leave, fencing, session expiry on a fake clock, topics created
and deleted, share-group state initialization, deletion, and replay rebuilding the group."""

from __future__ import annotations

import pytest

from odradek.coordinator.group.group_coordinator_shard import GroupCoordinatorShard
from odradek.coordinator.group.share.share_group import ShareGroupState
from odradek.protocol.generated.error_codes import ErrorCode as E
from tests.coordinator.group.consumer.consumer_harness import Member
from tests.coordinator.group.share.share_harness import SHARE_CONFIG, ShareMember, ShareShardHarness


def settle(members, rounds: int = 2) -> None:
    for _ in range(rounds):
        for m in members:
            assert m.beat().error == E.NONE


def test_join_gets_the_assignment_at_once_and_a_second_member_takes_half():
    h = ShareShardHarness()
    t = h.topic("t", 4)
    a = ShareMember(h, "g", ["t"])
    r = a.beat()
    assert (r.error, r.member_epoch, r.heartbeat_interval_ms) == (E.NONE, 1, 100)
    assert a.partitions() == {(t, p) for p in range(4)}
    b = ShareMember(h, "g", ["t"])
    assert b.beat().member_epoch == 2 and len(b.partitions()) == 2  # no waiting for a to revoke
    r = a.beat()
    assert r.member_epoch == 2 and len(a.partitions()) == 2 and r.assignment is not None
    assert a.partitions() | b.partitions() == {(t, p) for p in range(4)}
    assert a.beat().assignment is None  # unchanged: not sent again
    assert h.share_group("g").state == ShareGroupState.STABLE


def test_more_members_than_partitions_share_them():
    h = ShareShardHarness()
    t = h.topic("t", 2)
    members = [ShareMember(h, "g", ["t"]) for _ in range(5)]
    settle(members)
    assert sorted(len(m.partitions()) for m in members) == [1, 1, 1, 1, 2]
    for p in range(2):
        assert sum((t, p) in m.partitions() for m in members) == 3


def test_leave_gives_the_partitions_to_the_others():
    h = ShareShardHarness()
    t = h.topic("t", 3)
    a, b = ShareMember(h, "g", ["t"]), ShareMember(h, "g", ["t"])
    settle([a, b])
    r = a.leave()
    assert (r.error, r.member_epoch) == (E.NONE, -1)
    b.beat()
    assert b.partitions() == {(t, p) for p in range(3)}
    assert a.leave().error == E.UNKNOWN_MEMBER_ID
    assert h.share_heartbeat("nope", a.member_id, -1).error == E.GROUP_ID_NOT_FOUND
    b.leave()
    assert h.share_group("g").state == ShareGroupState.EMPTY


def test_member_epoch_fencing():
    h = ShareShardHarness()
    h.topic("t", 2)
    a = ShareMember(h, "g", ["t"])
    a.beat()
    assert h.share_heartbeat("g", a.member_id, a.epoch + 1).error == E.FENCED_MEMBER_EPOCH
    b = ShareMember(h, "g", ["t"])
    b.beat()
    c = ShareMember(h, "g", ["t"])
    c.beat()
    settle([a])
    assert a.epoch == 3
    assert h.share_heartbeat("g", a.member_id, 2).error == E.FENCED_MEMBER_EPOCH  # neither current (3) nor previous (1)
    assert h.share_heartbeat("g", a.member_id, 0, ["t"]).error == E.NONE  # a rejoin starts over
    assert h.share_heartbeat("g", a.member_id, 3).error == E.NONE


def test_previous_epoch_is_accepted_when_the_response_was_lost():
    h = ShareShardHarness()
    h.topic("t", 2)
    a = ShareMember(h, "g", ["t"])
    a.beat()
    ShareMember(h, "g", ["t"]).beat()
    r = h.share_heartbeat("g", a.member_id, a.epoch)  # moves a to epoch 2; pretend it never arrived
    assert r.member_epoch == 2
    assert h.share_heartbeat("g", a.member_id, 1).error == E.NONE


def test_unknown_member_and_group():
    h = ShareShardHarness()
    h.topic("t", 1)
    ShareMember(h, "g", ["t"]).beat()
    assert h.share_heartbeat("g", "someone", 3).error == E.UNKNOWN_MEMBER_ID
    assert h.share_heartbeat("other", "someone", 3).error == E.GROUP_ID_NOT_FOUND


@pytest.mark.parametrize("member_id,epoch,topics,rack", [
    ("", 0, ["t"], None), ("m", 0, None, None), ("m", 0, [], None), ("m", -2, None, None), ("m", 0, ["t"], "")])
def test_invalid_requests(member_id, epoch, topics, rack):
    h = ShareShardHarness()
    r = h.share_heartbeat("g", member_id, epoch, topics, rack_id=rack)
    assert r.error == E.INVALID_REQUEST and r.error_message
    assert h.share_heartbeat("", "m", 0, ["t"]).error == E.INVALID_REQUEST
    assert h.share_group("g") is None and h.log == []


def test_group_max_size():
    h = ShareShardHarness()
    h.topic("t", 1)
    members = [ShareMember(h, "g", ["t"]) for _ in range(SHARE_CONFIG.share_max_size)]
    settle(members, 1)
    r = ShareMember(h, "g", ["t"]).beat()
    assert r.error == E.GROUP_MAX_SIZE_REACHED
    assert members[0].beat().error == E.NONE  # members already in keep heartbeating


def test_session_timeout_fences_a_silent_member():
    h = ShareShardHarness()
    t = h.topic("t", 2)
    a, b = ShareMember(h, "g", ["t"]), ShareMember(h, "g", ["t"])
    settle([a, b])
    for _ in range(3):
        h.tick(600)
        a.beat()  # a keeps its session; b is silent
    assert h.share_group("g").member(b.member_id) is None
    assert a.partitions() == {(t, 0), (t, 1)}
    assert b.beat().error == E.UNKNOWN_MEMBER_ID


def test_topic_created_later_and_deleted():
    h = ShareShardHarness()
    a = ShareMember(h, "g", ["t", "later"])
    a.beat()
    h.topic("t", 1)
    a.beat()
    assert len(a.partitions()) == 1
    later = h.topic("later", 2)
    a.beat()
    assert {(later, 0), (later, 1)} <= a.partitions()
    h.delete_topic("later")
    a.beat()
    assert len(a.partitions()) == 1 and not any(t == later for t, _ in a.partitions())


def test_group_ids_of_other_kinds_are_refused_both_ways():
    h = ShareShardHarness()
    h.topic("t", 1)
    consumer = Member(h, "c", ["t"])
    consumer.beat()
    assert h.share_heartbeat("c", "m", 0, ["t"]).error == E.GROUP_ID_NOT_FOUND
    h.join("classic")
    assert h.share_heartbeat("classic", "m", 0, ["t"]).error == E.GROUP_ID_NOT_FOUND
    ShareMember(h, "s", ["t"]).beat()
    assert Member(h, "s", ["t"]).beat().error == E.GROUP_ID_NOT_FOUND
    assert h.join("s").result.error == E.GROUP_ID_NOT_FOUND
    assert h.shard.describe_group("s").error == E.GROUP_ID_NOT_FOUND


def test_delete_groups_only_when_empty():
    h = ShareShardHarness()
    h.topic("t", 1)
    a = ShareMember(h, "g", ["t"])
    a.beat()
    assert h.apply(h.shard.delete_groups(["g"])) == {"g": E.NON_EMPTY_GROUP}
    assert h.share_group("g") is not None
    a.leave()
    assert h.apply(h.shard.delete_groups(["g"])) == {"g": E.NONE}
    assert h.share_group("g") is None
    assert h.shard.list_share_groups() == []


def test_state_initialization_assigns_only_initialized_partitions():
    h = ShareShardHarness()
    h.shard.share.state_initialization = True
    t = h.topic("t", 2)
    a = ShareMember(h, "g", ["t"])
    assert a.beat().error == E.NONE and a.partitions() == set()
    asked = h.shard.share.take_initialize_requests()
    assert [(r.group_id, r.topics) for r in asked] == [("g", {t: ("t", frozenset({0, 1}))})]
    assert h.share_group("g").is_initializing(t, 0)
    a.beat()
    assert h.shard.share.take_initialize_requests() == []  # not asked twice while initializing
    h.apply(h.shard.share.initialize_failed("g", {t: ("t", frozenset({1}))}))
    h.apply(h.shard.share.initialized("g", {t: ("t", frozenset({0}))}))
    a.beat()
    assert a.partitions() == {(t, 0)}
    assert [r.topics for r in h.shard.share.take_initialize_requests()] == [{t: ("t", frozenset({1}))}]


def _replayed(h) -> GroupCoordinatorShard:
    fresh = GroupCoordinatorShard(0, SHARE_CONFIG, h.clock, lambda: h.image)
    for offset, record in enumerate(h.log):
        fresh.replay(record, -1, offset)
    fresh.on_loaded()
    return fresh


def _same(old, new) -> None:
    assert (new.group_epoch, new.assignment_epoch, new.metadata_hash, new.state) == \
        (old.group_epoch, old.assignment_epoch, old.metadata_hash, old.state)
    assert new.members == old.members and new.target == old.target
    assert (new.initialized, new.initializing) == (old.initialized, old.initializing)


def _history(h):
    h.shard.share.state_initialization = True
    t = h.topic("t", 3)
    members = [ShareMember(h, "g", ["t"]) for _ in range(4)]
    settle(members, 1)
    h.apply(h.shard.share.initialized("g", {t: ("t", frozenset({0, 1, 2}))}))
    settle(members)
    members[0].leave()
    members[1].beat()
    return members


def test_replay_of_the_records_rebuilds_the_same_group():
    h = ShareShardHarness()
    members = _history(h)
    fresh = _replayed(h)
    _same(h.share_group("g"), fresh.share.group("g"))
    assert len(fresh.timer) == len(h.share_group("g").members)  # each member's session runs again
    h.shard = fresh
    assert members[2].beat().error == E.NONE  # the members go on at their epochs


def test_replay_from_bytes_rebuilds_the_same_group():
    pytest.importorskip("odradek.protocol.generated.share_group_metadata_key")
    from odradek.coordinator.group.coordinator_record import decode_record

    h = ShareShardHarness()
    _history(h)
    fresh = GroupCoordinatorShard(0, SHARE_CONFIG, h.clock, lambda: h.image)
    for offset, record in enumerate(h.log):
        fresh.replay(decode_record(record.key_bytes(), record.value_bytes()), -1, offset)
    fresh.on_loaded()
    _same(h.share_group("g"), fresh.share.group("g"))
