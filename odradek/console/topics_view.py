"""The console's topic pages as JSON (``/api/topics``, ``/api/topics/<name>``) and the topic
changes it makes (create, delete, edit configs), through Metadata, ListOffsets,
DescribeLogDirs, DescribeConfigs, CreateTopics, DeleteTopics and IncrementalAlterConfigs.

Sizes: a partition's size is its leader replica's bytes on disk (DescribeLogDirs), a topic's
the sum of its partitions' (each record counted once, not once per replica); None where the
cluster refused DescribeLogDirs or the leader is unknown. Messages per second and the
sparkline come from the sampler's buffers (samples.py).
"""

from __future__ import annotations

import asyncio

from odradek.client.admin_types import AlterConfigOp, AlterConfigOpType, ConfigResource, NewTopic, ResourceType
from odradek.client.topic_partition import TopicPartition
from odradek.console import cluster_view
from odradek.console.request_error import RequestError, integer, invalid
from odradek.protocol.generated.error_codes import ErrorCode

EARLIEST = -2


async def topics(admin, samples) -> dict:
    """``{"topics": [{"name", "internal", "partitions", "replication_factor",
    "under_replicated", "offline", "size", "messages", "rate", "rates": [[t, msgs/s], ...]}]}``
    sorted by name; ``messages`` is what the partitions hold (end minus start offsets)."""
    state = await cluster_view.cluster_state(admin)
    described, live = state.topics, state.live
    dirs, _ = await cluster_view.log_dirs(admin, sorted(live))
    sizes = cluster_view.replica_sizes(dirs)
    led = [p for t in described.values() for p in t.partitions if p.leader >= 0]
    starts, ends = await asyncio.gather(_offsets(admin, led, EARLIEST), _offsets(admin, led, cluster_view.LATEST))
    rows = []
    for name, t in sorted(described.items()):
        buffer = samples.topics.get(name)
        rows.append({
            "name": name,
            "internal": t.is_internal,
            "partitions": len(t.partitions),
            "replication_factor": max((len(p.replicas) for p in t.partitions), default=0),
            "under_replicated": sum(map(cluster_view.is_under_replicated, t.partitions)),
            "offline": sum(1 for p in t.partitions if cluster_view.is_offline(p, live)),
            "size": _topic_size(t.partitions, sizes),
            "messages": _retained(t.partitions, starts, ends),
            "rate": samples.topic_rate(name),
            "rates": buffer.rates() if buffer else [],
        })
    return {"topics": rows}


async def topic(admin, name: str, samples) -> dict:
    """One topic: per partition leader, replicas, ISR, offline replicas, start and end
    offsets and size; its configs (name, value, source, flags); its rate history."""
    state = await cluster_view.cluster_state(admin, [name])
    t, live = state.topics[name], state.live
    led = [p for p in t.partitions if p.leader >= 0]
    dirs, dirs_error = await cluster_view.log_dirs(admin, sorted({p.leader for p in led} & live))
    sizes = cluster_view.replica_sizes(dirs)
    starts, ends, configs = await asyncio.gather(
        _offsets(admin, led, EARLIEST), _offsets(admin, led, cluster_view.LATEST), topic_configs(admin, name))
    partitions = []
    for p in sorted(t.partitions, key=lambda p: p.partition):
        tp = TopicPartition(name, p.partition)
        partitions.append({
            "partition": p.partition, "leader": p.leader, "leader_epoch": p.leader_epoch,
            "replicas": list(p.replicas), "isr": list(p.isr), "offline_replicas": list(p.offline_replicas),
            "under_replicated": cluster_view.is_under_replicated(p), "offline": cluster_view.is_offline(p, live),
            "start": starts.get(tp), "end": ends.get(tp), "size": sizes.get((tp, p.leader)),
        })
    buffer = samples.topics.get(name)
    return {
        "name": name, "topic_id": str(t.topic_id), "internal": t.is_internal,
        "partitions": partitions, "configs": configs, "sizes_error": dirs_error,
        "size": _topic_size(t.partitions, sizes),
        "messages": _retained(t.partitions, starts, ends),
        "rate": samples.topic_rate(name), "rates": buffer.rates() if buffer else [],
    }


