"""Every version of the group APIs on the wire, against a real broker (no client library)."""

from __future__ import annotations

import pytest

from odradek.coordinator.group.group_config import OFFSETS_TOPIC
from odradek.protocol.generated import ApiKey
from odradek.protocol.generated.error_codes import ErrorCode as E
from tests.server.group_wire import WireClient, module

JG = module("JoinGroupRequest")
SG = module("SyncGroupRequest")
LG = module("LeaveGroupRequest")
OC = module("OffsetCommitRequest")
OF = module("OffsetFetchRequest")
OD = module("OffsetDeleteRequest")
# A consumer protocol subscription (v0): topics ["t"], null user data.
SUBSCRIPTION = b"\x00\x00" + b"\x00\x00\x00\x01" + b"\x00\x01t" + b"\xff\xff\xff\xff"
TOPIC = "wire-topic"


@pytest.fixture(scope="module")
def client(shared_broker):
    b = shared_broker.broker
    shared_broker.call(lambda: b.topics.create(b.topics.plan_topic(TOPIC, 3, 1, None, {})))
    with WireClient(shared_broker.port) as c:
        # As a client does before its first group request: the first FindCoordinator creates
        # the offsets topic, so that every test here also runs alone.
        assert c.call(ApiKey.FIND_COORDINATOR, 1, key="wire", key_type=0).error_code == E.NONE
        yield c


def join(c, version, group, member_id="", instance_id=None, session_ms=10_000, protocols=None):
    protocols = protocols or [JG.JoinGroupRequestProtocol(name="range", metadata=SUBSCRIPTION)]
    return c.call(ApiKey.JOIN_GROUP, version, group_id=group, session_timeout_ms=session_ms,
                  rebalance_timeout_ms=10_000, member_id=member_id, group_instance_id=instance_id,
                  protocol_type="consumer", protocols=protocols)


def join_fully(c, version, group, instance_id=None):
    r = join(c, version, group, instance_id=instance_id)
    if r.error_code == E.MEMBER_ID_REQUIRED:
        r = join(c, version, group, member_id=r.member_id, instance_id=instance_id)
    assert r.error_code == E.NONE, r
    return r


def sync(c, version, group, member_id, generation, assignments=(), instance_id=None):
    return c.call(ApiKey.SYNC_GROUP, version, group_id=group, generation_id=generation, member_id=member_id,
                  group_instance_id=instance_id, protocol_type="consumer", protocol_name="range",
                  assignments=[SG.SyncGroupRequestAssignment(member_id=m, assignment=a) for m, a in assignments])


def describe(c, group, version=5):
    return c.call(ApiKey.DESCRIBE_GROUPS, version, groups=[group], include_authorized_operations=True).groups[0]


def test_find_coordinator_every_version_creates_the_offsets_topic(client, shared_broker):
    for v in range(4):
        r = client.call(ApiKey.FIND_COORDINATOR, v, key=f"fc-{v}", key_type=0)
        assert (r.error_code, r.node_id, r.port) == (E.NONE, 1, shared_broker.port)
    for v in (4, 5, 6):
        r = client.call(ApiKey.FIND_COORDINATOR, v, key_type=0, coordinator_keys=["a", "b", "c"])
        assert [(x.key, x.error_code, x.node_id) for x in r.coordinators] == [(k, E.NONE, 1) for k in "abc"]
    r = client.call(ApiKey.FIND_COORDINATOR, 4, key_type=1, coordinator_keys=["txn"])
    assert (r.coordinators[0].error_code, r.coordinators[0].node_id) == (E.NONE, 1)  # transactions (issue 19)
    image = shared_broker.broker.metadata_image()
    assert len(image.topic(OFFSETS_TOPIC).partitions) == 4
    assert image.topic_config(OFFSETS_TOPIC)["cleanup.policy"] == "compact"


@pytest.mark.parametrize("version", range(10))
def test_join_sync_heartbeat_leave(client, version):
    group = f"jg-{version}"
    first = join(client, version, group)
    if version >= 4:  # only these versions may be asked to come back with an id
        assert first.error_code == E.MEMBER_ID_REQUIRED and first.member_id
        assert first.protocol_name == (None if version >= 7 else "")
        r = join(client, version, group, member_id=first.member_id)
    else:
        r = first
    assert r.error_code == E.NONE and r.generation_id == 1 and r.leader == r.member_id
    assert r.protocol_name == "range" and [bytes(m.metadata) for m in r.members] == [SUBSCRIPTION]
    assert r.protocol_type == ("consumer" if version >= 7 else None)
    s = sync(client, min(version, 5), group, r.member_id, 1, [(r.member_id, b"mine")])
    assert s.error_code == E.NONE and bytes(s.assignment) == b"mine"
    hb = client.call(ApiKey.HEARTBEAT, min(version, 4), group_id=group, generation_id=1, member_id=r.member_id)
    assert hb.error_code == E.NONE
    d = describe(client, group, min(version, 5))
    assert (d.group_state, d.protocol_data, len(d.members)) == ("Stable", "range", 1)
    assert bytes(d.members[0].member_assignment) == b"mine"
    lv = min(version, 5)
    if lv >= 3:
        left = client.call(ApiKey.LEAVE_GROUP, lv, group_id=group, members=[LG.MemberIdentity(member_id=r.member_id)])
        assert left.error_code == E.NONE and [m.error_code for m in left.members] == [E.NONE]
    else:
        left = client.call(ApiKey.LEAVE_GROUP, lv, group_id=group, member_id=r.member_id)
        assert left.error_code == E.NONE
    assert describe(client, group).group_state == "Empty"


