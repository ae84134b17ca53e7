"""Commits at generation -1 with a member id to an empty group are accepted, as Kafka's
ClassicGroup.validateOffsetCommit does: a KIP-848 client (librdkafka with
group.protocol=consumer) that only assign()s always sends its own member id."""

from odradek.protocol.generated.error_codes import ErrorCode as E
from tests.coordinator.group.harness import ShardHarness
from tests.coordinator.group.test_offsets import commit, fetched


def test_standalone_consumer_with_a_member_id_commits_again_while_the_group_is_empty():
    # librdkafka with group.protocol=consumer and assign(): its own member id (KIP-1082),
    # generation -1, no group membership. Kafka's ClassicGroup.validateOffsetCommit accepts
    # generation < 0 while the group is Empty, whatever the member id.
    h = ShardHarness()
    for offset in (5, 6, 7):
        assert commit(h, member="5DkSyKp7S0Si56pNX6Qg8w", generation=-1,
                      offsets=[("t", 0, offset)]) == {("t", 0): E.NONE}
    assert fetched(h) == {("t", 0): 7}


def test_a_member_id_without_generation_is_still_refused_by_a_group_with_members():
    h = ShardHarness()
    h.joined_group("g")
    assert commit(h, member="not-a-member", generation=-1) == {("t", 0): E.UNKNOWN_MEMBER_ID}
