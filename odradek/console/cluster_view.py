"""The console's cluster pages as JSON: the overview (``/api/cluster``) and the brokers
(``/api/brokers``), assembled from public Kafka APIs only (Metadata, DescribeLogDirs), so
they read any Kafka-compatible cluster. Brokers, controller and cluster id come from the same
Metadata answer as the topics (every Kafka version has them there; DescribeCluster needs 2.8).

Counts follow Kafka's tools (``kafka-topics --under-replicated-partitions`` and
``--unavailable-partitions``): a partition is under-replicated when its ISR is smaller than
its replica set, offline when it has no leader (leader -1) or its leader is not a live broker.

Also here: ``sample_round``, what the ``Sampler`` (samples.py) reads every few seconds.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

from odradek.client.admin_types import TopicDescription
from odradek.client.metadata import BrokerInfo, PartitionInfo
from odradek.client.topic_partition import TopicPartition
from odradek.console.group_lag import group_total
from odradek.console.offset_lookup import LATEST, OFFSETS_TIMEOUT_MS


@dataclass(frozen=True, slots=True)
class ClusterState:
    """One Metadata answer: the live brokers (by id), the controller and the topics."""

    cluster_id: str | None
    controller: int
    brokers: tuple[BrokerInfo, ...]
    topics: dict[str, TopicDescription]

    @property
    def live(self) -> set[int]:
        return {b.node_id for b in self.brokers}


async def cluster_state(admin, names=None) -> ClusterState:
    """The cluster and its topics (``names``, or all) from one Metadata request."""
    topics = await admin.describe_topics(names)
    meta = admin.cluster.metadata
    brokers = tuple(sorted(meta.brokers.values(), key=lambda b: b.node_id))
    return ClusterState(meta.cluster_id, meta.controller_id, brokers, topics)


def all_brokers(state: ClusterState, seen: dict | None = None) -> list[dict]:
    """Every broker the console knows of, by id: the live ones (Metadata), then, marked
    ``"offline": true``, those it saw live before (``seen``, kept by the app and updated here)
    and those the topics' replica sets name that Metadata does not list (a broker that is down
    is no longer in Metadata: without this it would silently vanish from the pages)."""
    seen = {} if seen is None else seen
    for b in state.brokers:
        seen[b.node_id] = b
    live = state.live
    named = {r for t in state.topics.values() for p in t.partitions for r in p.replicas}
    rows = []
    for node_id in sorted(set(seen) | named | live):
        b = seen.get(node_id)
        row = _broker(b, state.controller) if b is not None else {
            "id": node_id, "host": None, "port": None, "rack": None, "controller": False}
        row["offline"] = node_id not in live
        rows.append(row)
    return rows


def is_offline(partition: PartitionInfo, live: set[int]) -> bool:
    return partition.leader < 0 or partition.leader not in live


def is_under_replicated(partition: PartitionInfo) -> bool:
    return len(partition.isr) < len(partition.replicas)


async def overview(admin, samples, seen: dict | None = None) -> dict:
    """``{"cluster_id", "controller", "brokers": [...], "offline_brokers", "topics",
    "internal_topics", "partitions", "internal_partitions", "under_replicated", "offline",
    "throughput": [[t, msgs/s], ...]}``.

    Counting, the same on every page: ``topics`` and ``partitions`` are the users' topics
    (as the topics page lists them by default), the internal ones (``__consumer_offsets``,
    ``__transaction_state``) apart in ``internal_*``; ``under_replicated`` and ``offline``
    count every partition, internal ones included (an offline ``__consumer_offsets``
    partition stops groups), as the topics page's rows do with internal topics shown."""
    state = await cluster_state(admin)
    topics, live = state.topics, state.live
    partitions = [p for t in topics.values() for p in t.partitions]
    brokers = all_brokers(state, seen)
    return {
        "cluster_id": state.cluster_id,
        "controller": state.controller,
        "brokers": brokers,
        "offline_brokers": sum(1 for b in brokers if b["offline"]),
        "topics": sum(1 for t in topics.values() if not t.is_internal),
        "internal_topics": sum(1 for t in topics.values() if t.is_internal),
        "partitions": sum(len(t.partitions) for t in topics.values() if not t.is_internal),
        "internal_partitions": sum(len(t.partitions) for t in topics.values() if t.is_internal),
        "under_replicated": sum(map(is_under_replicated, partitions)),
        "offline": sum(1 for p in partitions if is_offline(p, live)),
        "throughput": samples.throughput.points(),
    }


