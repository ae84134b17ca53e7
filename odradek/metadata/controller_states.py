"""Partition states the controller sends, merged into a `MetadataImage`.

A cluster broker does not watch partition state znodes (Kafka's brokers neither): it learns
them from the controller's UpdateMetadata and LeaderAndIsr requests, which carry each state
as the controller wrote it, with the znode's version (``zk_version``). A failover of 30,000
partitions then costs a broker two requests instead of 30,000 watch events and re-reads.

Merge rule: a state is taken when its topic is in the image (under the same topic id, where
the request names one) and the partition is in the topic's assignment, and its version is
greater than the image's (or the image has none). A state znode's version only grows while
its topic lives, so a late or repeated request never takes a partition back; a topic created
again under the same name has a new id, and the cache drops the old one's states when it sees
the new assignment (``MetadataCache.refresh_topic``).

A state of a partition not yet in the image (a new topic, new partitions, a topic created
again under the same name) is returned apart: the cache keeps it until it learns of that
assignment, then merges it into the states it read. Reading alone would not do: the
controller wrote the state before sending it, but a broker's ZooKeeper server may lag behind
the controller's and answer without it, and no watch would tell of it later.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from dataclasses import replace
from types import MappingProxyType
from typing import NamedTuple

from odradek.metadata.image import MetadataImage
from odradek.metadata.layout import ZERO_UUID, PartitionState


class ControllerState(NamedTuple):
    """One partition's state as a controller request carries it; ``topic_id`` None (or the
    zero UUID) where the request names none."""

    topic: str
    topic_id: uuid.UUID | None
    partition: int
    state: PartitionState


def with_controller_states(
    image: MetadataImage, states: Iterable[ControllerState], early: list[ControllerState] | None = None
) -> MetadataImage | None:
    """``image`` with the newer of ``states`` taken (see the module), or None if none is;
    states of partitions not in ``image`` (under their topic id) are appended to ``early``, if
    given."""
    taken: dict[str, dict[int, PartitionState]] = {}
    for s in states:
        topic, topic_id, partition, state = s
        assignment = image.topics.get(topic)
        if (assignment is None or partition not in assignment.partitions
                or topic_id not in (None, ZERO_UUID) and topic_id != assignment.topic_id):
            if early is not None:  # an assignment this image has not seen yet
                early.append(s)
            continue
        current = taken.get(topic, {}).get(partition) or image.partition_state(topic, partition)
        if current is None or state.zk_version > current.zk_version:
            taken.setdefault(topic, {})[partition] = state
    if not taken:
        return None
    per_topic = dict(image.partition_states)
    for topic, new in taken.items():
        per_topic[topic] = MappingProxyType({**per_topic.get(topic, {}), **new})
    return replace(image, partition_states=MappingProxyType(per_topic))
