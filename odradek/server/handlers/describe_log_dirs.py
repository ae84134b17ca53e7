"""DescribeLogDirs (key 35): this broker's log directories and the partitions in each (Kafka's
``KafkaApis.handleDescribeLogDirsRequest`` -> ``ReplicaManager.describeLogDirs``).

One result per configured directory (``log.dirs``, absolute paths). A live one lists, per
topic, its partitions among those asked for (``topics`` null: all of them): the size of
their segments in bytes, the offset lag (the high watermark less the log end offset, never
below 0; -1 for a log this broker does not host as a replica), and ``is_future_key`` false
(odradek never moves replicas between directories); v4 adds the volume's total and usable
bytes (``statvfs``: usable is what an unprivileged writer may still use). A directory that
failed answers KAFKA_STORAGE_ERROR and nothing else, as Kafka's does.
"""

from __future__ import annotations

import logging
import os

from odradek.protocol.generated.describe_log_dirs_response import (
    DescribeLogDirsPartition,
    DescribeLogDirsResponse,
    DescribeLogDirsResult,
    DescribeLogDirsTopic,
)
from odradek.protocol.generated.error_codes import ErrorCode
from odradek.protocol import acl_binding as acl
from odradek.server import authorize

log = logging.getLogger("odradek.server.describe_log_dirs")

INVALID_OFFSET_LAG = -1  # Kafka's DescribeLogDirsResponse.INVALID_OFFSET_LAG


def handle(ctx, request):
    broker = ctx.broker
    if not authorize.allowed_cluster(ctx, acl.DESCRIBE):  # Kafka: DESCRIBE on the cluster
        return DescribeLogDirsResponse(error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED, results=[])
    wanted = None
    if request.topics is not None:
        wanted = {(t.topic, p) for t in request.topics for p in t.partitions}
    manager = broker.log_manager
    logs = manager.logs_by_dir()
    results = [_describe_dir(broker, directory, logs.get(directory), wanted) for directory in manager.all_log_dirs]
    return DescribeLogDirsResponse(error_code=ErrorCode.NONE, results=results)


def _describe_dir(broker, directory: str, logs, wanted) -> DescribeLogDirsResult:
    if logs is None:  # offline
        return DescribeLogDirsResult(error_code=ErrorCode.KAFKA_STORAGE_ERROR, log_dir=directory)
    try:
        stats = os.statvfs(directory)
    except OSError as e:
        broker.log_limiter.warning(log, ("describe-log-dirs", directory), "cannot stat log directory %s: %s",
                                   directory, e)
        return DescribeLogDirsResult(error_code=ErrorCode.KAFKA_STORAGE_ERROR, log_dir=directory)
    by_topic: dict[str, list[DescribeLogDirsPartition]] = {}
    for (topic, index), plog in sorted(logs.items()):
        if wanted is not None and (topic, index) not in wanted:
            continue
        by_topic.setdefault(topic, []).append(DescribeLogDirsPartition(
            partition_index=index, partition_size=plog.size,
            offset_lag=_offset_lag(broker, topic, index, plog.log_end_offset), is_future_key=False))
    topics = [DescribeLogDirsTopic(name=name, partitions=parts) for name, parts in by_topic.items()]
    return DescribeLogDirsResult(error_code=ErrorCode.NONE, log_dir=directory, topics=topics,
                                 total_bytes=stats.f_blocks * stats.f_frsize,
                                 usable_bytes=stats.f_bavail * stats.f_frsize)


def _offset_lag(broker, topic: str, index: int, log_end_offset: int) -> int:
    """Kafka's ``getLogEndOffsetLag``: how far the log end is behind the high watermark."""
    part = broker.replica_manager.get(topic, index)
    if part is None:
        return INVALID_OFFSET_LAG
    return max(part.high_watermark - log_end_offset, 0)
