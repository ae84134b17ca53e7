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
    """Every ``/brokers/topics/<t>``, read at once (`MetadataStore.get_many`)."""
    names = _children(store, layout.BROKER_TOPICS)
    found = store.get_many([layout.topic_path(n) for n in names])
    return tuple(
        TopicAssignment.from_json(name, read[0], read[1])
        for name, read in zip(names, found)
        if read is not None
    )


def read_partition_states(
    store: MetadataStore, topics: tuple[TopicAssignment, ...]
) -> dict[tuple[str, int], PartitionState]:
    """The state znode of every partition of ``topics`` that has one, read at once: 30,000
    partitions are 30,000 reads, pipelined on ZooKeeper instead of one round trip each."""
    partitions = [(topic.name, p) for topic in topics for p in topic.partitions]
    found = store.get_many([layout.partition_state_path(*tp) for tp in partitions])
    return {
        tp: PartitionState.from_json(read[0], read[1])
        for tp, read in zip(partitions, found)
        if read is not None
    }


def read_unclean_topics(store: MetadataStore, topics: tuple[TopicAssignment, ...]) -> set[str]:
    """The topics whose config (``/config/topics/<t>``) sets `UNCLEAN` true, read at once."""
    found = store.get_many([layout.topic_config_path(t.name) for t in topics])
    return {
        topic.name
        for topic, read in zip(topics, found)
        if read is not None and layout.decode_config(read[0]).get(UNCLEAN, "").lower() == "true"
    }


def read_snapshot(
    store: MetadataStore,
    controller_id: int,
    broker_epochs: Mapping[int, int] | None = None,
    unclean_default: bool = False,
    fenced_registrations: Mapping[int, int] | None = None,
) -> ClusterSnapshot:
    """Everything a controller elected at the current ``/controller_epoch`` starts from:
    Kafka's ``initializeControllerContext`` reads with pipelined async requests
    (``KafkaZkClient.retryRequestsUntilConnected``), and so do these (`MetadataStore.get_many`).
    ``fenced_registrations`` is not read but passed on: what this broker found gone itself."""
    data, epoch_zk_version = store.get(layout.CONTROLLER_EPOCH)
    topics = read_topics(store)
    unclean = read_unclean_topics(store, topics)
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
        dict(fenced_registrations or {}),
    )
