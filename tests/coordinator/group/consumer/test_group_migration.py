"""KIP-848 online migration on a shard without sockets (consumer/group_migration.py): a stable
classic group upgrades on a ConsumerGroupHeartbeat, its classic members keep their partitions
until they rejoin into the consumer group (JoinGroup/SyncGroup/Heartbeat answered from the
target assignment), no partition is ever owned twice, committed offsets survive, and the
policy ``disabled`` refuses as before online migration."""

from __future__ import annotations

from dataclasses import replace

from odradek.coordinator.group.consumer.consumer_group_member import ClassicMemberMetadata, ConsumerGroupMember
from odradek.coordinator.group.consumer.consumer_group_records import MemberSubscriptionRecord
from odradek.coordinator.group.consumer.consumer_protocol import decode_assignment, encode_assignment
from odradek.coordinator.group.coordinator_record import decode_record
from odradek.coordinator.group.group_requests import CommitPartition, CommitRequest, LeavingMember
from odradek.protocol.generated import consumer_protocol_subscription as sub_schema
from odradek.protocol.generated.error_codes import ErrorCode as E
from odradek.protocol.primitives import EncodeBuffer
from tests.coordinator.group.consumer.consumer_harness import CONSUMER_CONFIG, ConsumerShardHarness, Member


def subscription(topics, owned=()) -> bytes:
    """A ConsumerProtocolSubscription v1 (owned partitions: ``[(topic, [partitions])]``)."""
    msg = sub_schema.ConsumerProtocolSubscription(
        topics=list(topics), owned_partitions=[sub_schema.TopicPartition(t, list(ps)) for t, ps in owned])
    out = EncodeBuffer(b"\x00\x01")
    sub_schema.WRITERS[1](msg, out)
    return bytes(out)


class ClassicConsumer:
    """An eager classic consumer (range): gives up everything before it joins."""

    def __init__(self, h: ConsumerShardHarness, group: str, name: str) -> None:
        self.h, self.group, self.name = h, group, name
        self.member_id, self.generation, self.owned = "", -1, {}

    def join(self):
        answer = self.h.join(self.group, self.member_id, protocols=(("range", subscription(["t"])),),
                             client_id=self.name)
        return answer

    def joined(self, answer):
        r = answer.results[-1]
        if r.error == E.NONE:
            self.member_id, self.generation = r.member_id, r.generation_id
        return r

    def sync(self, assignments=()):
        r = self.h.sync(self.group, self.member_id, self.generation, assignments).result
        if r.error == E.NONE:
            self.owned = decode_assignment(r.assignment)
        return r

    def heartbeat(self):
        return self.h.apply(self.h.shard.heartbeat(self.group, self.member_id, None, self.generation))

    def rejoin(self):
        """Heartbeat; on REBALANCE_IN_PROGRESS give up everything (eager), rejoin and sync."""
        error = self.heartbeat()
        if error == E.REBALANCE_IN_PROGRESS:
            self.owned = {}
            assert self.joined(self.join()).error == E.NONE
            assert self.sync().error == E.NONE
        return error

    def partitions(self) -> set:
        return {(t, p) for t, ps in self.owned.items() for p in ps}


def stable_classic_group(h: ConsumerShardHarness) -> list[ClassicConsumer]:
    """Two classic members sharing t (4 partitions), assigned by the leader, Stable."""
    a, b = ClassicConsumer(h, "g", "a"), ClassicConsumer(h, "g", "b")
    ja, jb = a.join(), b.join()
    h.tick()
    a.joined(ja)
    b.joined(jb)
    leader = a if ja.results[-1].leader_id == a.member_id else b
    plan = [(a.member_id, encode_assignment({"t": frozenset({0, 1})}, 1)),
            (b.member_id, encode_assignment({"t": frozenset({2, 3})}, 1))]
    for c in (a, b):
        assert c.sync(plan if c is leader else ()).error == E.NONE
    assert h.state("g") == "Stable"
    return [a, b]


def owned_by_all(classics, members) -> list:
    names = {v: k for k, v in classics[0].h.topic_ids.items()}
    owned = [p for c in classics for p in c.partitions()]
    owned += [(names[t], p) for m in members for t, p in m.partitions()]
    return owned


def commit(h, member_id, generation, offset, version=8):
    req = CommitRequest("g", member_id, None, generation, partitions=(CommitPartition("t", 0, offset),),
                        api_version=version)
    return h.apply(h.shard.commit_offsets(req))[("t", 0)]


