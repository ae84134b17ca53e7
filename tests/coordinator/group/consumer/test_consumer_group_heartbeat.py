"""ConsumerGroupHeartbeat on a shard without sockets: joins, reconciliation order, fencing,
timers on a fake clock, and replay rebuilding the same group."""

from __future__ import annotations

from odradek.coordinator.group.consumer.consumer_group import ConsumerGroupState
from odradek.coordinator.group.consumer.consumer_group_member import MemberState
from odradek.coordinator.group.group_coordinator_shard import GroupCoordinatorShard
from odradek.coordinator.group.group_requests import CommitPartition, CommitRequest
from odradek.protocol.generated.error_codes import ErrorCode as E
from tests.coordinator.group.consumer.consumer_harness import CONSUMER_CONFIG, ConsumerShardHarness, Member


def settle(members, rounds: int = 6) -> None:
    for _ in range(rounds):
        for m in members:
            m.beat()


def assert_disjoint(members) -> None:
    seen = set()
    for m in members:
        assert not (m.partitions() & seen), "a partition owned twice"
        seen |= m.partitions()


def test_join_gets_everything_then_a_second_member_waits_for_the_revocation():
    h = ConsumerShardHarness()
    t = h.topic("t", 4)
    a = Member(h, "g", ["t"])
    r = a.beat()
    assert r.error == E.NONE and r.member_epoch == 1 and r.heartbeat_interval_ms == 100
    assert a.partitions() == {(t, p) for p in range(4)}
    b = Member(h, "g", ["t"])
    r = b.beat()  # epoch 2: b's target is still a's: it gets nothing yet
    assert r.member_epoch == 2 and b.partitions() == set()
    assert h.group("g").member(b.member_id).state == MemberState.UNRELEASED_PARTITIONS
    r = a.beat()  # a must revoke first: it stays at epoch 1
    assert r.member_epoch == 1 and len(a.partitions()) == 2
    assert h.group("g").member(a.member_id).state == MemberState.UNREVOKED_PARTITIONS
    assert_disjoint([a, b])
    a.beat()  # a reports it revoked: epoch 2, stable
    assert a.epoch == 2 and h.group("g").member(a.member_id).state == MemberState.STABLE
    b.beat()
    assert len(b.partitions()) == 2
    assert_disjoint([a, b])
    assert a.partitions() | b.partitions() == {(t, p) for p in range(4)}
    assert h.group("g").state == ConsumerGroupState.STABLE


def test_no_partition_is_ever_owned_twice_as_members_come_and_go():
    h = ConsumerShardHarness()
    h.topic("t", 12)
    members = [Member(h, "g", ["t"]) for _ in range(3)]
    for step in range(40):
        for m in members:
            m.beat()
            assert_disjoint(members)
        if step == 5:
            members += [Member(h, "g", ["t"]) for _ in range(7)]
        if step == 20:
            for m in members[:4]:
                assert m.leave().error == E.NONE
            members = members[4:]
    assert h.group("g").state == ConsumerGroupState.STABLE
    assert sorted(len(m.partitions()) for m in members) == [2] * 6
    assert len(set().union(*(m.partitions() for m in members))) == 12


def test_member_epoch_fencing():
    h = ConsumerShardHarness()
    h.topic("t", 2)
    a = Member(h, "g", ["t"])
    a.beat()
    assert h.heartbeat("g", a.member_id, a.epoch + 1).error == E.FENCED_MEMBER_EPOCH
    Member(h, "g", ["t"]).beat()  # the group moves to epoch 2
    settle([a])
    assert a.epoch == 2
    # The previous epoch passes only if the member owns no more than it is assigned.
    assert h.heartbeat("g", a.member_id, 1, owned=a.owned).error == E.NONE
    assert h.heartbeat("g", a.member_id, 1, owned={h.topic_ids["t"]: frozenset({0, 1})}).error == E.FENCED_MEMBER_EPOCH
    assert h.heartbeat("g", a.member_id, 0 if False else -5).error == E.INVALID_REQUEST
    assert h.heartbeat("g", "nobody", 1).error == E.UNKNOWN_MEMBER_ID
    assert h.heartbeat("nogroup", "nobody", 1).error == E.GROUP_ID_NOT_FOUND


