"""ShareGroupHeartbeat v1 and ShareGroupDescribe v1 on the wire against a real broker: join
with the client's own member id, the assignment by topic id, a second member sharing the
topic, fencing, ListGroups type "share", DescribeGroups GROUP_ID_NOT_FOUND, leave,
DeleteGroups, and the group surviving a broker restart (its records replayed)."""

from __future__ import annotations

import uuid

import pytest

from odradek.protocol.generated import ApiKey
from odradek.protocol.generated.error_codes import ErrorCode as E
from odradek.testing.broker import InProcessBroker
from tests.server.group_clients import create_topic, wait_for
from tests.server.group_wire import WireClient

HB, DESCRIBE = ApiKey.SHARE_GROUP_HEARTBEAT, ApiKey.SHARE_GROUP_DESCRIBE


def join(c: WireClient, group: str, member_id: str, topics=("q",)):
    c.call(ApiKey.FIND_COORDINATOR, 3, key=group, key_type=0)  # creates __consumer_offsets

    def attempt():
        r = c.call(HB, 1, group_id=group, member_id=member_id, member_epoch=0, subscribed_topic_names=list(topics))
        return r if r.error_code not in (E.COORDINATOR_LOAD_IN_PROGRESS, E.COORDINATOR_NOT_AVAILABLE,
                                         E.NOT_COORDINATOR) else None
    return wait_for(attempt)


def beat(c: WireClient, group: str, member_id: str, epoch: int):
    return c.call(HB, 1, group_id=group, member_id=member_id, member_epoch=epoch)


def settled(c: WireClient, group: str, member_id: str, first, want: int):
    """Heartbeat until the member holds ``want`` partitions: the first heartbeats of a share
    group find its partitions' share-group state still initializing (not yet assignable)."""
    last = {"r": first, "parts": parts(first) if first.assignment is not None else {}}

    def done():
        r = beat(c, group, member_id, last["r"].member_epoch)
        assert r.error_code == E.NONE
        last["r"] = r
        if r.assignment is not None:
            last["parts"] = parts(r)
        return sum(len(ps) for ps in last["parts"].values()) == want
    if sum(len(ps) for ps in last["parts"].values()) != want:
        wait_for(done)
    return last["r"], last["parts"]


def parts(r) -> dict:
    return {t.topic_id: sorted(t.partitions) for t in r.assignment.topic_partitions}


def test_share_group_heartbeat_and_describe_on_the_wire(broker):
    create_topic(broker.bootstrap, "q", 2)
    a, b = str(uuid.uuid4()), str(uuid.uuid4())
    with WireClient(broker.port) as c:
        ra = join(c, "sg", a)
        assert (ra.error_code, ra.member_id, ra.heartbeat_interval_ms) == (E.NONE, a, 5000)
        ra, got = settled(c, "sg", a, ra, 2)
        (topic_id, got), = got.items()
        assert got == [0, 1] and topic_id == broker.broker.metadata_image().topic("q").topic_id
        rb = join(c, "sg", b)
        assert rb.error_code == E.NONE and len(parts(rb)[topic_id]) == 1
        ra2 = beat(c, "sg", a, ra.member_epoch)
        assert ra2.member_epoch == rb.member_epoch and parts(ra2)[topic_id] != parts(rb)[topic_id]
        assert beat(c, "sg", a, ra2.member_epoch).assignment is None  # unchanged: not sent
        assert beat(c, "sg", a, ra2.member_epoch + 5).error_code == E.FENCED_MEMBER_EPOCH
        assert beat(c, "sg", "stranger", 1).error_code == E.UNKNOWN_MEMBER_ID
        assert c.call(HB, 1, group_id="sg", member_id="", member_epoch=1).error_code == E.INVALID_REQUEST

        d = c.call(DESCRIBE, 1, group_ids=["sg", "nope"], include_authorized_operations=False)
        sg, nope = d.groups
        assert (sg.error_code, sg.group_state, sg.assignor_name) == (E.NONE, "Stable", "simple")
        assert sorted(m.member_id for m in sg.members) == sorted([a, b])
        assert {m.assignment.topic_partitions[0].topic_name for m in sg.members} == {"q"}
        assert nope.error_code == E.GROUP_ID_NOT_FOUND

        listed = c.call(ApiKey.LIST_GROUPS, 5, states_filter=[], types_filter=["share"])
        assert [(g.group_id, g.group_type, g.group_state) for g in listed.groups] == [("sg", "share", "Stable")]
        assert c.call(ApiKey.LIST_GROUPS, 5, states_filter=[], types_filter=["consumer"]).groups == []
        dg = c.call(ApiKey.DESCRIBE_GROUPS, 5, groups=["sg"], include_authorized_operations=False)
        assert dg.groups[0].error_code == E.GROUP_ID_NOT_FOUND

        assert c.call(ApiKey.DELETE_GROUPS, 2, groups_names=["sg"]).results[0].error_code == E.NON_EMPTY_GROUP
        assert beat(c, "sg", a, -1).member_epoch == -1
        assert beat(c, "sg", b, -1).error_code == E.NONE
        assert c.call(ApiKey.DELETE_GROUPS, 2, groups_names=["sg"]).results[0].error_code == E.NONE
        d = c.call(DESCRIBE, 1, group_ids=["sg"], include_authorized_operations=False)
        assert d.groups[0].error_code == E.GROUP_ID_NOT_FOUND


def test_share_group_survives_a_restart(tmp_path):
    data = tmp_path / "data"
    a = str(uuid.uuid4())
    with InProcessBroker(data) as b:
        create_topic(b.bootstrap, "q", 3)
        with WireClient(b.port) as c:
            r, assigned = settled(c, "durable", a, join(c, "durable", a), 3)
            epoch = r.member_epoch
    with InProcessBroker(data) as b:
        with WireClient(b.port) as c:
            c.call(ApiKey.FIND_COORDINATOR, 3, key="durable", key_type=0)

            def resumed():
                r = beat(c, "durable", a, epoch)
                return r if r.error_code not in (E.COORDINATOR_LOAD_IN_PROGRESS, E.COORDINATOR_NOT_AVAILABLE) else None
            r = wait_for(resumed)
            assert (r.error_code, r.member_epoch) == (E.NONE, epoch)  # same member, same epoch
            d = c.call(DESCRIBE, 1, group_ids=["durable"], include_authorized_operations=False).groups[0]
            assert [m.member_id for m in d.members] == [a]
            assert {t.topic_id: sorted(t.partitions) for t in d.members[0].assignment.topic_partitions} == assigned