def test_static_member_rejoin_keeps_generation_and_fences_the_old_id(client):
    g = "static"
    r = join_fully(client, 5, g, instance_id="i1")
    sync(client, 5, g, r.member_id, 1, [(r.member_id, b"A")], instance_id="i1")
    again = join(client, 5, g, instance_id="i1")
    assert again.error_code == E.NONE and again.generation_id == 1 and again.member_id != r.member_id
    old = client.call(ApiKey.HEARTBEAT, 4, group_id=g, generation_id=1, member_id=r.member_id, group_instance_id="i1")
    assert old.error_code == E.FENCED_INSTANCE_ID
    assert bytes(sync(client, 5, g, again.member_id, 1, instance_id="i1").assignment) == b"A"
    assert describe(client, g).members[0].group_instance_id == "i1"
    by_instance = client.call(ApiKey.LEAVE_GROUP, 3, group_id=g, members=[
        LG.MemberIdentity(member_id="", group_instance_id="i1"), LG.MemberIdentity(member_id="nobody")])
    assert [m.error_code for m in by_instance.members] == [E.NONE, E.UNKNOWN_MEMBER_ID]
    assert describe(client, g).group_state == "Empty"


def test_request_errors(client):
    assert join(client, 3, "errs", session_ms=10).error_code == E.INVALID_SESSION_TIMEOUT
    assert join(client, 3, "").error_code == E.INVALID_GROUP_ID
    assert join(client, 3, "errs", member_id="who").error_code == E.UNKNOWN_MEMBER_ID
    r = join_fully(client, 3, "errs")
    assert sync(client, 3, "errs", r.member_id, 99).error_code == E.ILLEGAL_GENERATION
    hb = client.call(ApiKey.HEARTBEAT, 0, group_id="errs", generation_id=1, member_id="who")
    assert hb.error_code == E.UNKNOWN_MEMBER_ID
    other = join(client, 3, "errs", protocols=[JG.JoinGroupRequestProtocol(name="sticky", metadata=b"")])
    assert other.error_code == E.INCONSISTENT_GROUP_PROTOCOL


def commit(c, version, group, offsets, member_id="", generation=-1):
    topics = {}
    for topic, partition, offset in offsets:
        topics.setdefault(topic, []).append(OC.OffsetCommitRequestPartition(
            partition_index=partition, committed_offset=offset, committed_leader_epoch=4,
            committed_metadata=f"m{offset}"))
    r = c.call(ApiKey.OFFSET_COMMIT, version, group_id=group, generation_id_or_member_epoch=generation,
               member_id=member_id, topics=[OC.OffsetCommitRequestTopic(name=t, partitions=p) for t, p in topics.items()])
    return {(t.name, p.partition_index): p.error_code for t in r.topics for p in t.partitions}


def fetch(c, version, group, partitions=(0, 1, 2)):
    if version >= 8:
        r = c.call(ApiKey.OFFSET_FETCH, version, groups=[OF.OffsetFetchRequestGroup(
            group_id=group, topics=[OF.OffsetFetchRequestTopics(name=TOPIC, partition_indexes=list(partitions))])])
        assert r.groups[0].error_code == E.NONE
        topics = r.groups[0].topics
    else:
        r = c.call(ApiKey.OFFSET_FETCH, version, group_id=group,
                   topics=[OF.OffsetFetchRequestTopic(name=TOPIC, partition_indexes=list(partitions))])
        assert r.error_code == E.NONE
        topics = r.topics
    return {p.partition_index: (p.committed_offset, p.committed_leader_epoch, p.metadata)
            for t in topics for p in t.partitions}


@pytest.mark.parametrize("version", range(10))
def test_offset_commit_and_fetch_every_version(client, version):
    group = f"oc-{version}"
    assert commit(client, version, group, [(TOPIC, 0, 10 + version), (TOPIC, 1, 20)]) == {
        (TOPIC, 0): E.NONE, (TOPIC, 1): E.NONE}
    epoch = 4 if version >= 6 else -1
    got = fetch(client, version, group)
    assert got[2][0] == -1
    assert got[0][0] == 10 + version and got[0][2] == f"m{10 + version}"
    if version >= 5:
        assert got[0][1] == epoch


def test_commit_to_unknown_topic(client):
    assert commit(client, 8, "unk", [("no-such-topic", 0, 1), (TOPIC, 9, 1), (TOPIC, 0, 1)]) == {
        ("no-such-topic", 0): E.UNKNOWN_TOPIC_OR_PARTITION, (TOPIC, 9): E.UNKNOWN_TOPIC_OR_PARTITION,
        (TOPIC, 0): E.NONE}


