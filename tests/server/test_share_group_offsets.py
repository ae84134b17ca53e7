"""DescribeShareGroupOffsets (90), AlterShareGroupOffsets (91), DeleteShareGroupOffsets (92) on
the wire against a real broker: describe after a persister write, alter of an empty group then
describe, alter and delete refused while the group has a member (NON_EMPTY_GROUP), delete."""

from __future__ import annotations

import uuid

from odradek.protocol.generated import ApiKey
from odradek.protocol.generated.error_codes import ErrorCode as E
from tests.server.group_clients import create_topic
from tests.server.group_wire import WireClient, module
from tests.server.test_share_group_heartbeat import HB, join, settled

DESCRIBE, ALTER, DELETE = (ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS, ApiKey.ALTER_SHARE_GROUP_OFFSETS,
                           ApiKey.DELETE_SHARE_GROUP_OFFSETS)


def starts(c: WireClient, group: str, topic: str = "q") -> dict[int, int]:
    req = module("DescribeShareGroupOffsetsRequest")
    r = c.call(DESCRIBE, 1, groups=[req.DescribeShareGroupOffsetsRequestGroup(
        group_id=group, topics=[req.DescribeShareGroupOffsetsRequestTopic(topic_name=topic, partitions=[0, 1])])])
    (g,) = r.groups
    assert g.error_code == E.NONE
    return {p.partition_index: p.start_offset for t in g.topics for p in t.partitions}


def alter(c: WireClient, group: str, offsets: dict[int, int], topic: str = "q"):
    req = module("AlterShareGroupOffsetsRequest")
    return c.call(ALTER, 0, group_id=group, topics=[req.AlterShareGroupOffsetsRequestTopic(
        topic_name=topic, partitions=[req.AlterShareGroupOffsetsRequestPartition(partition_index=p, start_offset=o)
                                      for p, o in offsets.items()])])


def delete(c: WireClient, group: str, topic: str = "q"):
    req = module("DeleteShareGroupOffsetsRequest")
    return c.call(DELETE, 0, group_id=group, topics=[req.DeleteShareGroupOffsetsRequestTopic(topic_name=topic)])


def test_share_group_offsets_on_the_wire(broker):
    create_topic(broker.bootstrap, "q", 2)
    topic_id = broker.broker.metadata_image().topic("q").topic_id
    member = str(uuid.uuid4())
    with WireClient(broker.port) as c:
        first = join(c, "sg", member)
        r, _ = settled(c, "sg", member, first, 2)
        persister = broker.broker.share_persister
        assert broker.call(persister.write_state, "sg", topic_id, 0, 0, 0, 7, ()) == E.NONE
        assert starts(c, "sg") == {0: 7, 1: -1}
        assert alter(c, "sg", {0: 3}).error_code == E.NON_EMPTY_GROUP
        assert delete(c, "sg").error_code == E.NON_EMPTY_GROUP
        assert starts(c, "sg") == {0: 7, 1: -1}
        left = c.call(HB, 1, group_id="sg", member_id=member, member_epoch=-1)
        assert left.error_code == E.NONE
        answer = alter(c, "sg", {0: 3, 1: 5, 9: 1})
        assert answer.error_code == E.NONE
        (t,) = answer.responses
        assert t.topic_id == topic_id
        assert {p.partition_index: p.error_code for p in t.partitions} == {0: E.NONE, 1: E.NONE,
                                                                           9: E.UNKNOWN_TOPIC_OR_PARTITION}
        assert starts(c, "sg") == {0: 3, 1: 5}
        assert alter(c, "nobody", {0: 1}).error_code == E.GROUP_ID_NOT_FOUND
        gone = delete(c, "sg")
        assert gone.error_code == E.NONE and [(t.topic_name, t.error_code) for t in gone.responses] == [("q", E.NONE)]
        assert starts(c, "sg") == {0: -1, 1: -1}
        again = delete(c, "sg")
        assert [(t.topic_name, t.error_code) for t in again.responses] == [("q", E.UNKNOWN_TOPIC_OR_PARTITION)]
