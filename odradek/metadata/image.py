"""`MetadataImage`: an immutable picture of the cluster's metadata, for the broker's hot paths.

A Metadata request, a produce's leader check or a fetch's ISR check reads one image and never
the store. Images are never changed: the cache builds a new one per change, copying only what
the change touched (copy-on-write). Changing one partition's state copies that topic's
partition map and the outer topic map (O(partitions of the topic + topics)); everything else
is shared with the previous image. A reader holding an image sees one consistent moment.

All mappings are read-only views (``MappingProxyType``).
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from odradek.metadata.layout import NO_LEADER, BrokerInfo, PartitionState, TopicAssignment

_EMPTY: Mapping = MappingProxyType({})


def with_entry(mapping: Mapping, key: object, value: object) -> Mapping:
    """A read-only copy of ``mapping`` with ``key`` set to ``value``."""
    copy = dict(mapping)
    copy[key] = value
    return MappingProxyType(copy)


def without_entry(mapping: Mapping, key: object) -> Mapping:
    """A read-only copy of ``mapping`` without ``key`` (``mapping`` itself if absent)."""
    if key not in mapping:
        return mapping
    copy = dict(mapping)
    del copy[key]
    return MappingProxyType(copy)


@dataclass(frozen=True, slots=True, eq=False)
class MetadataImage:
    """Brokers, topics, partition states and topic configs at one moment.

    ``partition_states[topic][partition]`` is absent while a partition has no state znode yet
    (no replica was alive when it was created). ``topics_being_deleted`` names topics whose
    deletion has started (``/admin/delete_topics``): their logs may go.
    """

    cluster_id: str | None = None
    controller_id: int = NO_LEADER
    brokers: Mapping[int, BrokerInfo] = field(default_factory=lambda: _EMPTY)
    topics: Mapping[str, TopicAssignment] = field(default_factory=lambda: _EMPTY)
    topic_ids: Mapping[uuid.UUID, str] = field(default_factory=lambda: _EMPTY)
    partition_states: Mapping[str, Mapping[int, PartitionState]] = field(
        default_factory=lambda: _EMPTY
    )
    topic_configs: Mapping[str, Mapping[str, str]] = field(default_factory=lambda: _EMPTY)
    topics_being_deleted: frozenset[str] = frozenset()

    def broker(self, broker_id: int) -> BrokerInfo | None:
        return self.brokers.get(broker_id)

    def live_broker_ids(self) -> list[int]:
        return sorted(self.brokers)

    def topic(self, name: str) -> TopicAssignment | None:
        return self.topics.get(name)

    def topic_by_id(self, topic_id: uuid.UUID) -> TopicAssignment | None:
        name = self.topic_ids.get(topic_id)
        return None if name is None else self.topics.get(name)

    def partition_state(self, topic: str, partition: int) -> PartitionState | None:
        return self.partition_states.get(topic, _EMPTY).get(partition)

    def leader(self, topic: str, partition: int) -> int:
        """The partition's leader, or ``NO_LEADER`` (-1) when it has none or is unknown."""
        state = self.partition_state(topic, partition)
        return NO_LEADER if state is None else state.leader

    def topic_config(self, topic: str) -> Mapping[str, str]:
        return self.topic_configs.get(topic, _EMPTY)


EMPTY_IMAGE = MetadataImage()
