"""Committed offsets on one shard: who may commit, fetch, delete, expiry, and that the state
is exactly what replaying the written records gives."""

from __future__ import annotations

from odradek.coordinator.group.coordinator_record import (
    GroupMetadataRecord,
    OffsetCommitRecord,
)
from odradek.coordinator.group.group_requests import (
    CommitPartition,
    CommitRequest,
    LeavingMember,
)
from odradek.protocol.generated.error_codes import ErrorCode
from tests.coordinator.group.harness import ShardHarness

E = ErrorCode
MINUTE = 60_000


def commit(h, group="g", offsets=(("t", 0, 5),), member="", generation=-1, retention=-1, metadata="m"):
    req = CommitRequest(group, member, None, generation, retention,
                        tuple(CommitPartition(t, p, o, 3, metadata) for t, p, o in offsets))
    return h.apply(h.shard.commit_offsets(req))


def fetched(h, group="g", wanted=None):
    return {(t, p): (v.offset if v else -1) for t, parts in h.shard.fetch_offsets(group, wanted) for p, v in parts}


def test_simple_commit_and_fetch():
    h = ShardHarness()
    assert commit(h, offsets=[("t", 0, 5), ("t", 1, 7), ("u", 0, 1)]) == {("t", 0): E.NONE, ("t", 1): E.NONE, ("u", 0): E.NONE}
    assert fetched(h) == {("t", 0): 5, ("t", 1): 7, ("u", 0): 1}
    assert fetched(h, wanted=[("t", [1, 2])]) == {("t", 1): 7, ("t", 2): -1}
    [(_, [(_, value)])] = h.shard.fetch_offsets("g", [("t", [0])])
    assert (value.leader_epoch, value.metadata, value.commit_timestamp_ms) == (3, "m", h.clock.milliseconds())
    assert fetched(h, "unknown", [("t", [0])]) == {("t", 0): -1}
    assert h.state("g") == "Empty"


def test_offsets_change_only_through_records():
    h = ShardHarness()
    commit(h, offsets=[("t", 0, 5)])
    commit(h, offsets=[("t", 0, 9), ("t", 1, 2)])
    assert all(isinstance(r, OffsetCommitRecord) for r in h.log) and len(h.log) == 3
    fresh = ShardHarness()
    for record in h.log:
        fresh.shard.replay(record)
    assert fetched(fresh) == fetched(h) == {("t", 0): 9, ("t", 1): 2}


def test_members_commit_with_their_generation():
    h = ShardHarness()
    [a] = h.joined_group("g")
    assert commit(h, member=a, generation=1) == {("t", 0): E.NONE}
    assert commit(h, member=a, generation=0) == {("t", 0): E.ILLEGAL_GENERATION}
    assert commit(h, member="x", generation=1) == {("t", 0): E.UNKNOWN_MEMBER_ID}
    assert commit(h) == {("t", 0): E.UNKNOWN_MEMBER_ID}  # anonymous commits need an empty group
    assert commit(h, group="new", member="x", generation=1) == {("t", 0): E.ILLEGAL_GENERATION}


def test_commit_during_completing_rebalance_is_refused():
    h = ShardHarness()
    join = h.join("g")
    h.tick()
    r = join.result
    assert commit(h, member=r.member_id, generation=1) == {("t", 0): E.REBALANCE_IN_PROGRESS}


def test_commit_keeps_a_member_alive():
    h = ShardHarness()
    [a] = h.joined_group("g", session_ms=1000)
    for _ in range(4):
        h.tick(600)
        assert commit(h, member=a, generation=1) == {("t", 0): E.NONE}
    assert h.state("g") == "Stable"


def test_metadata_too_large():
    h = ShardHarness()
    response = commit(h, offsets=[("t", 0, 1)], metadata="x" * 5000)
    assert response == {("t", 0): E.OFFSET_METADATA_TOO_LARGE} and h.log == []


def test_failed_write_changes_nothing():
    h = ShardHarness()
    h.write_error = E.NOT_LEADER_OR_FOLLOWER
    commit(h)
    assert fetched(h) == {}


def test_delete_offsets():
    h = ShardHarness()
    commit(h, offsets=[("t", 0, 5), ("t", 1, 6)])
    assert h.apply(h.shard.delete_offsets("g", [("t", 0)])) == (E.NONE, {("t", 0): E.NONE})
    assert fetched(h) == {("t", 1): 6}
    assert h.apply(h.shard.delete_offsets("g", [("t", 1)])) == (E.NONE, {("t", 1): E.NONE})
    assert isinstance(h.log[-1], GroupMetadataRecord) and h.log[-1].value is None  # group gone too
    assert h.state("g") == "Dead"
    assert h.apply(h.shard.delete_offsets("g", [("t", 1)])) == (E.GROUP_ID_NOT_FOUND, {})