def test_a_stable_classic_group_upgrades_and_its_classic_members_roll_over():
    h = ConsumerShardHarness()
    h.topic("t", 4)
    a, b = stable_classic_group(h)
    assert commit(h, a.member_id, a.generation, 42) == E.NONE

    new = Member(h, "g", ["t"])
    r = new.beat()
    assert r.error == E.NONE
    group = h.group("g")
    assert group is not None and h.shard.groups.group("g") is None, "converted to a consumer group"
    assert group.member(a.member_id).uses_classic_protocol()
    assert group.member(a.member_id).classic.session_timeout_ms == 1000
    # Converted members start where the classic generation left them.
    assert not new.partitions(), "nothing is free yet: the classic members still own everything"
    assert h.shard.fetch_offsets("g", [("t", [0])])[0][1][0][1].offset == 42

    for _ in range(6):
        for c in (a, b):
            c.rejoin()
        new.beat()
        owned = owned_by_all([a, b], [new])
        assert len(owned) == len(set(owned)), f"a partition owned twice: {owned}"
    assert sorted(owned_by_all([a, b], [new])) == [("t", p) for p in range(4)]
    assert all(c.heartbeat() == E.NONE for c in (a, b))
    assert new.partitions() and a.partitions() and b.partitions()
    # A classic member commits with its generation (the member epoch), below v9.
    assert commit(h, a.member_id, a.generation, 43) == E.NONE
    assert commit(h, a.member_id, a.generation - 1, 44) == E.ILLEGAL_GENERATION

    # Replaying the log rebuilds the same group, classic members included.
    fresh = ConsumerShardHarness()
    fresh.image = h.image
    for record in h.log:
        fresh.shard.replay(record)
    again = fresh.group("g")
    assert again.members == group.members and again.target == group.target


def test_classic_members_leave_one_by_one_and_the_group_stays_a_consumer_group():
    h = ConsumerShardHarness()
    h.topic("t", 4)
    a, b = stable_classic_group(h)
    new = Member(h, "g", ["t"])
    new.beat()
    assert h.apply(h.shard.leave_group("g", [LeavingMember(a.member_id)])) == (E.NONE, [E.NONE])
    assert h.apply(h.shard.leave_group("g", [LeavingMember(a.member_id)])) == (E.NONE, [E.UNKNOWN_MEMBER_ID])
    for _ in range(6):
        b.rejoin()
        new.beat()
    assert sorted(owned_by_all([b], [new])) == [("t", p) for p in range(4)]
    assert set(h.group("g").members) == {b.member_id, new.member_id}


def test_a_new_classic_member_joins_a_consumer_group():
    h = ConsumerShardHarness()
    h.topic("t", 2)
    m = Member(h, "g", ["t"])
    for _ in range(2):
        m.beat()
    c = ClassicConsumer(h, "g", "c")
    r = c.joined(c.join())
    assert r.error == E.NONE and r.leader_id == "" and r.protocol_name == "range"
    assert c.sync().error == E.NONE
    for _ in range(6):
        owned = owned_by_all([c], [m])
        assert len(owned) == len(set(owned)), f"a partition owned twice: {owned}"
        m.beat()
        c.rejoin()
    assert len(m.partitions()) == 1 and len(c.partitions()) == 1
    assert h.apply(h.shard.heartbeat("g", c.member_id, None, c.generation + 5)) == E.ILLEGAL_GENERATION


def test_policy_disabled_refuses_the_other_protocol_and_upgrade_only_refuses_classic_joins():
    h = ConsumerShardHarness(replace(CONSUMER_CONFIG, consumer_migration_policy="disabled"))
    h.topic("t", 4)
    stable_classic_group(h)
    assert Member(h, "g", ["t"]).beat().error == E.GROUP_ID_NOT_FOUND
    assert h.group("g") is None and h.state("g") == "Stable"
    h2 = ConsumerShardHarness(replace(CONSUMER_CONFIG, consumer_migration_policy="disabled"))
    h2.topic("t", 2)
    Member(h2, "g", ["t"]).beat()
    c = ClassicConsumer(h2, "g", "c")
    assert c.joined(c.join()).error == E.INCONSISTENT_GROUP_PROTOCOL
    h3 = ConsumerShardHarness(replace(CONSUMER_CONFIG, consumer_migration_policy="downgrade"))
    h3.topic("t", 4)
    stable_classic_group(h3)
    assert Member(h3, "g", ["t"]).beat().error == E.GROUP_ID_NOT_FOUND


def test_classic_member_metadata_round_trips_through_its_record():
    member = Member(ConsumerShardHarness(), "g", ["t"])
    record = MemberSubscriptionRecord("g", member.member_id, ConsumerGroupMember(
        member.member_id, subscribed_topic_names=("t",),
        classic=ClassicMemberMetadata(3000, (("range", b"\x00\x01"), ("roundrobin", b"x")))))
    decoded = decode_record(record.key_bytes(), record.value_bytes())
    assert decoded == record