async def topic_configs(admin, name: str) -> list[dict]:
    """The topic's config entries, sorted by name; a sensitive value is never shown."""
    resource = ConfigResource(ResourceType.TOPIC, name)
    entries = (await admin.describe_configs([resource]))[resource]
    return [{"name": e.name, "value": None if e.is_sensitive else e.value, "source": e.source.name,
             "is_default": e.is_default, "read_only": e.read_only, "sensitive": e.is_sensitive}
            for e in sorted(entries.values(), key=lambda e: e.name)]


async def create_topic(admin, body: dict) -> dict:
    """``{"name", "partitions"?, "replication_factor"?, "configs"?: {k: v}}``; a number left
    out is the broker's default (-1, as Kafka's CreateTopics has it)."""
    name = body.get("name")
    if not isinstance(name, str) or not name.strip():
        raise invalid("a topic needs a name")
    partitions = integer(body, "partitions", -1, minimum=-1)
    replication = integer(body, "replication_factor", -1, minimum=-1)
    configs = _configs(body.get("configs") or {})
    await admin.create_topics([NewTopic(name.strip(), partitions, replication, configs=configs)])
    return {"created": name.strip()}


async def delete_topic(admin, name: str) -> dict:
    await admin.delete_topics([name])
    return {"deleted": name}


async def alter_topic_configs(admin, name: str, body: dict) -> dict:
    """``{"set": {name: value}, "delete": [name, ...]}`` as one IncrementalAlterConfigs:
    deleted names return to their defaults."""
    sets = _configs(body.get("set") or {})
    deletes = body.get("delete") or []
    if not isinstance(deletes, list) or not all(isinstance(d, str) for d in deletes):
        raise invalid("delete must be a list of config names")
    if not sets and not deletes:
        raise invalid("nothing to change: give set and/or delete")
    ops = [AlterConfigOp(k, v, AlterConfigOpType.SET) for k, v in sets.items()]
    ops += [AlterConfigOp(k, None, AlterConfigOpType.DELETE) for k in deletes]
    await admin.incremental_alter_configs({ConfigResource(ResourceType.TOPIC, name): ops})
    return {"altered": name, "set": sets, "deleted": deletes}


def _configs(value) -> dict[str, str]:
    if not isinstance(value, dict):
        raise RequestError(ErrorCode.INVALID_CONFIG, "configs must be an object of name: value")
    out = {}
    for key, v in value.items():
        if not isinstance(key, str) or not key or isinstance(v, (dict, list)) or v is None:
            raise RequestError(ErrorCode.INVALID_CONFIG, f"config {key!r} needs a text value")
        out[key] = str(v).lower() if isinstance(v, bool) else str(v)
    return out


def _retained(partitions, starts, ends) -> int | None:
    """Records between the log start and end offsets, summed (transaction markers count: a
    console sees offsets, not records); None while a partition's offsets are unknown."""
    spans = [(starts.get(tp), ends.get(tp)) for tp in (TopicPartition(p.topic, p.partition) for p in partitions)]
    if any(s is None or e is None for s, e in spans):
        return None
    return sum(e - s for s, e in spans)


def _topic_size(partitions, sizes) -> int | None:
    found = [sizes.get((TopicPartition(p.topic, p.partition), p.leader)) for p in partitions]
    if not found or any(s is None for s in found):
        return None
    return sum(found)


async def _offsets(admin, partitions, spec: int) -> dict[TopicPartition, int]:
    if not partitions:
        return {}
    found = await admin.list_offsets({TopicPartition(p.topic, p.partition): spec for p in partitions},
                                     timeout_ms=cluster_view.OFFSETS_TIMEOUT_MS)
    return {tp: o.offset for tp, o in found.items() if o is not None}
