"""KIP-848 online downgrade on a shard without sockets (consumer/group_downgrade.py): the last
consumer-protocol member of a consumer group leaves (or is fenced, or is replaced by a static
classic member) and the classic members that remain become a classic group, keeping their
partitions and the committed offsets; the records are the consumer group's tombstones and a
GroupMetadata record that replays into the same classic group. Static classic members
joining under a new member id replace their predecessor (group_migration.py)."""

from __future__ import annotations

from dataclasses import replace

from odradek.coordinator.group.consumer.consumer_group_records import ConsumerGroupRecord
from odradek.coordinator.group.consumer.consumer_protocol import decode_assignment, encode_assignment
from odradek.coordinator.group.coordinator_record import GroupMetadataRecord
from odradek.coordinator.group.group_requests import LeavingMember
from odradek.protocol.generated.error_codes import ErrorCode as E
from tests.coordinator.group.consumer.consumer_harness import CONSUMER_CONFIG, ConsumerShardHarness, Member
from tests.coordinator.group.consumer.test_group_migration import (
    ClassicConsumer,
    commit,
    owned_by_all,
    stable_classic_group,
    subscription,
)


class StaticClassic(ClassicConsumer):
    """A classic consumer with a ``group.instance.id`` (and a choice of protocols)."""

    def __init__(self, h, group, name, instance_id=None, protocols=("range",)) -> None:
        super().__init__(h, group, name)
        self.instance_id, self.protocol_names = instance_id, protocols

    def join(self):
        protocols = tuple((p, subscription(["t"])) for p in self.protocol_names)
        return self.h.join(self.group, self.member_id, instance_id=self.instance_id, protocols=protocols,
                           client_id=self.name)

    def heartbeat(self):
        return self.h.apply(self.h.shard.heartbeat(self.group, self.member_id, self.instance_id, self.generation))


def mixed_group(h: ConsumerShardHarness):
    """A stable classic group (a, b) upgraded by a consumer member; everyone reconciled."""
    a, b = stable_classic_group(h)
    new = Member(h, "g", ["t"])
    assert new.beat().error == E.NONE
    for _ in range(6):
        for c in (a, b):
            c.rejoin()
        new.beat()
    assert all(c.heartbeat() == E.NONE for c in (a, b))
    assert new.partitions() and a.partitions() and b.partitions()
    return a, b, new


def classic_rebalance(h, consumers, assignor=None):
    """Every consumer rejoins a classic group (eager); the leader assigns ``assignor(ids)``."""
    for c in consumers:
        c.owned = {}
    answers = [c.join() for c in consumers]
    h.tick()
    results = [c.joined(a) for c, a in zip(consumers, answers)]
    assert all(r.error == E.NONE for r in results), results
    leader = next(c for c, r in zip(consumers, results) if r.leader_id == c.member_id)
    plan = [(c.member_id, encode_assignment({"t": frozenset(range(i, 4, len(consumers)))}, 1))
            for i, c in enumerate(consumers)]
    for c in consumers:
        assert c.sync(plan if c is leader else ()).error == E.NONE


def test_the_last_consumer_member_leaving_downgrades_the_group_to_classic():
    h = ConsumerShardHarness()
    h.topic("t", 4)
    a, b, new = mixed_group(h)
    assert commit(h, a.member_id, a.generation, 42) == E.NONE
    consumer = h.group("g")
    epoch, held = consumer.group_epoch, {c.member_id: c.owned for c in (a, b)}
    logged = len(h.log)

    assert new.leave().error == E.NONE
    assert h.group("g") is None, "the consumer group is gone"
    classic = h.shard.groups.group("g")
    assert classic is not None and h.state("g") == "PreparingRebalance"
    assert classic.generation_id == epoch and classic.protocol_name == "range"
    assert set(classic.members) == {a.member_id, b.member_id}
    assert {m: decode_assignment(x.assignment) for m, x in classic.members.items()} == held
    assert classic.members[a.member_id].session_timeout_ms == 1000
    # The records: the consumer group's tombstones, then the classic group.
    written = h.log[logged:]
    assert all(isinstance(r, ConsumerGroupRecord) for r in written[:-1])
    assert isinstance(written[-1], GroupMetadataRecord) and written[-1].value.generation == epoch
    assert h.shard.fetch_offsets("g", [("t", [0])])[0][1][0][1].offset == 42

    # Replaying the log rebuilds the same classic group (Stable, as written).
    fresh = ConsumerShardHarness()
    fresh.image = h.image
    for record in h.log:
        fresh.shard.replay(record)
    again = fresh.shard.groups.group("g")
    assert fresh.group("g") is None and fresh.state("g") == "Stable"
    assert (again.generation_id, again.protocol_type, again.protocol_name, again.leader_id) == \
           (classic.generation_id, classic.protocol_type, classic.protocol_name, classic.leader_id)
    assert {m: (x.assignment, x.session_timeout_ms, x.rebalance_timeout_ms, x.protocols)
            for m, x in again.members.items()} == \
           {m: (x.assignment, x.session_timeout_ms, x.rebalance_timeout_ms, x.protocols)
            for m, x in classic.members.items()}
    assert fresh.shard.fetch_offsets("g", [("t", [0])])[0][1][0][1].offset == 42

    # The members are told to rejoin and rebalance as a classic group, at the next generation.
    assert a.heartbeat() == E.REBALANCE_IN_PROGRESS
    classic_rebalance(h, [a, b])
    assert h.state("g") == "Stable" and a.generation == epoch + 1
    assert sorted(owned_by_all([a, b], [])) == [("t", p) for p in range(4)]
    assert commit(h, a.member_id, a.generation, 43) == E.NONE


