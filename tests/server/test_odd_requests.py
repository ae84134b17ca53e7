"""Decodable requests with odd values that once closed the connection (found by
``test_fuzz_requests``): each is answered with data or an error code, and the connection
stays open."""

from __future__ import annotations

from odradek.protocol.generated import ApiKey
from odradek.protocol.generated.error_codes import ErrorCode as E
from tests.server.group_wire import WireClient, module

OC = module("OffsetCommitRequest")
OF = module("OffsetFetchRequest")
TOPIC = "odd-requests"
INT64_MAX = 2**63 - 1


def test_offset_commit_with_the_largest_retention_time_is_stored(shared_broker):
    """v2-v4 retention is added to the commit time: Long.MAX_VALUE must not overflow the
    offset record's int64 expire timestamp (it means: never expire on its own)."""
    b = shared_broker.broker
    shared_broker.call(lambda: b.topics.create(b.topics.plan_topic(TOPIC, 1, 1, None, {})))
    with WireClient(shared_broker.port) as c:
        c.call(ApiKey.FIND_COORDINATOR, 3, key="odd-retention", key_type=0)  # creates the offsets topic
        for version in (2, 3, 4):
            r = c.call(ApiKey.OFFSET_COMMIT, version, group_id=f"odd-retention-{version}",
                       generation_id_or_member_epoch=-1, member_id="", retention_time_ms=INT64_MAX,
                       topics=[OC.OffsetCommitRequestTopic(name=TOPIC, partitions=[
                           OC.OffsetCommitRequestPartition(partition_index=0, committed_offset=7)])])
            assert r.topics[0].partitions[0].error_code == E.NONE
            f = c.call(ApiKey.OFFSET_FETCH, 3, group_id=f"odd-retention-{version}",
                       topics=[OF.OffsetFetchRequestTopic(name=TOPIC, partition_indexes=[0])])
            assert f.topics[0].partitions[0].committed_offset == 7


def test_create_partitions_naming_a_topic_twice_is_invalid_request(shared_broker):
    b = shared_broker.broker
    shared_broker.call(lambda: b.topics.create(b.topics.plan_topic("odd-grow-twice", 1, 1, None, {})))
    cp = module("CreatePartitionsRequest")
    with WireClient(shared_broker.port) as c:
        r = c.call(ApiKey.CREATE_PARTITIONS, 1, timeout_ms=5000, validate_only=False, topics=[
            cp.CreatePartitionsTopic(name="odd-grow-twice", count=2, assignments=None),
            cp.CreatePartitionsTopic(name="odd-grow-twice", count=3, assignments=None)])
        assert [x.error_code for x in r.results] == [E.INVALID_REQUEST, E.INVALID_REQUEST]
    assert len(b.metadata_image().topic("odd-grow-twice").partitions) == 1


def test_create_topics_with_a_partition_index_assigned_twice_is_refused(shared_broker):
    ct = module("CreateTopicsRequest")
    broker_id = shared_broker.broker.broker_id
    twice = [ct.CreatableReplicaAssignment(partition_index=0, broker_ids=[broker_id])] * 2
    with WireClient(shared_broker.port) as c:
        r = c.call(ApiKey.CREATE_TOPICS, 5, timeout_ms=5000, validate_only=False, topics=[
            ct.CreatableTopic(name="odd-assigned-twice", num_partitions=-1, replication_factor=-1,
                              assignments=twice, configs=[])])
        assert r.topics[0].error_code == E.INVALID_REPLICA_ASSIGNMENT
    assert shared_broker.broker.metadata_image().topic("odd-assigned-twice") is None


def test_list_offsets_asking_for_a_partition_twice_is_invalid_request(shared_broker):
    b = shared_broker.broker
    shared_broker.call(lambda: b.topics.create(b.topics.plan_topic("odd-list-twice", 2, 1, None, {})))
    lo = module("ListOffsetsRequest")
    with WireClient(shared_broker.port) as c:
        r = c.call(ApiKey.LIST_OFFSETS, 5, replica_id=-1, isolation_level=0, topics=[
            lo.ListOffsetsTopic(name="odd-list-twice", partitions=[
                lo.ListOffsetsPartition(partition_index=i, current_leader_epoch=-1, timestamp=ts)
                for i, ts in ((0, -1), (1, -1), (0, -2))])])
        assert [(p.partition_index, p.error_code) for p in r.topics[0].partitions] == [
            (0, E.INVALID_REQUEST), (1, E.NONE), (0, E.INVALID_REQUEST)]


def test_join_group_listing_a_protocol_twice_joins_with_it(shared_broker):
    """The group counts each member's protocols once (a name listed twice used to look
    unsupported by the member itself, and choosing the group's protocol raised)."""
    jg = module("JoinGroupRequest")
    with WireClient(shared_broker.port, timeout=5) as c:
        c.call(ApiKey.FIND_COORDINATOR, 3, key="odd-join", key_type=0)  # creates the offsets topic
        r = c.call(ApiKey.JOIN_GROUP, 3, group_id="odd-join", session_timeout_ms=10_000, rebalance_timeout_ms=10_000,
                   member_id="", protocol_type="consumer",
                   protocols=[jg.JoinGroupRequestProtocol(name="range", metadata=b"a"),
                              jg.JoinGroupRequestProtocol(name="range", metadata=b"b")])
        assert (r.error_code, r.protocol_name, r.leader) == (E.NONE, "range", r.member_id)
