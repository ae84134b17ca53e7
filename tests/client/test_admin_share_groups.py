"""The admin client's share-group calls (client/admin_share_groups.py) against a real broker:
list (ListGroups type share), describe (ShareGroupDescribe), offsets (DescribeShareGroupOffsets),
reset (AlterShareGroupOffsets, refused while members remain), delete offsets and the group."""

from __future__ import annotations

import pytest

from odradek.client import AdminClient, TopicPartition
from odradek.client.errors import BrokerError
from odradek.protocol.generated.error_codes import ErrorCode
from tests.client.test_share_consumer import member, ready, share_broker  # noqa: F401 - the fixture
from tests.server.group_clients import create_topic, produce, wait_for


def test_list_describe_offsets_reset_delete(share_broker, topic_name):  # noqa: F811
    create_topic(share_broker.bootstrap, topic_name, 1)
    c = member(share_broker, "g-admin")
    admin = AdminClient(share_broker.bootstrap)
    try:
        c.subscribe([topic_name])
        ready(c, topic=topic_name)
        produce(share_broker.bootstrap, topic_name, [b"a", b"b", b"c"], partitions=1)
        got = []
        wait_for(lambda: len(got) >= 3, step=lambda: got.extend(c.poll(0.1)))
        assert list(c.commit_sync().values()) == [None]
        assert "g-admin" in admin.list_share_groups()
        (desc,) = admin.describe_share_groups(["g-admin"]).values()
        assert desc.state.lower() == "stable" and desc.type == "share"
        (m,) = desc.members
        assert m.member_id == c.member_id and m.assignment == (TopicPartition(topic_name, 0),)
        assert m.subscribed_topics == (topic_name,)
        tp = TopicPartition(topic_name, 0)
        known = admin.list_share_group_offsets("g-admin")[tp]
        assert (known.start_offset, known.lag) == (3, 0)  # 0-2 accepted (KIP-1226 lag)
        with pytest.raises(BrokerError) as refused:
            admin.alter_share_group_offsets("g-admin", {tp: 3})
        assert refused.value.code == ErrorCode.NON_EMPTY_GROUP
        c.close()
        wait_for(lambda: not admin.describe_share_groups(["g-admin"])["g-admin"].members)
        known = admin.list_share_group_offsets("g-admin")[tp]
        assert (known.start_offset, known.lag) == (3, 0)  # still so once the member closed
        admin.alter_share_group_offsets("g-admin", {tp: 2})
        known = admin.list_share_group_offsets("g-admin", [tp])[tp]
        assert (known.start_offset, known.lag) == (2, 1)  # initialized: delivery complete count 0
        admin.delete_share_group_offsets("g-admin", [topic_name])
        assert tp not in admin.list_share_group_offsets("g-admin")
        admin.delete_groups(["g-admin"])
        assert "g-admin" not in admin.list_share_groups()
    finally:
        c.close()
        admin.close()


def test_a_partition_answered_with_an_error_is_left_out(caplog):
    # Kafka's ListShareGroupOffsetsHandler: the group's other partitions are still listed
    # (the console's in-flight counts rely on it); a group-level error raises.
    import asyncio

    from odradek.client.admin_share_groups import ShareGroupAdmin, SharePartitionOffset
    from odradek.protocol.generated.describe_share_group_offsets_response import (
        DescribeShareGroupOffsetsResponse as Response,
        DescribeShareGroupOffsetsResponseGroup as Group,
        DescribeShareGroupOffsetsResponsePartition as Partition,
        DescribeShareGroupOffsetsResponseTopic as Topic,
    )

    class Coordinator:
        def __init__(self, response):
            self.response = response

        async def send(self, api_key, request, error_of):
            return self.response

    class Admin(ShareGroupAdmin):
        def __init__(self, response):
            self._coordinator = lambda group_id: Coordinator(response)

    partitions = [Partition(0, 5, 1, 2), Partition(1, error_code=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)]
    answer = Response(groups=[Group("g", topics=[Topic("t", partitions=partitions)])])
    found = asyncio.run(Admin(answer).list_share_group_offsets("g"))
    assert found == {TopicPartition("t", 0): SharePartitionOffset(5, 1, 2)}
    assert "Skipping return offset for t-1 due to error UNKNOWN_TOPIC_OR_PARTITION" in caplog.text
    refused = Response(groups=[Group("g", error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED)])
    with pytest.raises(BrokerError) as e:
        asyncio.run(Admin(refused).list_share_group_offsets("g"))
    assert e.value.code == ErrorCode.GROUP_AUTHORIZATION_FAILED