def test_the_last_consumer_member_fenced_by_its_session_timeout_downgrades_the_group():
    h = ConsumerShardHarness()
    h.topic("t", 4)
    a, b, new = mixed_group(h)
    for _ in range(15):  # the consumer member falls silent; the classic members heartbeat
        h.tick(100)
        if h.group("g") is not None:
            assert all(c.heartbeat() == E.NONE for c in (a, b))
    assert h.group("g") is None and h.state("g") == "PreparingRebalance"
    assert set(h.shard.groups.group("g").members) == {a.member_id, b.member_id}


def test_no_downgrade_while_a_consumer_member_remains_or_when_the_policy_or_size_forbids():
    # Another consumer member remains: still a consumer group.
    h = ConsumerShardHarness()
    h.topic("t", 4)
    a, b, new = mixed_group(h)
    other = Member(h, "g", ["t"])
    other.beat()
    new.leave()
    assert h.group("g") is not None and h.shard.groups.group("g") is None
    # A classic member leaving never downgrades.
    assert h.apply(h.shard.leave_group("g", [LeavingMember(a.member_id)])) == (E.NONE, [E.NONE])
    assert h.group("g") is not None and h.shard.groups.group("g") is None
    other.leave()  # the last consumer member: now it does
    assert h.group("g") is None and set(h.shard.groups.group("g").members) == {b.member_id}
    for policy, max_size in (("upgrade", 2**31 - 1), ("disabled", 2**31 - 1), ("bidirectional", 1)):
        h = ConsumerShardHarness(replace(CONSUMER_CONFIG, consumer_migration_policy=policy, max_size=max_size))
        h.topic("t", 4)
        m = Member(h, "g", ["t"])
        m.beat()
        if policy == "disabled":
            continue  # classic members cannot join at all
        c1, c2 = StaticClassic(h, "g", "c1"), StaticClassic(h, "g", "c2")
        for c in (c1, c2):
            assert c.joined(c.join()).error == E.NONE
        assert m.leave().error == E.NONE
        assert h.group("g") is not None and set(h.group("g").members) == {c1.member_id, c2.member_id}, policy
        assert h.shard.groups.group("g") is None


def test_policy_downgrade_downgrades_a_consumer_group_that_classic_members_joined():
    h = ConsumerShardHarness(replace(CONSUMER_CONFIG, consumer_migration_policy="downgrade"))
    h.topic("t", 4)
    m = Member(h, "g", ["t"])
    m.beat()
    c = StaticClassic(h, "g", "c")
    assert c.joined(c.join()).error == E.NONE
    assert m.leave().error == E.NONE
    assert h.group("g") is None and set(h.shard.groups.group("g").members) == {c.member_id}


def test_a_classic_member_sharing_no_protocol_with_the_others_is_refused():
    h = ConsumerShardHarness()
    h.topic("t", 4)
    Member(h, "g", ["t"]).beat()
    c1 = StaticClassic(h, "g", "c1", protocols=("range",))
    assert c1.joined(c1.join()).error == E.NONE
    c2 = StaticClassic(h, "g", "c2", protocols=("cooperative-sticky",))
    assert c2.joined(c2.join()).error == E.INCONSISTENT_GROUP_PROTOCOL
    c3 = StaticClassic(h, "g", "c3", protocols=("cooperative-sticky", "range"))
    assert c3.joined(c3.join()).error == E.NONE


