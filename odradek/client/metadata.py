"""What the client knows about the cluster: brokers, controller, topics, partitions, leaders.

A ``ClusterMetadata`` is an immutable snapshot built from a Metadata response; a refresh
replaces the whole snapshot (``merged`` keeps the topics a partial refresh did not ask about),
so code that holds a snapshot sees one consistent picture. Partitions of a topic are kept in
a tuple indexed by partition number when the response lists 0..n-1, as every broker does.

Leaders: ``leader_id`` -1 (or a broker absent from the broker list) means "no leader known";
callers then ask for a refresh and retry after a backoff.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field

from odradek.protocol.generated.error_codes import ErrorCode

ZERO_UUID = uuid.UUID(int=0)


@dataclass(frozen=True, slots=True)
class BrokerInfo:
    node_id: int
    host: str
    port: int
    rack: str | None = None


@dataclass(frozen=True, slots=True)
class PartitionInfo:
    topic: str
    partition: int
    leader: int
    leader_epoch: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    offline_replicas: tuple[int, ...] = ()
    error_code: int = 0


@dataclass(frozen=True, slots=True)
class TopicInfo:
    name: str
    topic_id: uuid.UUID = ZERO_UUID
    is_internal: bool = False
    partitions: tuple[PartitionInfo, ...] = ()
    error_code: int = 0

    @property
    def partition_count(self) -> int:
        return len(self.partitions)


@dataclass(frozen=True, slots=True)
class ClusterMetadata:
    brokers: dict[int, BrokerInfo] = field(default_factory=dict)
    topics: dict[str, TopicInfo] = field(default_factory=dict)
    controller_id: int = -1
    cluster_id: str | None = None
    # Topics the last refresh asked for but the broker does not know (errors by name).
    errors: dict[str, int] = field(default_factory=dict)

    @classmethod
    def from_response(cls, response) -> ClusterMetadata:
        brokers = {
            b.node_id: BrokerInfo(b.node_id, b.host, b.port, b.rack) for b in response.brokers
        }
        topics: dict[str, TopicInfo] = {}
        errors: dict[str, int] = {}
        for t in response.topics:
            if t.name is None:
                continue
            if t.error_code != ErrorCode.NONE and not t.partitions:
                errors[t.name] = t.error_code
                continue
            parts = sorted(
                (
                    PartitionInfo(
                        t.name, p.partition_index, p.leader_id, p.leader_epoch,
                        tuple(p.replica_nodes), tuple(p.isr_nodes),
                        tuple(p.offline_replicas or ()), p.error_code,
                    )
                    for p in t.partitions
                ),
                key=lambda p: p.partition,
            )
            topics[t.name] = TopicInfo(t.name, t.topic_id, t.is_internal, tuple(parts), t.error_code)
        return cls(brokers, topics, response.controller_id, response.cluster_id, errors)

    def merged(self, newer: ClusterMetadata, asked: set[str] | None) -> ClusterMetadata:
        """``newer`` (an answer about the topics ``asked``, None meaning all) plus the topics of
        this snapshot it was not asked about. A partition whose leader epoch in ``newer`` is
        older than the one known keeps what is known (KIP-320): the answer came from a broker
        that has not heard of the latest election yet, such as a leader cut off from its
        cluster, and following it would send requests to a deposed leader."""
        topics = {} if asked is None else {n: t for n, t in self.topics.items() if n not in asked}
        for name, fresh in newer.topics.items():
            known = self.topics.get(name)
            topics[name] = fresh if known is None else _newest_leaders(known, fresh)
        return ClusterMetadata(newer.brokers, topics, newer.controller_id, newer.cluster_id, newer.errors)

    def partition(self, topic: str, partition: int) -> PartitionInfo | None:
        info = self.topics.get(topic)
        if info is None or not 0 <= partition < len(info.partitions):
            return None
        return info.partitions[partition]

    def leader(self, topic: str, partition: int) -> int | None:
        """The leader's node id when it is known and listed among the brokers."""
        p = self.partition(topic, partition)
        if p is None or p.leader < 0 or p.leader not in self.brokers:
            return None
        return p.leader

    def partition_count(self, topic: str) -> int | None:
        info = self.topics.get(topic)
        return None if info is None else len(info.partitions)

    def available_partitions(self, topic: str) -> list[int]:
        """Partitions of ``topic`` with a live leader."""
        info = self.topics.get(topic)
        if info is None:
            return []
        return [p.partition for p in info.partitions if p.leader >= 0 and p.leader in self.brokers]

    def topic_id(self, topic: str) -> uuid.UUID:
        info = self.topics.get(topic)
        return ZERO_UUID if info is None else info.topic_id


def _newest_leaders(known: TopicInfo, fresh: TopicInfo) -> TopicInfo:
    """``fresh``, with each partition whose leader epoch went back replaced by the known one
    (Kafka's ``Metadata.updateLatestMetadata``). A topic whose id changed was made anew: its
    epochs start again, and ``fresh`` stands."""
    if known.topic_id != fresh.topic_id and ZERO_UUID not in (known.topic_id, fresh.topic_id):
        return fresh
    parts = list(fresh.partitions)
    stale = False
    for i, (old, new) in enumerate(zip(known.partitions, parts)):
        if 0 <= new.leader_epoch < old.leader_epoch and old.partition == new.partition:
            parts[i] = old
            stale = True
    if not stale:
        return fresh
    return TopicInfo(fresh.name, fresh.topic_id, fresh.is_internal, tuple(parts), fresh.error_code)
