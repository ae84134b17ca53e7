"""The admin client's transaction calls, as Kafka's Admin API and ``kafka-transactions.sh``
have them: list and describe transactions, describe a partition's producers, abort a hanging
transaction, and find hanging transactions.

Routing: ListTransactions asks every broker (each lists the transactional ids it
coordinates); DescribeTransactions goes to each id's transaction coordinator
(FindCoordinator key type 1); DescribeProducers and the abort's WriteTxnMarkers go to each
partition's leader.

A *hanging* transaction is open on a partition (DescribeProducers names its first offset)
while its coordinator does not know it as ongoing: a coordinator lost its state, or a marker
never arrived. It holds the partition's last stable offset, so read_committed consumers stop
there. ``abort_transaction`` writes the ABORT marker a coordinator would have written
(WriteTxnMarkers with the producer's id, epoch and coordinator epoch), as
``kafka-transactions.sh abort`` does.
"""

from __future__ import annotations

import asyncio
import time

from odradek.client.admin_types import ProducerState, TransactionDescription, TransactionListing
from odradek.client.coordinator import TRANSACTION_KEY, GroupCoordinatorClient
from odradek.client.errors import BrokerError, KafkaError
from odradek.client.topic_partition import TopicPartition
from odradek.protocol.generated import ApiKey
from odradek.protocol.generated.describe_producers_request import DescribeProducersRequest, TopicRequest
from odradek.protocol.generated.describe_transactions_request import DescribeTransactionsRequest
from odradek.protocol.generated.error_codes import ErrorCode
from odradek.protocol.generated.list_transactions_request import ListTransactionsRequest
from odradek.protocol.generated.write_txn_markers_request import (
    WritableTxnMarker,
    WritableTxnMarkerTopic,
    WriteTxnMarkersRequest,
)

_DURATION_FILTER_FROM = 1  # ListTransactions v1+ filters by duration
DEFAULT_MAX_TRANSACTION_TIMEOUT_MS = 15 * 60 * 1000  # kafka-transactions.sh find-hanging's default