def test_a_static_classic_member_rejoining_under_a_new_member_id_replaces_its_predecessor():
    h = ConsumerShardHarness()
    h.topic("t", 4)
    m = Member(h, "g", ["t"])
    m.beat()
    s = StaticClassic(h, "g", "s", instance_id="i1")
    assert s.joined(s.join()).error == E.NONE
    for _ in range(6):
        m.beat()
        s.rejoin()
    group = h.group("g")
    old_id, old_partitions, old_target = s.member_id, group.member(s.member_id).assigned_partitions, \
        group.target_of(s.member_id)
    epoch = group.group_epoch
    assert old_partitions

    restarted = StaticClassic(h, "g", "s", instance_id="i1")  # a new process: no member id
    r = restarted.joined(restarted.join())
    assert r.error == E.NONE and restarted.member_id != old_id
    group = h.group("g")
    assert set(group.members) == {m.member_id, restarted.member_id}
    assert group.static_member("i1").member_id == restarted.member_id
    assert group.member(restarted.member_id).assigned_partitions == old_partitions
    assert group.target_of(restarted.member_id) == old_target and group.group_epoch == epoch, "no rebalance"
    assert restarted.sync().error == E.NONE and restarted.partitions()
    # The replaced member id is fenced; the instance id under it too.
    assert h.apply(h.shard.heartbeat("g", old_id, "i1", s.generation)) == E.FENCED_INSTANCE_ID
    assert h.apply(h.shard.heartbeat("g", old_id, None, s.generation)) == E.UNKNOWN_MEMBER_ID
    stale = StaticClassic(h, "g", "s", instance_id="i1")
    stale.member_id = old_id
    assert stale.joined(stale.join()).error == E.FENCED_INSTANCE_ID
    unknown = StaticClassic(h, "g", "s", instance_id="i9")
    unknown.member_id = "nobody"
    assert unknown.joined(unknown.join()).error == E.UNKNOWN_MEMBER_ID
    for _ in range(4):
        m.beat()
        restarted.rejoin()
        owned = owned_by_all([restarted], [m])
        assert len(owned) == len(set(owned)), f"a partition owned twice: {owned}"
    # Replaying the log rebuilds the same group.
    fresh = ConsumerShardHarness()
    fresh.image = h.image
    for record in h.log:
        fresh.shard.replay(record)
    assert fresh.group("g").members == h.group("g").members and fresh.group("g").target == h.group("g").target


def test_a_static_classic_member_replacing_the_last_consumer_member_downgrades_the_group():
    h = ConsumerShardHarness()
    h.topic("t", 4)
    m = Member(h, "g", ["t"], instance_id="i1")
    m.beat()
    c = StaticClassic(h, "g", "c")
    assert c.joined(c.join()).error == E.NONE
    for _ in range(6):
        m.beat()
        c.rejoin()
    group = h.group("g")
    epoch, partitions = group.group_epoch, m.partitions()
    assert partitions and c.partitions()

    joining = StaticClassic(h, "g", "m", instance_id="i1")  # i1 restarted as a classic consumer
    r = joining.joined(joining.join())
    assert r.error == E.NONE and h.group("g") is None
    classic = h.shard.groups.group("g")
    assert h.state("g") == "Stable" and r.generation_id == classic.generation_id == epoch
    assert set(classic.members) == {c.member_id, joining.member_id}
    assert classic.static_member_id("i1") == joining.member_id
    assert joining.sync().error == E.NONE
    assert {(h.topic_ids[t], p) for t, ps in joining.owned.items() for p in ps} == partitions
    assert not set(joining.partitions()) & set(c.partitions())
    fresh = ConsumerShardHarness()
    fresh.image = h.image
    for record in h.log:
        fresh.shard.replay(record)
    assert fresh.group("g") is None
    assert set(fresh.shard.groups.group("g").members) == set(classic.members)


def test_members_keep_what_they_own_not_their_target_when_the_group_downgrades_mid_reconciliation():
    h = ConsumerShardHarness()
    h.topic("t", 4)
    a, b = stable_classic_group(h)
    new = Member(h, "g", ["t"])
    new.beat()  # upgrade: the target gives `new` some of a's and b's partitions, still theirs
    group = h.group("g")
    assert any(group.target_of(c.member_id) != group.member(c.member_id).assigned_partitions for c in (a, b))
    held = {c.member_id: c.owned for c in (a, b)}
    assert new.leave().error == E.NONE
    classic = h.shard.groups.group("g")
    assert {m: decode_assignment(x.assignment) for m, x in classic.members.items()} == held


def test_no_downgrade_when_the_classic_members_share_no_protocol():
    h = ConsumerShardHarness()
    h.topic("t", 4)
    a, b, new = mixed_group(h)
    group = h.group("g")
    member = group.member(b.member_id)  # as if written by a coordinator that let it in
    group.update_member(replace(member, classic=replace(member.classic, supported_protocols=(("other", b""),))))
    assert new.leave().error == E.NONE
    assert h.group("g") is not None and h.shard.groups.group("g") is None


def test_a_classic_member_told_member_id_required_joins_with_that_id():
    h = ConsumerShardHarness()
    h.topic("t", 2)
    Member(h, "g", ["t"]).beat()
    protocols = (("range", subscription(["t"])),)
    first = h.join("g", "", protocols=protocols, require_known=True).result
    assert first.error == E.MEMBER_ID_REQUIRED and first.member_id
    again = h.join("g", first.member_id, protocols=protocols, require_known=True).result
    assert again.error == E.NONE and again.member_id == first.member_id
    assert h.group("g").member(first.member_id).uses_classic_protocol()