def test_delete_offsets_of_subscribed_topic_refused():
    h = ShardHarness()
    sub = (("range", b"\x00\x00" + b"\x00\x00\x00\x01" + b"\x00\x01t" + b"\xff\xff\xff\xff"),)
    [a] = h.joined_group("g", protocols=sub)
    commit(h, member=a, generation=1, offsets=[("t", 0, 1), ("u", 0, 1)])
    result = h.apply(h.shard.delete_offsets("g", [("t", 0), ("u", 0)]))
    assert result == (E.NONE, {("t", 0): E.GROUP_SUBSCRIBED_TO_TOPIC, ("u", 0): E.NONE})


def test_delete_groups():
    h = ShardHarness()
    commit(h, group="empty", offsets=[("t", 0, 1), ("t", 1, 1)])
    h.joined_group("busy")
    response = h.apply(h.shard.delete_groups(["empty", "busy", "ghost"]))
    assert response == {"empty": E.NONE, "busy": E.NON_EMPTY_GROUP, "ghost": E.GROUP_ID_NOT_FOUND}
    tombstones = [r for r in h.log if getattr(r, "offset", 0) is None or getattr(r, "value", 0) is None]
    assert len(tombstones) == 3  # two offsets and the group
    assert fetched(h, "empty") == {} and h.state("empty") == "Dead"
    fresh = ShardHarness()
    for record in h.log:
        fresh.shard.replay(record)
    assert fresh.state("empty") == "Dead" and fresh.state("busy") == "Stable"


def test_offsets_of_an_empty_group_expire_after_retention_since_it_emptied():
    h = ShardHarness()
    [a] = h.joined_group("g", session_ms=60_000)
    commit(h, member=a, generation=1)
    h.tick(30_000)  # the commit is 30 s old when the group empties
    h.apply(h.shard.leave_group("g", [LeavingMember(a)]))
    h.tick()
    assert h.state("g") == "Empty"
    h.apply(h.shard.expire_offsets(h.clock.milliseconds() + MINUTE - 1))
    assert fetched(h) == {("t", 0): 5}
    h.apply(h.shard.expire_offsets(h.clock.milliseconds() + MINUTE))
    assert fetched(h) == {} and h.state("g") == "Dead"


def test_offsets_of_standalone_committers_expire_by_commit_time():
    h = ShardHarness()
    commit(h, offsets=[("t", 0, 1)])
    h.tick(30_000)
    commit(h, offsets=[("t", 1, 1)])
    h.apply(h.shard.expire_offsets(h.clock.milliseconds() + 30_000))
    assert fetched(h) == {("t", 1): 1}


def test_stable_consumer_group_keeps_offsets_of_subscribed_topics():
    h = ShardHarness()
    sub = (("range", b"\x00\x00" + b"\x00\x00\x00\x01" + b"\x00\x01t" + b"\xff\xff\xff\xff"),)
    [a] = h.joined_group("g", protocols=sub, session_ms=60_000)
    commit(h, member=a, generation=1, offsets=[("t", 0, 1), ("old", 0, 1)])
    h.apply(h.shard.expire_offsets(h.clock.milliseconds() + 10 * MINUTE))
    assert fetched(h) == {("t", 0): 1}


def test_explicit_retention_expires_at_its_time():
    h = ShardHarness()
    commit(h, retention=1000)
    assert h.log[-1].offset.expire_timestamp_ms == h.clock.milliseconds() + 1000
    h.apply(h.shard.expire_offsets(h.clock.milliseconds() + 1000))
    assert fetched(h) == {}


def test_empty_group_without_offsets_is_cleaned_up():
    h = ShardHarness()
    h.join("g", protocol_type="")  # refused, but the group was created
    h.apply(h.shard.expire_offsets(h.clock.milliseconds()))
    assert h.state("g") == "Dead" and h.shard.list_groups() == []


def test_offsets_of_deleted_topics_are_removed_from_every_group():
    h = ShardHarness()
    commit(h, group="g", offsets=[("t", 0, 5), ("t", 1, 6), ("u", 0, 1)])
    commit(h, group="only-t", offsets=[("t", 0, 2)])
    h.apply(h.shard.on_topics_deleted({"t"}))
    assert fetched(h, "g") == {("u", 0): 1}
    assert fetched(h, "only-t") == {} and h.state("only-t") == "Dead"  # emptied: the group goes too
    fresh = ShardHarness()
    for record in h.log:
        fresh.shard.replay(record)
    assert fetched(fresh, "g") == {("u", 0): 1} and fresh.state("only-t") == "Dead"
    h.apply(h.shard.on_topics_deleted({"never-committed"}))
    assert fetched(h, "g") == {("u", 0): 1}