def test_offset_fetch_several_groups_and_all_topics(client):
    commit(client, 8, "multi-a", [(TOPIC, 0, 1)])
    commit(client, 8, "multi-b", [(TOPIC, 1, 2), (TOPIC, 2, 3)])
    r = client.call(ApiKey.OFFSET_FETCH, 8, groups=[
        OF.OffsetFetchRequestGroup(group_id=g, topics=None) for g in ("multi-a", "multi-b", "multi-none")])
    got = {g.group_id: {(p.partition_index, p.committed_offset) for t in g.topics for p in t.partitions} for g in r.groups}
    assert got == {"multi-a": {(0, 1)}, "multi-b": {(1, 2), (2, 3)}, "multi-none": set()}
    single = client.call(ApiKey.OFFSET_FETCH, 2, group_id="multi-b", topics=None)
    assert {p.committed_offset for t in single.topics for p in t.partitions} == {2, 3}


def test_member_commits_need_the_current_generation(client):
    r = join_fully(client, 5, "gen")
    sync(client, 5, "gen", r.member_id, 1, [(r.member_id, b"")])
    assert commit(client, 8, "gen", [(TOPIC, 0, 5)], r.member_id, 1) == {(TOPIC, 0): E.NONE}
    assert commit(client, 8, "gen", [(TOPIC, 0, 5)], r.member_id, 0) == {(TOPIC, 0): E.ILLEGAL_GENERATION}
    assert commit(client, 8, "gen", [(TOPIC, 0, 5)]) == {(TOPIC, 0): E.UNKNOWN_MEMBER_ID}


def test_list_describe_delete_groups(client):
    active = join_fully(client, 5, "lst-active")
    sync(client, 5, "lst-active", active.member_id, 1, [(active.member_id, b"x")])
    commit(client, 8, "lst-empty", [(TOPIC, 0, 1)])
    for v in range(6):
        r = client.call(ApiKey.LIST_GROUPS, v, states_filter=["stable"] if v >= 4 else [])
        listed = {g.group_id: g for g in r.groups}
        assert r.error_code == E.NONE and "lst-active" in listed
        assert ("lst-empty" in listed) == (v < 4)
        if v >= 4:
            assert listed["lst-active"].group_state == "Stable"
    for v in range(6):
        d = client.call(ApiKey.DESCRIBE_GROUPS, v, groups=["lst-active", "lst-nothing"],
                        include_authorized_operations=True)
        assert [g.group_state for g in d.groups] == ["Stable", "Dead"]
        assert d.groups[0].authorized_operations == (328 if v >= 3 else -(2**31))
        assert d.groups[0].members[0].client_id == "wire-test"
    for v in range(3):
        commit(client, 8, f"del-{v}", [(TOPIC, 0, 1)])
        r = client.call(ApiKey.DELETE_GROUPS, v, groups_names=[f"del-{v}", "lst-active", "never"])
        assert [x.error_code for x in r.results] == [E.NONE, E.NON_EMPTY_GROUP, E.GROUP_ID_NOT_FOUND]
        assert fetch(client, 8, f"del-{v}")[0][0] == -1


def test_offset_delete(client):
    commit(client, 8, "od", [(TOPIC, 0, 1), (TOPIC, 1, 2)])
    r = client.call(ApiKey.OFFSET_DELETE, 0, group_id="od", topics=[OD.OffsetDeleteRequestTopic(
        name=TOPIC, partitions=[OD.OffsetDeleteRequestPartition(partition_index=0)])])
    assert r.error_code == E.NONE and r.topics[0].partitions[0].error_code == E.NONE
    assert fetch(client, 8, "od")[0][0] == -1 and fetch(client, 8, "od")[1][0] == 2
    missing = client.call(ApiKey.OFFSET_DELETE, 0, group_id="od-none", topics=[])
    assert missing.error_code == E.GROUP_ID_NOT_FOUND


def test_expiry_through_the_running_coordinator(broker):
    b = broker.broker
    broker.call(lambda: b.topics.create(b.topics.plan_topic(TOPIC, 3, 1, None, {})))
    with WireClient(broker.port) as c:
        c.call(ApiKey.FIND_COORDINATOR, 3, key="forgotten", key_type=0)  # creates the offsets topic
        join_fully(c, 3, "forgotten")
        commit(c, 8, "standalone", [(TOPIC, 0, 1)])
        week_later = b.clock.milliseconds() + 8 * 24 * 3600 * 1000
        written = broker.call(lambda: b.group_coordinator.expire_offsets(week_later))
        assert written == 2  # the offset's tombstone and the standalone group's
        assert fetch(c, 8, "standalone")[0][0] == -1
        listed = {g.group_id for g in c.call(ApiKey.LIST_GROUPS, 3).groups}
        assert "standalone" not in listed and "forgotten" in listed  # a member is still in it
