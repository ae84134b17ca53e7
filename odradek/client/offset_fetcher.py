"""Offset lookups with ListOffsets: earliest, latest, by timestamp, and the largest timestamp.

A lookup is a map ``TopicPartition -> spec`` where the spec is a timestamp in milliseconds or
one of Kafka's special values: ``EARLIEST`` (-2, the log start offset), ``LATEST`` (-1, the
high watermark, or the last stable offset under read_committed) and ``MAX_TIMESTAMP`` (-3,
the record with the largest timestamp; ListOffsets v7+). Requests go to each partition's
leader, all leaders at once; partitions whose leader is unknown or moved are retried after a
metadata refresh and a backoff until the deadline. The answer for a timestamp with no record
at or after it is None.
"""

from __future__ import annotations

import asyncio

from odradek.client.cluster import ClusterClient
from odradek.client.errors import BrokerError, KafkaError, KafkaTimeoutError
from odradek.client.topic_partition import OffsetAndTimestamp, TopicPartition
from odradek.protocol.generated import ApiKey
from odradek.protocol.generated.error_codes import ErrorCode
from odradek.protocol.generated.list_offsets_request import (
    ListOffsetsPartition,
    ListOffsetsRequest,
    ListOffsetsTopic,
)

EARLIEST = -2
LATEST = -1
MAX_TIMESTAMP = -3
READ_UNCOMMITTED, READ_COMMITTED = 0, 1


class OffsetFetcher:
    def __init__(self, cluster: ClusterClient, isolation_level: int = READ_UNCOMMITTED) -> None:
        self.cluster = cluster
        self.isolation_level = isolation_level

    async def list_offsets(self, specs: dict, timeout: float) -> dict[TopicPartition, OffsetAndTimestamp | None]:
        """Look up every ``TopicPartition -> spec``; raises BrokerError (non-retriable) or the
        last retriable error when ``timeout`` seconds pass."""
        cluster = self.cluster
        loop = cluster.loop
        deadline = loop.time() + timeout
        remaining = {TopicPartition(*tp): spec for tp, spec in specs.items()}
        results: dict[TopicPartition, OffsetAndTimestamp | None] = {}
        topics = {tp.topic for tp in remaining}
        cluster.add_topics(topics)
        await cluster.wait_for_topics(topics, deadline)
        attempt = 0
        last_error: KafkaError | None = None
        while remaining:
            by_node: dict[int, dict] = {}
            for tp, spec in remaining.items():
                leader = cluster.metadata.leader(tp.topic, tp.partition)
                if leader is not None:
                    by_node.setdefault(leader, {})[tp] = spec
            answers = await asyncio.gather(
                *(self._ask(node, wanted) for node, wanted in by_node.items()), return_exceptions=True)
            for answer in answers:
                if isinstance(answer, BaseException):
                    if not isinstance(answer, KafkaError) or not answer.retriable:
                        raise answer
                    last_error = answer
                    continue
                for tp, (code, value) in answer.items():
                    if code == ErrorCode.NONE:
                        results[tp] = value
                        del remaining[tp]
                    else:
                        error = BrokerError(code, subject=tp)
                        if not error.retriable:
                            raise error
                        last_error = error
            if not remaining:
                break
            delay = cluster.backoff(attempt)
            if loop.time() + delay >= deadline:
                raise last_error or KafkaTimeoutError(f"no leader for {sorted(remaining)}")
            attempt += 1
            await asyncio.sleep(delay)
            await cluster.refresh(topics | cluster.topics)
        return results

    async def _ask(self, node: int, wanted: dict) -> dict:
        topics: dict[str, list[ListOffsetsPartition]] = {}
        for tp, spec in wanted.items():
            topics.setdefault(tp.topic, []).append(ListOffsetsPartition(partition_index=tp.partition, timestamp=spec))
        request = ListOffsetsRequest(
            replica_id=-1, isolation_level=self.isolation_level,
            topics=[ListOffsetsTopic(name, parts) for name, parts in topics.items()],
            timeout_ms=int(self.cluster.request_timeout * 1000),
        )
        response = await self.cluster.send(node, ApiKey.LIST_OFFSETS, request)
        out = {}
        for topic in response.topics:
            for p in topic.partitions:
                tp = TopicPartition(topic.name, p.partition_index)
                if tp not in wanted:
                    continue
                value = None
                if p.error_code == ErrorCode.NONE and p.offset >= 0:
                    value = OffsetAndTimestamp(p.offset, p.timestamp, p.leader_epoch)
                out[tp] = (p.error_code, value)
        for tp in wanted:
            out.setdefault(tp, (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, None))
        return out