class TransactionAdmin:
    """Mixed into AsyncAdminClient (uses its ``_cluster``, ``_settle`` and ``_deadline``)."""

    async def list_transactions(self, states=(), producer_ids=(), duration_ms: int = -1) -> list[TransactionListing]:
        """Every transactional id of the cluster, optionally only those in ``states``, of
        ``producer_ids``, or open longer than ``duration_ms``."""
        cluster = self._cluster
        if not cluster.metadata.brokers:
            await cluster.refresh([])

        def build(version: int) -> ListTransactionsRequest:
            return ListTransactionsRequest(state_filters=list(states), producer_id_filters=list(producer_ids),
                                           duration_filter=duration_ms if version >= _DURATION_FILTER_FROM else -1)

        async def one(node: int):
            response = await cluster.retry(lambda: cluster.send(node, ApiKey.LIST_TRANSACTIONS, build),
                                           self._deadline(None))
            if response.error_code:
                raise BrokerError(response.error_code, subject=f"ListTransactions on broker {node}")
            return [TransactionListing(t.transactional_id, t.producer_id, t.transaction_state, node)
                    for t in response.transaction_states]

        found = [t for listed in await asyncio.gather(*(one(n) for n in cluster.metadata.brokers)) for t in listed]
        return sorted(found, key=lambda t: t.transactional_id)

    async def describe_transactions(self, transactional_ids) -> dict[str, TransactionDescription]:
        """The state of each transactional id at its coordinator (TRANSACTIONAL_ID_NOT_FOUND
        for an id the cluster does not know)."""
        async def one(tid: str):
            coordinator = GroupCoordinatorClient(self._cluster, tid, dedicated_connection=False,
                                                 key_type=TRANSACTION_KEY)
            response = await coordinator.send(ApiKey.DESCRIBE_TRANSACTIONS, DescribeTransactionsRequest([tid]),
                                              lambda r: r.transaction_states[0].error_code)
            t = response.transaction_states[0]
            partitions = tuple(TopicPartition(d.topic, p) for d in t.topics for p in sorted(d.partitions))
            return t.error_code, None, TransactionDescription(
                tid, coordinator.node_id if coordinator.node_id is not None else -1, t.transaction_state,
                t.producer_id, t.producer_epoch, t.transaction_timeout_ms, t.transaction_start_time_ms, partitions)

        async def ask(pending):
            answers = await asyncio.gather(*(one(t) for t in pending), return_exceptions=True)
            out = {}
            for tid, answer in zip(pending, answers):
                if isinstance(answer, KafkaError):
                    answer = (answer, None, None)
                elif isinstance(answer, BaseException):
                    raise answer
                out[tid] = answer
            return out

        return await self._settle(list(dict.fromkeys(transactional_ids)), ask, self._deadline(None))

    async def describe_producers(self, partitions) -> dict[TopicPartition, list[ProducerState]]:
        """The active producers of each partition, from its leader."""
        cluster = self._cluster
        tps = [TopicPartition(*tp) for tp in partitions]
        topics = {tp.topic for tp in tps}
        cluster.add_topics(topics)
        await cluster.wait_for_topics(topics, self._deadline(None))

        async def ask(pending):
            by_node: dict[int, list[TopicPartition]] = {}
            out = {}
            for tp in pending:
                leader = cluster.metadata.leader(tp.topic, tp.partition)
                if leader is None:
                    out[tp] = (ErrorCode.LEADER_NOT_AVAILABLE, None, None)
                else:
                    by_node.setdefault(leader, []).append(tp)
            for answer in await asyncio.gather(*(self._describe_producers_at(n, ps) for n, ps in by_node.items()),
                                               return_exceptions=True):
                if isinstance(answer, BaseException):
                    raise answer
                out.update(answer)
            return out

        return await self._settle(tps, ask, self._deadline(None))

    async def _describe_producers_at(self, node: int, tps: list[TopicPartition]) -> dict:
        by_topic: dict[str, list[int]] = {}
        for tp in tps:
            by_topic.setdefault(tp.topic, []).append(tp.partition)
        request = DescribeProducersRequest([TopicRequest(t, ps) for t, ps in by_topic.items()])
        response = await self._cluster.send(node, ApiKey.DESCRIBE_PRODUCERS, request)
        out = {}
        for topic in response.topics:
            for p in topic.partitions:
                states = [ProducerState(s.producer_id, s.producer_epoch, s.last_sequence, s.last_timestamp,
                                        s.coordinator_epoch, s.current_txn_start_offset) for s in p.active_producers]
                out[TopicPartition(topic.name, p.partition_index)] = (p.error_code, p.error_message, states)
        return out

    async def abort_transaction(self, tp, producer_id: int, producer_epoch: int, coordinator_epoch: int) -> None:
        """Write an ABORT marker for ``producer_id``'s open transaction on partition ``tp``
        (Kafka's ``Admin.abortTransaction``)."""
        tp = TopicPartition(*tp)
        cluster = self._cluster
        cluster.add_topics([tp.topic])
        await cluster.wait_for_topics([tp.topic], self._deadline(None))
        request = WriteTxnMarkersRequest([WritableTxnMarker(
            producer_id=producer_id, producer_epoch=producer_epoch, transaction_result=False,
            topics=[WritableTxnMarkerTopic(tp.topic, [tp.partition])], coordinator_epoch=coordinator_epoch)])

        async def ask(pending):
            leader = cluster.metadata.leader(tp.topic, tp.partition)
            if leader is None:
                return {tp: (ErrorCode.LEADER_NOT_AVAILABLE, None, None)}
            response = await cluster.send(leader, ApiKey.WRITE_TXN_MARKERS, request)
            codes = [p.error_code for m in response.markers for t in m.topics for p in t.partitions]
            return {tp: (codes[0] if codes else ErrorCode.UNKNOWN_SERVER_ERROR, None, None)}

        await self._settle([tp], ask, self._deadline(None))

    async def abort_transaction_at(self, tp, start_offset: int) -> ProducerState:
        """Abort the transaction open on ``tp`` since ``start_offset`` (found among the
        partition's producers, as ``kafka-transactions.sh abort --start-offset`` does)."""
        tp = TopicPartition(*tp)
        producers = (await self.describe_producers([tp]))[tp]
        for state in producers:
            if state.current_txn_start_offset == start_offset:
                await self.abort_transaction(tp, state.producer_id, state.producer_epoch,
                                             max(state.coordinator_epoch, 0))
                return state
        raise KafkaError(f"no open transaction starts at offset {start_offset} of {tp}")

    async def find_hanging_transactions(self, partitions, max_transaction_timeout_ms: int = DEFAULT_MAX_TRANSACTION_TIMEOUT_MS,
                                        now_ms: int | None = None) -> list[tuple[TopicPartition, ProducerState]]:
        """Open transactions on ``partitions`` older than ``max_transaction_timeout_ms`` that
        no coordinator lists as ongoing for that producer id."""
        now_ms = int(time.time() * 1000) if now_ms is None else now_ms
        described = await self.describe_producers(partitions)
        old = [(tp, s) for tp, states in described.items() for s in states
               if s.current_txn_start_offset >= 0 and 0 <= s.last_timestamp < now_ms - max_transaction_timeout_ms]
        if not old:
            return []
        ongoing = {t.producer_id for t in await self.list_transactions(producer_ids=sorted({s.producer_id for _, s in old}))
                   if t.state in ("Ongoing", "PrepareCommit", "PrepareAbort", "PrepareEpochFence")}
        return sorted(((tp, s) for tp, s in old if s.producer_id not in ongoing), key=lambda x: (x[0], x[1].producer_id))


__all__ = ["DEFAULT_MAX_TRANSACTION_TIMEOUT_MS", "TransactionAdmin"]
