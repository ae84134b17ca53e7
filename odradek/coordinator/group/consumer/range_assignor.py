"""``RangeAssignor``: the "range" server-side assignor of KIP-848 (Kafka's ``RangeAssignor``
in ``org.apache.kafka.coordinator.group.assignor``).

Members are ordered once for the whole group: static members (with a ``group.instance.id``)
first, by instance id, then dynamic members by member id. For each topic, its subscribers
in that order get consecutive ranges of partitions: with ``P`` partitions and ``S``
subscribers each gets ``P // S``, and the first ``P % S`` one more. Example, members M0 and
M1, topics T1 and T2 of 3 partitions each::

    M0: T1 [0, 1], T2 [0, 1]
    M1: T1 [2],    T2 [2]

Co-partitioning: topics with the same partition count and the same subscribers are split
the same way, so a member gets the same partition numbers of each (joins of co-partitioned
streams rely on it).

Stickiness comes from the order alone: the current assignment is not read, and the same
members (and topics) always give the same ranges. Instance ids make it survive restarts:
a static member that rejoins under a new member id keeps its place in the order, hence its
partitions, whereas dynamic members are placed by member id, which changes when they
rejoin.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping

from odradek.coordinator.group.consumer.assignment import (
    MemberSubscription,
    PartitionAssignorError,
    TopicMetadata,
)

RANGE_ASSIGNOR_NAME = "range"


def member_order(members: Mapping[str, MemberSubscription]) -> list[str]:
    """Member ids in range order: static members by instance id (then member id), then
    dynamic members by member id (Kafka's ``RangeAssignor.sortMemberIds``)."""

    def key(member_id: str) -> tuple[int, str, str]:
        instance_id = members[member_id].instance_id
        if instance_id is not None:
            return (0, instance_id, member_id)
        return (1, member_id, "")

    return sorted(members, key=key)


class RangeAssignor:
    """The "range" assignor: per-topic ranges, co-partitioned, ignores racks."""

    name = RANGE_ASSIGNOR_NAME

    def assign(
        self,
        members: Mapping[str, MemberSubscription],
        topics: Mapping[uuid.UUID, TopicMetadata],
    ) -> dict[str, dict[uuid.UUID, frozenset[int]]]:
        """member id -> new target assignment (module docstring).

        Raises ``PartitionAssignorError`` when a member subscribes to a topic missing from
        ``topics`` (Kafka: "Member is subscribed to a non-existent topic").
        """
        ordered = member_order(members)
        subscribers: dict[uuid.UUID, list[str]] = {}
        for member_id in ordered:
            for topic_id in sorted(members[member_id].subscribed_topic_ids):
                if topic_id not in topics:
                    raise PartitionAssignorError(
                        f"Member {member_id} is subscribed to a non-existent topic {topic_id}"
                    )
                subscribers.setdefault(topic_id, []).append(member_id)
        assignment: dict[str, dict[uuid.UUID, frozenset[int]]] = {m: {} for m in ordered}
        for topic_id in sorted(subscribers):
            topic_subscribers = subscribers[topic_id]
            num_partitions = max(topics[topic_id].num_partitions, 0)
            min_quota, extra = divmod(num_partitions, len(topic_subscribers))
            start = 0
            for rank, member_id in enumerate(topic_subscribers):
                end = start + min_quota + (1 if rank < extra else 0)
                if end > start:
                    assignment[member_id][topic_id] = frozenset(range(start, end))
                start = end
        return assignment
