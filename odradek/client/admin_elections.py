"""The admin client's leader elections, as Kafka's ``Admin.electLeaders`` and
``kafka-leader-election.sh`` have them.

    results = await admin.elect_leaders(ElectionType.PREFERRED, [TopicPartition("t", 0)])
    # {TopicPartition("t", 0): None}            elected
    # {TopicPartition("t", 0): BrokerError(...)} ELECTION_NOT_NEEDED, PREFERRED_LEADER_NOT_AVAILABLE, ...

PREFERRED moves leadership back to each partition's preferred replica (the first of its
assignment) where that replica is live and in sync; UNCLEAN gives a partition without a
leader any live replica, in sync or not (records the old leader had may be lost).
``partitions=None`` asks for every partition: the answer then names only the partitions that
were elected or failed (Kafka leaves out those that needed no election).

Routing: the request goes to the controller (Kafka's ``ControllerNodeProvider``); a
NOT_CONTROLLER answer, for the whole request or per partition, refreshes the metadata and
asks again until the timeout. The broker answers once the new leaders show in its metadata,
or per partition REQUEST_TIMED_OUT after the ``timeout_ms`` it is sent.
"""

from __future__ import annotations

import asyncio
from enum import IntEnum

from odradek.client.errors import BrokerError, UnsupportedVersionError
from odradek.client.topic_partition import TopicPartition
from odradek.protocol.generated import ApiKey
from odradek.protocol.generated.elect_leaders_request import ElectLeadersRequest, TopicPartitions
from odradek.protocol.generated.error_codes import ErrorCode

_ELECTION_TYPE_FROM = 1  # ElectLeaders v0 knows only preferred elections


class ElectionType(IntEnum):
    """Kafka's ``ElectionType``."""

    PREFERRED = 0
    UNCLEAN = 1


class ElectionAdmin:
    """Mixed into AsyncAdminClient (uses its ``_cluster`` and ``_deadline``)."""

    async def elect_leaders(self, election_type, partitions=None, *,
                            timeout_ms: int | None = None) -> dict[TopicPartition, BrokerError | None]:
        """Elect leaders of ``partitions`` (``(topic, partition)`` pairs; None: all) by
        ``election_type`` (an `ElectionType`, its value, or its name); returns per partition
        None (elected) or the `BrokerError` it failed with. Raises a `BrokerError` when the
        request as a whole fails."""
        kind = ElectionType[election_type.upper()] if isinstance(election_type, str) \
            else ElectionType(election_type)
        cluster = self._cluster
        deadline = self._deadline(timeout_ms)
        pending = None if partitions is None else list(dict.fromkeys(TopicPartition(*tp) for tp in partitions))
        results: dict[TopicPartition, BrokerError | None] = {}
        attempt = 0
        while True:
            answer = await self._elect_once(kind, pending, deadline)
            moved = [tp for tp, e in answer.items() if e is not None and e.code == ErrorCode.NOT_CONTROLLER]
            results.update(answer)
            delay = cluster.backoff(attempt)
            if not moved or cluster.loop.time() + delay >= deadline:
                return results
            pending, attempt = moved, attempt + 1
            await asyncio.sleep(delay)
            await cluster.refresh([])

    async def _elect_once(self, kind: ElectionType, pending, deadline: float) -> dict:
        """One ElectLeaders at the controller (retried while the request as a whole is
        refused as retriable, e.g. NOT_CONTROLLER); its per-partition answers."""
        cluster = self._cluster

        def build(version: int) -> ElectLeadersRequest:
            if version < _ELECTION_TYPE_FROM and kind is not ElectionType.PREFERRED:
                raise UnsupportedVersionError("the controller knows only preferred elections (ElectLeaders v0)")
            topics = None
            if pending is not None:
                by_topic: dict[str, list[int]] = {}
                for tp in pending:
                    by_topic.setdefault(tp.topic, []).append(tp.partition)
                topics = [TopicPartitions(t, ps) for t, ps in by_topic.items()]
            left_ms = int(max(deadline - cluster.loop.time(), 0) * 1000)
            return ElectLeadersRequest(election_type=int(kind), topic_partitions=topics, timeout_ms=left_ms)

        async def attempt():
            # the broker waits up to the request's timeout_ms: the connection must wait longer
            timeout = max(deadline - cluster.loop.time(), 0) + cluster.request_timeout
            response = await cluster.send_to_controller(ApiKey.ELECT_LEADERS, build, timeout=timeout)
            if response.error_code:
                raise BrokerError(response.error_code, subject="ElectLeaders")
            return response

        response = await cluster.retry(attempt, deadline)
        return {
            TopicPartition(r.topic, p.partition_id):
                None if p.error_code == ErrorCode.NONE
                else BrokerError(p.error_code, p.error_message, TopicPartition(r.topic, p.partition_id))
            for r in response.replica_election_results for p in r.partition_result
        }
