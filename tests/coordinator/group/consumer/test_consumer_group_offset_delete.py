"""OffsetDelete on a KIP-848 consumer
group, as Kafka's OffsetMetadataManager.deleteOffsets: accepted in any state (ConsumerGroup's
validateOffsetDelete), GROUP_SUBSCRIBED_TO_TOPIC for the topics the group subscribes to, the
others' offsets deleted."""

from odradek.coordinator.group.group_requests import CommitPartition, CommitRequest
from odradek.protocol.generated.error_codes import ErrorCode as E
from tests.coordinator.group.consumer.consumer_harness import ConsumerShardHarness, Member


def test_offset_delete_on_a_consumer_group_with_a_live_member():
    h = ConsumerShardHarness()
    h.topic("sub", 2)
    h.topic("other", 1)
    a = Member(h, "g", ["sub"])
    a.beat()
    req = CommitRequest("g", a.member_id, None, a.epoch, -1,
                        (CommitPartition("sub", 0, 5), CommitPartition("other", 0, 7)))
    assert h.apply(h.shard.commit_offsets(req)) == {("sub", 0): E.NONE, ("other", 0): E.NONE}
    error, per_partition = h.apply(h.shard.delete_offsets("g", [("sub", 0), ("other", 0)]))
    assert error == E.NONE
    assert per_partition == {("sub", 0): E.GROUP_SUBSCRIBED_TO_TOPIC, ("other", 0): E.NONE}
    left = {(t, p): v.offset for t, parts in h.shard.fetch_offsets("g", None) for p, v in parts}
    assert left == {("sub", 0): 5}
