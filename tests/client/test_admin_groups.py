"""The admin client's group calls against a real broker: list, describe and delete groups;
list, alter and delete their committed offsets. A live member is made through the
coordinator seam (JoinGroup + SyncGroup by hand), which also checks that seam."""

from __future__ import annotations

import pytest

from odradek.client import (
    AsyncAdminClient,
    AsyncConsumer,
    AsyncProducer,
    BrokerError,
    OffsetAndMetadata,
    TopicPartition,
)
from odradek.client.admin_groups import decode_assignment
from odradek.client.cluster import ClusterClient
from odradek.client.coordinator import GroupCoordinatorClient
from odradek.protocol import codec
from odradek.protocol.generated import ApiKey
from odradek.protocol.generated.consumer_protocol_assignment import (
    ConsumerProtocolAssignment,
)
from odradek.protocol.generated.consumer_protocol_assignment import (
    TopicPartition as AssignedPartitions,
)
from odradek.protocol.generated.consumer_protocol_subscription import (
    ConsumerProtocolSubscription,
)
from odradek.protocol.generated.error_codes import ErrorCode
from odradek.protocol.generated.join_group_request import (
    JoinGroupRequest,
    JoinGroupRequestProtocol,
)
from odradek.protocol.generated.sync_group_request import (
    SyncGroupRequest,
    SyncGroupRequestAssignment,
)
from odradek.protocol.primitives import EncodeBuffer
from tests.client.helpers import create_topic, run


def test_offsets_of_a_group_listed_altered_and_deleted(broker, topic_name):
    group = "g-" + topic_name
    tp0, tp1 = TopicPartition(topic_name, 0), TopicPartition(topic_name, 1)

    async def main():
        await create_topic(broker.bootstrap, topic_name, 2)
        async with AsyncAdminClient(broker.bootstrap) as admin:
            assert await admin.list_group_offsets(group) == {}
            await admin.alter_group_offsets(group, {tp0: 5, tp1: OffsetAndMetadata(7, "meta")})
            assert await admin.list_group_offsets(group) == {
                tp0: OffsetAndMetadata(5, "", -1), tp1: OffsetAndMetadata(7, "meta", -1)}
            assert await admin.list_group_offsets(group, [tp1]) == {tp1: OffsetAndMetadata(7, "meta", -1)}
            listed = {g.group_id: g for g in await admin.list_groups()}
            assert listed[group].state == "Empty"
            assert group in {g.group_id for g in await admin.list_groups(states=["Empty"])}
            description = (await admin.describe_groups([group]))[group]
            assert (description.state, description.members) == ("Empty", ())
            await admin.delete_group_offsets(group, [tp0])
            assert set(await admin.list_group_offsets(group)) == {tp1}
            await admin.delete_groups([group])
            assert group not in {g.group_id for g in await admin.list_groups()}
            with pytest.raises(BrokerError) as info:
                await admin.delete_groups([group])
            assert info.value.code in (ErrorCode.GROUP_ID_NOT_FOUND, ErrorCode.NON_EMPTY_GROUP)

    run(main())


def consumer_protocol(name: str, value) -> bytes:
    """A consumer protocol message (subscription or assignment) in version 0."""
    out = EncodeBuffer(b"\x00\x00")
    codec.module(name).WRITERS[0](value, out)
    return bytes(out)


async def join_as_only_member(coordinator: GroupCoordinatorClient, topic: str, partitions: list[int]) -> str:
    """JoinGroup and SyncGroup through the coordinator seam, as a group consumer will: the
    only member leads and assigns itself ``partitions``. Returns its member id."""
    subscription = consumer_protocol("ConsumerProtocolSubscription", ConsumerProtocolSubscription(topics=[topic]))
    join = JoinGroupRequest(group_id=coordinator.group_id, session_timeout_ms=30_000, rebalance_timeout_ms=30_000,
                            member_id="", protocol_type="consumer",
                            protocols=[JoinGroupRequestProtocol("range", subscription)])
    joined = await coordinator.send(ApiKey.JOIN_GROUP, join, lambda r: r.error_code)
    if joined.error_code == ErrorCode.MEMBER_ID_REQUIRED:  # JoinGroup v4+: join again with the id
        join.member_id = joined.member_id
        joined = await coordinator.send(ApiKey.JOIN_GROUP, join, lambda r: r.error_code)
    assert joined.error_code == 0 and joined.leader == joined.member_id
    assignment = consumer_protocol("ConsumerProtocolAssignment", ConsumerProtocolAssignment(
        assigned_partitions=[AssignedPartitions(topic, partitions)]))
    sync = SyncGroupRequest(group_id=coordinator.group_id, generation_id=joined.generation_id,
                            member_id=joined.member_id, protocol_type="consumer", protocol_name="range",
                            assignments=[SyncGroupRequestAssignment(joined.member_id, assignment)])
    synced = await coordinator.send(ApiKey.SYNC_GROUP, sync, lambda r: r.error_code)
    assert synced.error_code == 0 and bytes(synced.assignment) == assignment
    return joined.member_id