def test_a_fenced_member_rejoins_at_epoch_zero_with_its_own_id():
    h = ConsumerShardHarness()
    h.topic("t", 2)
    a = Member(h, "g", ["t"])
    a.beat()
    a.epoch, a.owned = 0, {}
    r = a.beat()
    assert r.error == E.NONE and r.member_epoch == 1 and len(a.partitions()) == 2


def test_session_timeout_fences_and_bumps_the_group_epoch():
    h = ConsumerShardHarness()
    h.topic("t", 2)
    a, b = Member(h, "g", ["t"]), Member(h, "g", ["t"])
    settle([a, b])
    epoch = h.group("g").group_epoch
    for _ in range(5):
        h.tick(300)
        a.beat()  # only a heartbeats
    assert b.member_id not in h.group("g").members
    assert h.group("g").group_epoch == epoch + 1
    settle([a])
    assert len(a.partitions()) == 2
    assert b.beat().error == E.UNKNOWN_MEMBER_ID


def test_rebalance_timeout_fences_a_member_that_does_not_revoke():
    h = ConsumerShardHarness()
    h.topic("t", 4)
    a = Member(h, "g", ["t"], rebalance_timeout_ms=500)
    a.beat()
    b = Member(h, "g", ["t"])
    b.beat()
    r = h.heartbeat("g", a.member_id, a.epoch, owned=a.owned)  # a learns it must revoke...
    assert h.group("g").member(a.member_id).state == MemberState.UNREVOKED_PARTITIONS
    for _ in range(3):
        h.tick(200)  # ...but keeps reporting everything owned
        r = h.heartbeat("g", a.member_id, a.epoch, owned=a.owned)
        b.beat()
    assert a.member_id not in h.group("g").members and r.error == E.UNKNOWN_MEMBER_ID
    settle([b])
    assert len(b.partitions()) == 4


def test_static_member_leaves_for_a_moment_and_comes_back_with_its_partitions():
    h = ConsumerShardHarness()
    h.topic("t", 4)
    a = Member(h, "g", ["t"], instance_id="i-a")
    b = Member(h, "g", ["t"])
    settle([a, b])
    kept, epoch = a.partitions(), h.group("g").group_epoch
    other = Member(h, "g", ["t"], instance_id="i-a")
    assert other.beat().error == E.UNRELEASED_INSTANCE_ID  # a has not left
    assert a.leave(-2).error == E.NONE
    again = Member(h, "g", ["t"], instance_id="i-a")
    settle([again, b])
    assert again.partitions() == kept and h.group("g").group_epoch == epoch
    assert a.member_id not in h.group("g").members


def test_topic_growth_and_deletion_change_the_assignment():
    h = ConsumerShardHarness()
    t = h.topic("t", 2)
    a = Member(h, "g", ["t", "later"])
    settle([a])
    epoch = h.group("g").group_epoch
    h.topic("t", 4)
    later = h.topic("later", 1)
    settle([a])
    assert h.group("g").group_epoch == epoch + 1
    assert a.partitions() == {(t, p) for p in range(4)} | {(later, 0)}
    h.delete_topic("later")
    settle([a])
    assert a.partitions() == {(t, p) for p in range(4)}


def test_regex_subscription():
    h = ConsumerShardHarness()
    h.topic("orders-1", 1)
    h.topic("orders-2", 1)
    h.topic("other", 1)
    h.topic("__internal", 1)
    a = Member(h, "g", [], subscribed_topic_regex="orders-.*")
    a.beat()
    h.tick()  # the regex is resolved after the heartbeat that brought it (regex_resolution)
    settle([a])
    names = {h.image.topic_ids[t] for t, _ in a.partitions()}
    assert names == {"orders-1", "orders-2"}
    bad = Member(h, "g2", [], subscribed_topic_regex="(")
    assert bad.beat().error == E.INVALID_REGULAR_EXPRESSION


