"""Value types shared by the server-side partition assignors of KIP-848 and their callers.

Kafka's counterparts live in ``org.apache.kafka.coordinator.group.api.assignor``
(``PartitionAssignor``, ``GroupSpec``, ``SubscribedTopicDescriber``, ``GroupAssignment``,
``PartitionAssignorException``). odradek flattens them into plain mappings:

- ``TopicPartitions``: topic id -> partition indexes; topics with no partition are omitted;
- ``TopicMetadata``: what the assignor knows of a topic (partition count, replica racks);
- ``MemberSubscription``: one member's subscription and current target assignment;
- ``PartitionAssignor``: ``assign(members, topics)`` -> member id -> new target assignment.

An assignor is pure and deterministic: the same inputs give the same output, because the
result is written to ``__consumer_offsets`` and replayed.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Protocol

TopicPartitions = Mapping[uuid.UUID, frozenset[int]]
"""Topic id -> partition indexes. A topic with no partition is omitted, never an empty set."""


@dataclass(frozen=True, slots=True)
class TopicMetadata:
    """A topic as the assignor sees it.

    ``partition_racks`` maps a partition index to the racks of its replicas; it is an empty
    mapping when racks are unknown (then assignors ignore racks for this topic).
    """

    topic_id: uuid.UUID
    name: str
    num_partitions: int
    partition_racks: Mapping[int, frozenset[str]]


@dataclass(frozen=True, slots=True)
class MemberSubscription:
    """One member of a consumer group as the assignor sees it.

    ``assigned`` is the member's current *target* assignment: assignors keep it as far as
    balance allows (stickiness).
    """

    member_id: str
    instance_id: str | None
    rack_id: str | None
    subscribed_topic_ids: frozenset[uuid.UUID]
    assigned: TopicPartitions


class PartitionAssignor(Protocol):
    """A server-side assignor (Kafka's ``ConsumerGroupPartitionAssignor``)."""

    name: str

    def assign(
        self,
        members: Mapping[str, MemberSubscription],
        topics: Mapping[uuid.UUID, TopicMetadata],
    ) -> dict[str, dict[uuid.UUID, frozenset[int]]]:
        """member id -> its new target assignment. Every member id of ``members`` is a key
        (possibly with an empty dict). Pure and deterministic: the same input gives the same
        output (the result is written to __consumer_offsets and replayed)."""
        ...


class PartitionAssignorError(Exception):
    """The assignor could not compute an assignment (Kafka's ``PartitionAssignorException``)."""