def test_a_live_group_is_described_with_its_members_partitions(broker, topic_name):
    group = "live-" + topic_name

    async def main():
        await create_topic(broker.bootstrap, topic_name, 3)
        member = ClusterClient(broker.bootstrap, client_id="the-member")
        await member.start()
        coordinator = GroupCoordinatorClient(member, group)
        try:
            member_id = await join_as_only_member(coordinator, topic_name, [0, 2])
            async with AsyncAdminClient(broker.bootstrap) as admin:
                description = (await admin.describe_groups([group]))[group]
                assert (description.state, description.protocol_type, description.protocol) == (
                    "Stable", "consumer", "range")
                [m] = description.members
                assert (m.member_id, m.client_id) == (member_id, "the-member")
                assert m.assignment == (TopicPartition(topic_name, 0), TopicPartition(topic_name, 2))
                listed = {g.group_id: g for g in await admin.list_groups()}
                assert (listed[group].protocol_type, listed[group].state) == ("consumer", "Stable")
                with pytest.raises(BrokerError) as info:
                    await admin.delete_groups([group])
                assert info.value.code == ErrorCode.NON_EMPTY_GROUP
        finally:
            await coordinator.close()
            await member.close()

    run(main())


def test_a_standalone_consumer_commit_is_seen_by_the_admin(broker, topic_name):
    group = "solo-" + topic_name
    tp = TopicPartition(topic_name, 0)

    async def main():
        await create_topic(broker.bootstrap, topic_name, 1)
        async with AsyncConsumer(broker.bootstrap, group_id=group) as consumer:
            consumer.assign([tp])
            await consumer.commit({tp: 3})
        async with AsyncAdminClient(broker.bootstrap) as admin:
            assert (await admin.list_group_offsets(group))[tp].offset == 3

    run(main())


def test_decode_assignment_tolerates_garbage():
    assert decode_assignment(b"") == ()
    assert decode_assignment(b"\x00\x00\xff") == ()
    # version 0: one topic "t" with partitions [1, 2], no user data
    data = b"\x00\x00" + b"\x00\x00\x00\x01" + b"\x00\x01t" + b"\x00\x00\x00\x02\x00\x00\x00\x01\x00\x00\x00\x02" + b"\xff\xff\xff\xff"
    assert decode_assignment(data) == (TopicPartition("t", 1), TopicPartition("t", 2))


def test_reset_group_offsets_like_the_kafka_tool(broker, topic_name):
    group = "reset-" + topic_name
    tp = TopicPartition(topic_name, 0)

    async def main():
        await create_topic(broker.bootstrap, topic_name, 1)
        async with AsyncProducer(broker.bootstrap) as producer:
            for i in range(10):
                producer.send(topic_name, b"v", timestamp=5000 + 100 * i)
            await producer.flush()
        async with AsyncAdminClient(broker.bootstrap) as admin:
            await admin.delete_records({tp: 2})
            assert await admin.reset_group_offsets(group, [tp], to_latest=True) == {tp: 10}
            assert await admin.reset_group_offsets(group, [tp], shift_by=-3) == {tp: 7}
            assert await admin.reset_group_offsets(group, [tp], shift_by=-30) == {tp: 2}  # clamped
            assert await admin.reset_group_offsets(group, [tp], to_timestamp=5450) == {tp: 5}
            assert await admin.reset_group_offsets(group, [tp], to_timestamp=99_999) == {tp: 10}
            assert await admin.reset_group_offsets(group, [tp], to_offset=8, dry_run=True) == {tp: 8}
            assert (await admin.list_group_offsets(group))[tp].offset == 10  # dry run: unchanged
            assert await admin.reset_group_offsets(group, [tp], to_earliest=True) == {tp: 2}
            assert (await admin.list_group_offsets(group))[tp].offset == 2
            with pytest.raises(ValueError):
                await admin.reset_group_offsets(group, [tp], to_earliest=True, shift_by=1)

    run(main())
