"""``AddPartitionsToTxnManager``: a partition leader asks a transaction coordinator on another
broker whether partitions are in a transaction (Kafka's ``AddPartitionsToTxnManager``,
KIP-890 part 1). ``server/txn_verification.py`` calls it when the transaction's coordinator
is not on this broker.

The coordinator is the leader of the transactional id's ``__transaction_state`` partition
(``coordinator.partitioner.partition_for`` over that topic's partition count) as this
broker's metadata image has it. ``verify(...)`` answers at once COORDINATOR_NOT_AVAILABLE
when the topic or a leader is unknown, NOT_COORDINATOR when the image names this broker (its
own coordinator said otherwise: roles are moving), else a future of the coordinator's answer
for the partition.

Requests, per coordinator broker: AddPartitionsToTxn v4+ (v5 when served) with one
``Transactions`` entry per transactional id, ``VerifyOnly=true``, sent over the inter-broker
listener (``InterBrokerConnections``). At most one request per broker is in flight; the
verifications asked for meanwhile wait and go together in the next one (the partitions of
one Produce request, asked for in one pass, share a request). Two verifications of one
transactional id waiting for the same broker with different producer ids or epochs: the
older epoch is answered INVALID_PRODUCER_EPOCH at once (fenced), as Kafka does.

Answers, per partition: the coordinator's error code (``txn_verification`` maps it for the
producer), with these for failures of the request itself:

    connection refused, lost, timed out,       NETWORK_EXCEPTION (retriable)
    TLS or SASL failed
    top-level CLUSTER_AUTHORIZATION_FAILED     INVALID_TXN_STATE (the producer must not see it)
    other top-level error                      that error
    a partition missing from the answer        NETWORK_EXCEPTION
    the broker serves AddPartitionsToTxn < v4  NONE: it cannot verify, the batch is appended
                                               unverified (as Kafka skips verification)

Metrics (``metric_families``, Kafka's ``AddPartitionsToTxnManager`` meters, as the JMX
exporter names them): ``kafka_server_addpartitionstotxnmanager_verificationfailurerate_total``,
the partitions answered with an error (Kafka's VerificationFailureRate), and the histogram
``kafka_server_addpartitionstotxnmanager_verificationtimems``, per transactional id and
request, from its first verification asked for to the answer (VerificationTimeMs). Only
verifications sent to other brokers count: those of transactions coordinated here are
in-process (Kafka sends those over the network too).
"""

from __future__ import annotations

import asyncio
import logging
from bisect import bisect_left
from dataclasses import dataclass, field
from time import perf_counter

from odradek.client.errors import KafkaError
from odradek.coordinator.inter_broker import error_code_of
from odradek.coordinator.partitioner import partition_for
from odradek.metadata.layout import NO_LEADER
from odradek.metadata.topic_name import TRANSACTION_STATE_TOPIC
from odradek.protocol.generated import ApiKey
from odradek.protocol.generated.add_partitions_to_txn_request import (
    AddPartitionsToTxnRequest,
    AddPartitionsToTxnTopic,
    AddPartitionsToTxnTransaction,
)
from odradek.protocol.generated.error_codes import ErrorCode
from odradek.server.inter_broker_connections import InterBrokerConnections
from odradek.server.metrics.request_metrics import BUCKETS_MS, cumulative_buckets

log = logging.getLogger("odradek.server.txn_verification")
E = ErrorCode
TopicPartition = tuple[str, int]

FIRST_BROKER_VERSION = 4  # AddPartitionsToTxn v4 brought VerifyOnly and batched transactions
LATEST_VERSION = 5  # v5: the coordinator may answer TRANSACTION_ABORTABLE
REQUEST_TIMEOUT_S = 30.0  # Kafka's request.timeout.ms default, which its manager uses


