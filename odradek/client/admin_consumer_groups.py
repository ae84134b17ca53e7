"""The admin client's view of KIP-848 consumer groups: ConsumerGroupDescribe (API 69).

A consumer group (``group.protocol=consumer`` members, the coordinator assigning) has epochs
that a classic description has no place for: the group epoch, the epoch of its target
assignment, and per member its epoch, its current assignment and its target. Kafka's
``Admin.describeConsumerGroups`` asks ConsumerGroupDescribe first and falls back to
DescribeGroups for a group the coordinator does not know as a consumer group
(GROUP_ID_NOT_FOUND) or a broker without the API; ``describe_consumer_groups`` answers None
for those, and the caller describes them with ``describe_groups``.

``ConsumerGroupDescription`` reads like ``GroupDescription`` (``group_id``, ``state``,
``protocol_type`` "consumer", ``protocol`` the assignor's name, ``members`` with
``assignment``), so code that shows a classic group shows this one too.
"""

from __future__ import annotations

from dataclasses import dataclass

from odradek.client.errors import UnsupportedVersionError
from odradek.client.topic_partition import TopicPartition
from odradek.protocol.generated import ApiKey
from odradek.protocol.generated.consumer_group_describe_request import ConsumerGroupDescribeRequest
from odradek.protocol.generated.error_codes import ErrorCode

__all__ = ["ConsumerGroupAdmin", "ConsumerGroupDescription", "ConsumerGroupMemberDescription"]


@dataclass(frozen=True, slots=True)
class ConsumerGroupMemberDescription:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    assignment: tuple[TopicPartition, ...]
    member_epoch: int
    target_assignment: tuple[TopicPartition, ...]
    subscribed_topics: tuple[str, ...] = ()
    subscribed_topic_regex: str | None = None


@dataclass(frozen=True, slots=True)
class ConsumerGroupDescription:
    group_id: str
    state: str
    protocol: str  # the assignor's name (Kafka's partitionAssignor)
    group_epoch: int
    assignment_epoch: int  # the target assignment's epoch
    members: tuple[ConsumerGroupMemberDescription, ...] = ()
    protocol_type: str = "consumer"
    type: str = "consumer"  # Kafka's GroupType


def _partitions(assignment) -> tuple[TopicPartition, ...]:
    if assignment is None:
        return ()
    return tuple(sorted(TopicPartition(t.topic_name, p) for t in assignment.topic_partitions for p in t.partitions))


def _description(group) -> ConsumerGroupDescription:
    members = tuple(
        ConsumerGroupMemberDescription(
            m.member_id, m.instance_id, m.client_id, m.client_host, _partitions(m.assignment), m.member_epoch,
            _partitions(m.target_assignment), tuple(m.subscribed_topic_names or ()), m.subscribed_topic_regex)
        for m in group.members)
    return ConsumerGroupDescription(group.group_id, group.group_state, group.assignor_name, group.group_epoch,
                                    group.assignment_epoch, members)


class ConsumerGroupAdmin:
    """Mixed into AsyncAdminClient (uses its ``_coordinator`` and ``_per_group``)."""

    async def describe_consumer_groups(self, group_ids) -> dict[str, ConsumerGroupDescription | None]:
        """Each group's ``ConsumerGroupDescription``, or None when it is not a consumer group
        the coordinator knows (a classic group, no group, or no ConsumerGroupDescribe)."""
        async def one(group_id: str):
            try:
                response = await self._coordinator(group_id).send(
                    ApiKey.CONSUMER_GROUP_DESCRIBE, ConsumerGroupDescribeRequest(group_ids=[group_id]),
                    lambda r: r.groups[0].error_code if r.groups else 0)
            except UnsupportedVersionError:
                return 0, None, None
            group = response.groups[0]
            if group.error_code == ErrorCode.GROUP_ID_NOT_FOUND:
                return 0, None, None
            return group.error_code, group.error_message, None if group.error_code else _description(group)

        return await self._per_group(group_ids, one)