def test_offset_commit_and_fetch_are_checked_by_member_epoch():
    h = ConsumerShardHarness()
    h.topic("t", 2)
    a, b = Member(h, "g", ["t"]), Member(h, "g", ["t"])
    settle([a, b])

    def commit(member_id, epoch):
        req = CommitRequest("g", member_id, None, epoch, partitions=(CommitPartition("t", 0, 5),))
        return h.apply(h.shard.commit_offsets(req))[("t", 0)]

    assert commit(a.member_id, a.epoch) == E.NONE
    assert commit(a.member_id, a.epoch - 1) == E.STALE_MEMBER_EPOCH
    assert commit("nobody", a.epoch) == E.UNKNOWN_MEMBER_ID
    assert commit("", -1) == E.UNKNOWN_MEMBER_ID  # an admin commit only while the group is empty
    offsets = h.shard.offsets
    assert offsets.fetch_error("g", a.member_id, a.epoch) is None
    assert offsets.fetch_error("g", a.member_id, a.epoch - 1) == E.STALE_MEMBER_EPOCH
    assert offsets.fetch_error("g", "nobody", 1) == E.UNKNOWN_MEMBER_ID
    assert offsets.fetch_error("g", None, -1) is None
    a.leave()
    b.leave()
    assert h.group("g").state == ConsumerGroupState.EMPTY
    assert commit("", -1) == E.NONE
    assert h.shard.delete_groups(["g"]).response == {"g": E.NONE}


def test_replay_rebuilds_the_same_group():
    h = ConsumerShardHarness()
    h.topic("t", 6)
    members = [Member(h, "g", ["t"], instance_id="s" if i == 0 else None) for i in range(3)]
    for _ in range(2):
        for m in members:
            m.beat()  # stop mid-reconciliation: some members are not stable yet
    fresh = GroupCoordinatorShard(0, CONSUMER_CONFIG, h.clock, lambda: h.image)
    for offset, record in enumerate(h.log):
        decoded = __import__("odradek.coordinator.group.coordinator_record", fromlist=["x"]).decode_record(
            record.key_bytes(), record.value_bytes())
        fresh.replay(decoded, -1, offset)
    fresh.on_loaded()
    old, new = h.group("g"), fresh.consumer.group("g")
    assert (new.group_epoch, new.assignment_epoch, new.state) == (old.group_epoch, old.assignment_epoch, old.state)
    assert new.members == old.members and new.target == old.target
    assert new.partition_epochs == old.partition_epochs and new.static_members == old.static_members
    assert new.subscription_metadata == old.subscription_metadata


def test_classic_and_consumer_groups_do_not_share_an_id_in_use():
    h = ConsumerShardHarness()
    h.topic("t", 1)
    a = Member(h, "g", ["t"])
    a.beat()
    assert h.join("g").result.error == E.INCONSISTENT_GROUP_PROTOCOL  # JoinGroup: a consumer group in use
    assert h.shard.describe_group("g").error == E.GROUP_ID_NOT_FOUND  # DescribeGroups: not a classic group
    h.join("classic")  # a classic group with a member waiting to join
    assert Member(h, "classic", ["t"]).beat().error == E.GROUP_ID_NOT_FOUND
    a.leave()
    joined = h.join("g")
    h.tick(10)
    assert joined.result.error == E.NONE  # an empty consumer group becomes a classic one
    assert h.group("g") is None


def test_offset_commit_below_v9_from_a_consumer_protocol_member_is_unsupported():
    """Kafka's ConsumerGroup.validateOffsetCommit: OffsetCommit v8 and older carry no member
    epoch, so a KIP-848 member must use v9+; an admin commit to an empty group may use any."""
    h = ConsumerShardHarness()
    h.topic("t", 1)
    a = Member(h, "g", ["t"])
    settle([a])

    def commit(member_id, epoch, version):
        req = CommitRequest("g", member_id, None, epoch, partitions=(CommitPartition("t", 0, 5),), api_version=version)
        return h.apply(h.shard.commit_offsets(req))[("t", 0)]

    assert commit(a.member_id, a.epoch, 8) == E.UNSUPPORTED_VERSION
    assert commit(a.member_id, a.epoch, 1) == E.UNSUPPORTED_VERSION
    assert commit(a.member_id, a.epoch, 9) == E.NONE
    a.leave()
    assert commit("", -1, 2) == E.NONE
