"""The admin client's view of brokers' log directories, as Kafka's ``Admin.describeLogDirs``
and ``kafka-log-dirs.sh`` have it.

    dirs = await admin.describe_log_dirs([1, 2])
    # {1: {"/data/a": LogDirDescription(error=None, replicas={TopicPartition("t", 0):
    #      ReplicaInfo(size=1024, offset_lag=0, is_future=False)}, total_bytes=..., usable_bytes=...),
    #      "/data/b": LogDirDescription(error=BrokerError(KAFKA_STORAGE_ERROR), replicas={}, ...)}, 2: {...}}

Each broker is asked about its own directories (DescribeLogDirs goes to every broker named;
``None``: every broker DescribeCluster lists). A directory the broker reports failed carries
its error (KAFKA_STORAGE_ERROR) and no replicas. Total and usable bytes are -1 from brokers
older than DescribeLogDirs v4.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

from odradek.client.errors import BrokerError
from odradek.client.topic_partition import TopicPartition
from odradek.protocol.generated import ApiKey
from odradek.protocol.generated.describe_log_dirs_request import DescribeLogDirsRequest


@dataclass(frozen=True, slots=True)
class ReplicaInfo:
    """A replica's log in a directory: bytes of its segments, how far its end is behind the
    high watermark, and whether it is a future log (a move between directories)."""

    size: int
    offset_lag: int
    is_future: bool


@dataclass(frozen=True, slots=True)
class LogDirDescription:
    error: BrokerError | None
    replicas: dict[TopicPartition, ReplicaInfo] = field(default_factory=dict)
    total_bytes: int = -1
    usable_bytes: int = -1


class LogDirAdmin:
    """Mixed into AsyncAdminClient (uses its ``_cluster`` and ``describe_cluster``)."""

    async def describe_log_dirs(self, broker_ids=None) -> dict[int, dict[str, LogDirDescription]]:
        """Every log directory of each broker in ``broker_ids`` (None: all), by path."""
        if broker_ids is None:
            broker_ids = [b.node_id for b in (await self.describe_cluster()).brokers]
        ids = list(dict.fromkeys(int(b) for b in broker_ids))
        answers = await asyncio.gather(*(self._describe_log_dirs_of(b) for b in ids))
        return dict(zip(ids, answers))

    async def _describe_log_dirs_of(self, broker_id: int) -> dict[str, LogDirDescription]:
        response = await self._cluster.send(broker_id, ApiKey.DESCRIBE_LOG_DIRS, DescribeLogDirsRequest(topics=None))
        if response.error_code:
            raise BrokerError(response.error_code, subject=f"broker {broker_id}")
        out = {}
        for result in response.results:
            replicas = {TopicPartition(t.name, p.partition_index): ReplicaInfo(p.partition_size, p.offset_lag,
                                                                               p.is_future_key)
                        for t in result.topics for p in t.partitions}
            error = BrokerError(result.error_code) if result.error_code else None
            out[result.log_dir] = LogDirDescription(error, replicas, result.total_bytes, result.usable_bytes)
        return out