async def brokers(admin, seen: dict | None = None) -> dict:
    """Each broker (``all_brokers``: offline ones too) with its rack, whether it is the
    controller, the partitions it leads and holds, and its log directories (``dirs``: path,
    bytes used by replicas, total and usable bytes, error), or ``dirs_error`` when
    DescribeLogDirs was refused."""
    state = await cluster_state(admin)
    partitions = [p for t in state.topics.values() for p in t.partitions]
    dirs, dirs_error = await log_dirs(admin, sorted(state.live))
    rows = all_brokers(state, seen)
    for row in rows:
        node_id = row["id"]
        row["leaders"] = sum(1 for p in partitions if p.leader == node_id)
        row["replicas"] = sum(1 for p in partitions if node_id in p.replicas)
        row["dirs"] = [{"path": path, "size": sum(r.size for r in d.replicas.values()),
                        "total_bytes": d.total_bytes, "usable_bytes": d.usable_bytes,
                        "error": None if d.error is None else _code_name(d.error.code)}
                       for path, d in sorted(dirs.get(node_id, {}).items())]
    return {"controller": state.controller, "brokers": rows, "dirs_error": dirs_error}


async def log_dirs(admin, broker_ids) -> tuple[dict, str | None]:
    """DescribeLogDirs of ``broker_ids``; ({}, the error) when the cluster refuses it (a
    user without DESCRIBE on the cluster), so pages show the rest."""
    from odradek.client.errors import KafkaError

    try:
        return await admin.describe_log_dirs(broker_ids), None
    except KafkaError as e:
        return {}, str(e)


def replica_sizes(dirs: dict) -> dict[tuple[TopicPartition, int], int]:
    """``{(partition, broker): bytes}`` from ``describe_log_dirs``; a future replica (being
    moved between directories) is left out, so each replica counts once."""
    out = {}
    for broker_id, by_path in dirs.items():
        for d in by_path.values():
            for tp, info in d.replicas.items():
                if not info.is_future:
                    out[(tp, broker_id)] = info.size
    return out


async def end_offsets(admin, partitions) -> dict[TopicPartition, int]:
    """High watermarks of the partitions that have a leader (the others are left out: asking
    would wait for one)."""
    wanted = {TopicPartition(p.topic, p.partition): LATEST for p in partitions if p.leader >= 0}
    if not wanted:
        return {}
    found = await admin.list_offsets(wanted, timeout_ms=OFFSETS_TIMEOUT_MS)
    return {tp: o.offset for tp, o in found.items() if o is not None}


async def sample_round(admin) -> tuple[dict[str, int], dict[str, int]]:
    """One sample: each topic's summed end offset and each group's total lag (the
    group_lag.py rules: partitions with a committed offset only), or for a KIP-932 share group
    its total in-flight count (share_group_view.py)."""
    topics = await admin.describe_topics()
    ends = await end_offsets(admin, [p for t in topics.values() for p in t.partitions])
    topic_ends = {name: sum(ends.get(TopicPartition(name, p.partition), 0) for p in t.partitions)
                  for name, t in topics.items() if not t.is_internal}
    listed = await admin.list_groups()
    lags = await asyncio.gather(*(group_total(admin, g, ends) for g in listed), return_exceptions=True)
    group_lags = {g.group_id: lag for g, lag in zip(listed, lags) if isinstance(lag, int)}
    return topic_ends, group_lags


def _broker(b, controller_id: int) -> dict:
    return {"id": b.node_id, "host": b.host, "port": b.port, "rack": b.rack, "controller": b.node_id == controller_id}


def _code_name(code: int) -> str:
    from odradek.protocol.generated.error_codes import ErrorCode

    try:
        return ErrorCode(code).name
    except ValueError:
        return f"error {code}"
