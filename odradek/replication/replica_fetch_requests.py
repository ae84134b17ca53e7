"""The requests a ``ReplicaFetcher`` sends its leader, built from its partitions' states:
Fetch (``replica.fetch.*`` settings, the follower's id and broker epoch, KIP-903) and
OffsetForLeaderEpoch; and the version of an API to send, from what the leader serves.

Pure functions of their arguments: ``fetch`` adds the fetch session's id and epoch (KIP-227)
and the forgotten partitions to the Fetch built here.
"""

from __future__ import annotations

import uuid

from odradek.client.connection import BrokerConnection
from odradek.client.errors import UnsupportedVersionError
from odradek.protocol.generated.fetch_request import FetchPartition, FetchRequest, FetchTopic, ReplicaState
from odradek.protocol.generated.offset_for_leader_epoch_request import (
    OffsetForLeaderEpochRequest,
    OffsetForLeaderPartition,
    OffsetForLeaderTopic,
)

_ZERO_UUID = uuid.UUID(int=0)


def fetch_request(broker, entries: dict) -> FetchRequest:
    """A Fetch from ``broker`` (its ``config``, ``broker_id``, ``broker_epoch``) for
    ``entries``: (topic, partition) -> (its ``PartitionFetchState``, (fetch offset, current
    leader epoch, log start offset))."""
    cfg = broker.config
    broker_id = broker.broker_id
    max_bytes = cfg["replica.fetch.max.bytes"]
    topics: dict[str, FetchTopic] = {}
    for (topic, index), (state, (offset, epoch, log_start)) in entries.items():
        ft = topics.get(topic)
        if ft is None:
            ft = topics[topic] = FetchTopic(topic=topic, topic_id=state.topic_id or _ZERO_UUID, partitions=[])
        ft.partitions.append(FetchPartition(partition=index, current_leader_epoch=epoch, fetch_offset=offset,
                                            log_start_offset=log_start, partition_max_bytes=max_bytes))
    return FetchRequest(
        replica_id=broker_id, replica_state=ReplicaState(broker_id, getattr(broker, "broker_epoch", -1)),
        max_wait_ms=cfg["replica.fetch.wait.max.ms"], min_bytes=cfg["replica.fetch.min.bytes"],
        max_bytes=cfg["replica.fetch.response.max.bytes"], isolation_level=0, session_id=0,
        session_epoch=-1, topics=list(topics.values()))


def epoch_request(broker_id: int, asks: dict) -> OffsetForLeaderEpochRequest:
    """Where each partition's epoch ends on the leader: ``asks`` maps (topic, partition) to
    (its ``PartitionFetchState``, the follower's latest epoch)."""
    topics: dict[str, OffsetForLeaderTopic] = {}
    for (topic, index), (state, epoch) in asks.items():
        t = topics.get(topic)
        if t is None:
            t = topics[topic] = OffsetForLeaderTopic(topic=topic, partitions=[])
        t.partitions.append(OffsetForLeaderPartition(partition=index, current_leader_epoch=state.leader_epoch,
                                                     leader_epoch=epoch))
    return OffsetForLeaderEpochRequest(replica_id=broker_id, topics=list(topics.values()))


def version_in(conn: BrokerConnection, api_key: int, low: int, high: int) -> int:
    """The highest version of ``api_key`` in ``[low, high]`` the leader serves;
    UnsupportedVersionError when it serves none of them."""
    theirs = conn.broker_versions.get(api_key)
    if theirs is None or theirs[1] < low or theirs[0] > high:
        raise UnsupportedVersionError(f"broker {conn.node_id} serves no version {low}-{high} of API {api_key}")
    return min(high, theirs[1])
