"""The admin client's partition reassignment calls (KIP-455), as Kafka's Admin API has them:
``alter_partition_reassignments`` and ``list_partition_reassignments``, both sent to the
controller (retried while it moves: NOT_CONTROLLER).

    await admin.alter_partition_reassignments({TopicPartition("t", 0): [4, 5, 6]})
    await admin.alter_partition_reassignments({TopicPartition("t", 0): None})  # cancel
    ongoing = await admin.list_partition_reassignments()
    # {TopicPartition("t", 0): PartitionReassignment(replicas=(4, 5, 6, 1, 2, 3),
    #                                                adding_replicas=(4, 5, 6), removing_replicas=(1, 2, 3))}

A started reassignment completes later, once the new replicas joined the ISR; while it runs
``replicas`` is the union of the target replicas and the original ones (target first).
"""

from __future__ import annotations

from dataclasses import dataclass

from odradek.client.errors import BrokerError
from odradek.client.topic_partition import TopicPartition
from odradek.protocol.generated import ApiKey
from odradek.protocol.generated import alter_partition_reassignments_request as alter_req
from odradek.protocol.generated import list_partition_reassignments_request as list_req

__all__ = ["PartitionReassignment", "ReassignmentAdmin"]


@dataclass(frozen=True, slots=True)
class PartitionReassignment:
    """A reassignment in progress (Kafka's ``PartitionReassignment``)."""

    replicas: tuple[int, ...]
    adding_replicas: tuple[int, ...]
    removing_replicas: tuple[int, ...]


class ReassignmentAdmin:
    """Mixed into AsyncAdminClient (uses its ``_cluster``, ``_settle`` and ``_deadline``)."""

    async def alter_partition_reassignments(self, reassignments: dict, *, timeout_ms: int | None = None) -> None:
        """Start moving each partition to its target replicas (the preferred leader first), or
        cancel its reassignment in progress (``None``). Raises the first partition's
        ``BrokerError`` (INVALID_REPLICA_ASSIGNMENT, UNKNOWN_TOPIC_OR_PARTITION,
        NO_REASSIGNMENT_IN_PROGRESS) with every failure in its ``errors``; the others
        started."""
        wanted = {TopicPartition(*tp): (None if r is None else [int(b) for b in r]) for tp, r in reassignments.items()}
        deadline = self._deadline(timeout_ms)
        cluster = self._cluster

        async def ask(pending):
            topics: dict = {}
            for tp in pending:
                topics.setdefault(tp.topic, []).append(alter_req.ReassignablePartition(tp.partition, wanted[tp]))
            request = alter_req.AlterPartitionReassignmentsRequest(
                timeout_ms=int(max(deadline - cluster.loop.time(), 0) * 1000),
                topics=[alter_req.ReassignableTopic(t, ps) for t, ps in topics.items()])
            response = await cluster.send_to_controller(ApiKey.ALTER_PARTITION_REASSIGNMENTS, request)
            if response.error_code:
                return {tp: (response.error_code, response.error_message, None) for tp in pending}
            return {TopicPartition(t.name, p.partition_index): (p.error_code, p.error_message, None)
                    for t in response.responses for p in t.partitions}

        await self._settle(list(wanted), ask, deadline)

    async def list_partition_reassignments(self, partitions=None, *,
                                           timeout_ms: int | None = None) -> dict[TopicPartition, PartitionReassignment]:
        """The reassignments in progress, of ``partitions`` (``TopicPartition``s; None: all)."""
        cluster = self._cluster
        topics = None
        if partitions is not None:
            by_topic: dict = {}
            for tp in partitions:
                by_topic.setdefault(tp[0], []).append(tp[1])
            topics = [list_req.ListPartitionReassignmentsTopics(t, ps) for t, ps in by_topic.items()]
        deadline = self._deadline(timeout_ms)

        async def attempt():
            request = list_req.ListPartitionReassignmentsRequest(
                timeout_ms=int(max(deadline - cluster.loop.time(), 0) * 1000), topics=topics)
            response = await cluster.send_to_controller(ApiKey.LIST_PARTITION_REASSIGNMENTS, request)
            if response.error_code:
                raise BrokerError(response.error_code, response.error_message)
            return response

        response = await cluster.retry(attempt, deadline)
        return {TopicPartition(t.name, p.partition_index): PartitionReassignment(
                    tuple(p.replicas), tuple(p.adding_replicas), tuple(p.removing_replicas))
                for t in response.topics for p in t.partitions}
