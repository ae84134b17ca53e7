"""Read an `events.ClusterSnapshot` from a store: the edge's half of Kafka's
``initializeControllerContext``, for the event that starts a newly elected controller.

This is the one module of the controller package that reads the store; the controller itself
only sees the values read here.
"""

from __future__ import annotations

from collections.abc import Mapping

from odradek.controller.commands import LiveBroker
from odradek.controller.events import ClusterSnapshot
from odradek.metadata import layout
from odradek.metadata.errors import NoNodeError
from odradek.metadata.layout import BrokerInfo, PartitionState, TopicAssignment
from odradek.metadata.store import MetadataStore

UNCLEAN = "unclean.leader.election.enable"


def _children(store: MetadataStore, path: str) -> list[str]:
    try:
        return store.children(path)
    except NoNodeError:
        return []


def read_live_brokers(
    store: MetadataStore, broker_epochs: Mapping[int, int] | None = None
) -> tuple[LiveBroker, ...]:
    """The registrations under ``/brokers/ids``; ``broker_epochs`` gives each broker's epoch
    (Kafka uses the czxid of its registration; the store interface does not expose it)."""
    out = []
    for name in _children(store, layout.BROKER_IDS):
        try:
            data, _ = store.get(layout.broker_path(int(name)))
        except NoNodeError:
            continue
        info = BrokerInfo.from_json(int(name), data)
        out.append(LiveBroker(info.broker_id, (broker_epochs or {}).get(info.broker_id, 0), info))
    return tuple(sorted(out, key=lambda b: b.broker_id))


def read_topics(store: MetadataStore) -> tuple[TopicAssignment, ...]:
    out = []
    for name in _children(store, layout.BROKER_TOPICS):
        try:
            data, version = store.get(layout.topic_path(name))
        except NoNodeError:
            continue
        out.append(TopicAssignment.from_json(name, data, version))
    return tuple(out)


def read_partition_states(
    store: MetadataStore, topics: tuple[TopicAssignment, ...]
) -> dict[tuple[str, int], PartitionState]:
    states = {}
    for topic in topics:
        for partition in topic.partitions:
            try:
                data, version = store.get(layout.partition_state_path(topic.name, partition))
            except NoNodeError:
                continue
            states[(topic.name, partition)] = PartitionState.from_json(data, version)
    return states


def read_snapshot(
    store: MetadataStore,
    controller_id: int,
    broker_epochs: Mapping[int, int] | None = None,
    unclean_default: bool = False,
) -> ClusterSnapshot:
    """Everything a controller elected at the current ``/controller_epoch`` starts from."""
    data, epoch_zk_version = store.get(layout.CONTROLLER_EPOCH)
    topics = read_topics(store)
    unclean = set()
    for topic in topics:
        try:
            config, _ = store.get(layout.topic_config_path(topic.name))
        except NoNodeError:
            continue
        if layout.decode_config(config).get(UNCLEAN, "").lower() == "true":
            unclean.add(topic.name)
    return ClusterSnapshot(
        controller_id,
        layout.decode_controller_epoch(data),
        epoch_zk_version,
        read_live_brokers(store, broker_epochs),
        topics,
        read_partition_states(store, topics),
        frozenset(_children(store, layout.DELETE_TOPICS)),
        frozenset(unclean),
        unclean_default,
    )