@dataclass
class _Pending:
    """One transactional id's verifications waiting for a broker: each partition's futures."""
    producer_id: int
    producer_epoch: int
    partitions: dict[TopicPartition, list[asyncio.Future]] = field(default_factory=dict)
    started: float = field(default_factory=perf_counter)

    def answer(self, errors: dict[TopicPartition, ErrorCode] | ErrorCode) -> int:
        """Answer every future; the number of partitions answered with an error."""
        failed = 0
        for tp, futures in self.partitions.items():
            error = errors if isinstance(errors, ErrorCode) else errors.get(tp, E.NETWORK_EXCEPTION)
            failed += error != E.NONE
            for future in futures:
                if not future.done():
                    future.set_result(error)
        return failed


class AddPartitionsToTxnManager:
    def __init__(self, broker, request_timeout_s: float = REQUEST_TIMEOUT_S) -> None:
        self.broker = broker
        self.request_timeout_s = request_timeout_s
        self.connections = InterBrokerConnections(broker, "txn-verification", request_timeout_s)
        self._waiting: dict[int, dict[str, _Pending]] = {}  # broker id -> transactional id -> pending
        self._sending: dict[int, asyncio.Task] = {}  # broker id -> the task sending to it
        self._closed = False
        self.failures = 0  # partitions answered with an error
        self.time_buckets = [0] * (len(BUCKETS_MS) + 1)  # verification times per BUCKETS_MS bound, then +Inf
        self.time_ms = 0.0

    def coordinator_of(self, transactional_id: str) -> int:
        """The broker id leading ``transactional_id``'s ``__transaction_state`` partition, as
        the metadata image has it; NO_LEADER when unknown."""
        image = self.broker.metadata_image()
        topic = image.topic(TRANSACTION_STATE_TOPIC)
        if topic is None or not topic.partitions:
            return NO_LEADER
        leader = image.leader(TRANSACTION_STATE_TOPIC, partition_for(transactional_id, len(topic.partitions)))
        return leader if leader != NO_LEADER and image.broker(leader) is not None else NO_LEADER

    def verify(self, transactional_id: str, producer_id: int, producer_epoch: int,
               tp: TopicPartition) -> ErrorCode | asyncio.Future:
        """The coordinator's answer for ``tp`` (see the module docstring): an error code at
        once, or a future of one (never failed: every failure is an error code)."""
        if self._closed:
            return E.COORDINATOR_NOT_AVAILABLE
        node = self.coordinator_of(transactional_id)
        if node == NO_LEADER:
            return E.COORDINATOR_NOT_AVAILABLE
        if node == self.broker.broker_id:
            return E.NOT_COORDINATOR
        waiting = self._waiting.setdefault(node, {})
        pending = waiting.get(transactional_id)
        if pending is not None and (pending.producer_id, pending.producer_epoch) != (producer_id, producer_epoch):
            if producer_epoch < pending.producer_epoch and producer_id == pending.producer_id:
                self.failures += 1
                return E.INVALID_PRODUCER_EPOCH  # fenced by the verification already waiting
            self._answer(pending, E.INVALID_PRODUCER_EPOCH)  # a newer producer of the id fences it
            pending = None
        if pending is None:
            pending = waiting[transactional_id] = _Pending(producer_id, producer_epoch)
        future = asyncio.get_running_loop().create_future()
        pending.partitions.setdefault(tp, []).append(future)
        if node not in self._sending:
            task = asyncio.get_running_loop().create_task(self._send_all(node))
            self._sending[node] = task
        return future

    def close(self) -> None:
        """Stop: every verification waiting is answered NETWORK_EXCEPTION (retriable)."""
        self._closed = True
        for task in self._sending.values():
            task.cancel()
        self._sending.clear()
        for waiting in self._waiting.values():
            for pending in waiting.values():
                self._answer(pending, E.NETWORK_EXCEPTION)
        self._waiting.clear()
        self.connections.close()

    def _answer(self, pending: _Pending, errors) -> None:
        self.failures += pending.answer(errors)
        ms = (perf_counter() - pending.started) * 1000
        self.time_buckets[bisect_left(BUCKETS_MS, ms)] += 1
        self.time_ms += ms

    def metric_families(self) -> list:
        """The two families of the module's docstring, for the broker's collector."""
        from prometheus_client.core import CounterMetricFamily, HistogramMetricFamily

        failures = CounterMetricFamily("kafka_server_addpartitionstotxnmanager_verificationfailurerate",
                                       "Partitions whose verification with another broker's transaction "
                                       "coordinator failed (Kafka's VerificationFailureRate)")
        failures.add_metric([], self.failures)
        times = HistogramMetricFamily("kafka_server_addpartitionstotxnmanager_verificationtimems",
                                      "Time to verify a transaction's partitions with another broker's "
                                      "coordinator, in ms (Kafka's VerificationTimeMs)")
        times.add_metric([], cumulative_buckets(self.time_buckets), self.time_ms)
        return [failures, times]

    async def _send_all(self, node: int) -> None:
        """Send what waits for ``node``, one request at a time, until nothing waits."""
        batch: dict[str, _Pending] = {}
        try:
            while not self._closed and node in self._waiting:
                batch = self._waiting.pop(node)
                answers = await self._send(node, batch)
                for transactional_id, pending in batch.items():
                    self._answer(pending, answers.get(transactional_id, E.NETWORK_EXCEPTION))
                batch = {}
        except Exception:  # noqa: BLE001 - a bug here must not leave produce requests waiting
            self.broker.log_limiter.error(log, ("txn-verification-bug", node), "verifying with broker %d failed",
                                          node, exc_info=True)
        finally:
            for pending in batch.values():  # cancelled mid-request, or an unexpected error
                self._answer(pending, E.NETWORK_EXCEPTION)
            if self._sending.get(node) is asyncio.current_task():
                del self._sending[node]

    async def _send(self, node: int, batch: dict[str, _Pending]) -> dict[str, dict | ErrorCode]:
        """One request to ``node``: per transactional id, each partition's error, or one error
        for all of its partitions."""
        try:
            conn = await self.connections.get(node)
            theirs = conn.broker_versions.get(ApiKey.ADD_PARTITIONS_TO_TXN)
            if theirs is None or theirs[1] < FIRST_BROKER_VERSION:
                self.broker.log_limiter.warning(log, ("txn-verification-version", node),
                                                "broker %d does not serve AddPartitionsToTxn v4: transactional "
                                                "batches are appended unverified", node)
                return dict.fromkeys(batch, E.NONE)
            version = min(theirs[1], LATEST_VERSION)
            response = await conn.send(ApiKey.ADD_PARTITIONS_TO_TXN, _request(batch), version=version,
                                       timeout=self.request_timeout_s)
        except (KafkaError, OSError, TimeoutError) as e:  # refused, lost, timed out, TLS or SASL failed
            log.debug("AddPartitionsToTxn to broker %d failed: %s", node, e)
            self.connections.drop(node)
            return dict.fromkeys(batch, E.NETWORK_EXCEPTION)
        if response.error_code != E.NONE:
            error = error_code_of(response.error_code)
            self.broker.log_limiter.warning(log, ("txn-verification-error", node, error),
                                            "AddPartitionsToTxn to broker %d answered %s", node, error.name)
            return dict.fromkeys(batch, E.INVALID_TXN_STATE if error == E.CLUSTER_AUTHORIZATION_FAILED else error)
        answers: dict[str, dict] = {}
        for result in response.results_by_transaction:
            errors = answers.setdefault(result.transactional_id, {})
            for topic in result.topic_results:
                for p in topic.results_by_partition:
                    errors[(topic.name, p.partition_index)] = error_code_of(p.partition_error_code)
        return answers


def _request(batch: dict[str, _Pending]) -> AddPartitionsToTxnRequest:
    transactions = []
    for transactional_id, pending in batch.items():
        topics: dict[str, list[int]] = {}
        for topic, p in pending.partitions:
            topics.setdefault(topic, []).append(p)
        transactions.append(AddPartitionsToTxnTransaction(
            transactional_id=transactional_id, producer_id=pending.producer_id,
            producer_epoch=pending.producer_epoch, verify_only=True,
            topics=[AddPartitionsToTxnTopic(name=t, partitions=ps) for t, ps in topics.items()]))
    return AddPartitionsToTxnRequest(transactions=transactions)
