"""``TransactionMarkerChannel``: the coordinator's WriteTxnMarkers to partition leaders.

Kafka's ``TransactionMarkerChannelManager``. Once a transaction is PrepareCommit or
PrepareAbort, every partition in it needs an end-transaction marker (a control batch,
written by the partition's leader). ``write_markers`` sends WriteTxnMarkers v1 **over the
wire** to each partition's current leader (one connection per broker on the inter-broker
listener, ``broker.inter_broker_connections``; one request per leader per round with all
that leader's partitions of the transaction); the partitions this broker leads get theirs
in-process, through the code the WriteTxnMarkers handler runs (``broker.write_txn_markers``,
``server/txn_marker_writer.py``: same checks, append, producer-state update, wait for the ISR
and offsets completion, only no round trip; what the channel asks of the broker is in
``coordinator/inter_broker.py``). It repeats for the partitions not done yet, with a short
back-off and the leaders looked up again, until every partition is done or gone:

    NONE                                      done
    partition's topic deleted                 gone (no marker needed)
    INVALID_PRODUCER_EPOCH                    done: the partition already knows a newer epoch
    TRANSACTION_COORDINATOR_FENCED            stop: a newer coordinator owns the transaction
    anything else (NOT_LEADER_OR_FOLLOWER,    retried (a leader moving, a short ISR, a broker
    NOT_ENOUGH_REPLICAS[_AFTER_APPEND],        restarting, a connection refused)
    timeouts, ...)

It stops early when ``still_valid()`` turns false (this broker no longer coordinates the
transaction's partition, or at another epoch). Markers carry the coordinator epoch, so a
deposed coordinator's markers are refused by the leaders.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from odradek.client.errors import KafkaConnectionError, KafkaTimeoutError, UnsupportedVersionError
from odradek.coordinator.inter_broker import InterBrokerConnectionPool, error_code_of
from odradek.coordinator.transaction.marker_write import MarkerWrite
from odradek.metadata.layout import NO_LEADER
from odradek.protocol.generated import ApiKey
from odradek.protocol.generated.error_codes import ErrorCode
from odradek.protocol.generated.write_txn_markers_request import (
    WritableTxnMarker,
    WritableTxnMarkerTopic,
    WriteTxnMarkersRequest,
)

log = logging.getLogger("odradek.coordinator.transaction")

MARKER_VERSION = 1
TopicPartition = tuple[str, int]


class TransactionMarkerChannel:
    def __init__(self, broker, *, retry_backoff_s: float = 0.1, request_timeout_s: float = 30.0) -> None:
        self.broker = broker
        self.retry_backoff_s = retry_backoff_s
        self.request_timeout_s = request_timeout_s
        self._connections: InterBrokerConnectionPool | None = None
        self._closed = False

    @property
    def connections(self) -> InterBrokerConnectionPool:
        """The pool of connections to the other leaders (``broker.inter_broker_connections``),
        made on first use: a broker whose markers all stay local never makes one."""
        if self._connections is None:
            self._connections = self.broker.inter_broker_connections("txn-markers", self.request_timeout_s)
            if self._closed:
                self._connections.close()
        return self._connections

    def close(self) -> None:
        self._closed = True
        if self._connections is not None:
            self._connections.close()

    async def write_markers(self, producer_id: int, producer_epoch: int, commit: bool, coordinator_epoch: int,
                            partitions, still_valid: Callable[[], bool],
                            on_done: Callable[[TopicPartition], None] | None = None) -> bool:
        """Write the markers (see the module): True once every partition is done or gone,
        False when stopped (fenced, no longer valid, channel closed)."""
        pending = set(partitions)
        first = True
        while pending:
            if not first:
                await asyncio.sleep(self.retry_backoff_s)
            first = False
            if self._closed or not still_valid():
                return False
            by_leader = self._group_by_leader(pending, on_done)
            rounds = [self._send(leader, producer_id, producer_epoch, commit, coordinator_epoch, tps)
                      for leader, tps in by_leader.items()]
            # One leader (the common case): awaited directly, no task for it.
            for answers in [await rounds[0]] if len(rounds) == 1 else await asyncio.gather(*rounds):
                for tp, error in answers.items():
                    if error in (ErrorCode.NONE, ErrorCode.INVALID_PRODUCER_EPOCH):
                        if error != ErrorCode.NONE:
                            log.warning("marker for producer %d at %s-%d: %s; counted as written",
                                        producer_id, tp[0], tp[1], error.name)
                        pending.discard(tp)
                        if on_done is not None:
                            on_done(tp)
                    elif error == ErrorCode.TRANSACTION_COORDINATOR_FENCED:
                        log.info("markers of producer %d: coordinator epoch %d fenced at %s-%d",
                                 producer_id, coordinator_epoch, tp[0], tp[1])
                        return False
                    else:
                        log.debug("marker for producer %d at %s-%d: %s; retrying", producer_id, tp[0], tp[1],
                                  error.name if isinstance(error, ErrorCode) else error)
        return True

    def _group_by_leader(self, pending: set, on_done) -> dict[int, list[TopicPartition]]:
        image = self.broker.metadata_image()
        by_leader: dict[int, list[TopicPartition]] = {}
        for tp in sorted(pending):
            topic = image.topic(tp[0])
            if topic is None or tp[1] >= len(topic.partitions) or tp[0] in image.topics_being_deleted:
                log.info("no marker for %s-%d: the partition is gone", tp[0], tp[1])
                pending.discard(tp)
                if on_done is not None:
                    on_done(tp)
                continue
            leader = image.leader(*tp)
            if leader != NO_LEADER:
                by_leader.setdefault(leader, []).append(tp)
        return by_leader

    async def _send(self, leader: int, producer_id: int, producer_epoch: int, commit: bool,
                    coordinator_epoch: int, tps: list[TopicPartition]) -> dict[TopicPartition, ErrorCode]:
        """``leader``'s markers for ``tps``: each partition's error."""
        if leader == self.broker.broker_id:
            return await self._write_local(producer_id, producer_epoch, commit, coordinator_epoch, tps)
        return await self._send_remote(leader, producer_id, producer_epoch, commit, coordinator_epoch, tps)

    async def _write_local(self, producer_id: int, producer_epoch: int, commit: bool, coordinator_epoch: int,
                           tps: list[TopicPartition]) -> dict[TopicPartition, ErrorCode]:
        """The markers of partitions this broker leads, in-process: what the WriteTxnMarkers
        handler would answer (``broker.write_txn_markers``, the same code), without the
        round trip. An unexpected failure (the handler's would close the connection) is
        UNKNOWN_SERVER_ERROR for all, so retried.

        It starts one loop iteration late (``_after_this_iteration``): the answer to the
        EndTxn that began the markers is written first, as when the markers were a request
        to this broker, instead of waiting behind them and the CompleteCommit write."""
        await _after_this_iteration()
        writes = [MarkerWrite(topic, p, producer_id, producer_epoch, coordinator_epoch, commit) for topic, p in tps]
        try:
            await self.broker.write_txn_markers(writes)
        except Exception as e:  # noqa: BLE001 - the transaction must not stay prepared for ever
            self.broker.log_limiter.error(log, ("txn-markers", type(e)), "writing the markers of producer %d "
                                          "here failed; retrying", producer_id, exc_info=True)
            return {tp: ErrorCode.UNKNOWN_SERVER_ERROR for tp in tps}
        return {(w.topic, w.index): w.error for w in writes}

    async def _send_remote(self, leader: int, producer_id: int, producer_epoch: int, commit: bool,
                           coordinator_epoch: int, tps: list[TopicPartition]) -> dict[TopicPartition, ErrorCode]:
        """One WriteTxnMarkers to ``leader``: each partition's error (NETWORK_EXCEPTION for all
        when the request failed)."""
        topics: dict[str, list[int]] = {}
        for topic, p in tps:
            topics.setdefault(topic, []).append(p)
        marker = WritableTxnMarker(producer_id=producer_id, producer_epoch=producer_epoch, transaction_result=commit,
                                   topics=[WritableTxnMarkerTopic(name=t, partition_indexes=ps)
                                           for t, ps in topics.items()],
                                   coordinator_epoch=coordinator_epoch)
        try:
            conn = await self.connections.get(leader)
            theirs = conn.broker_versions.get(ApiKey.WRITE_TXN_MARKERS)
            if theirs is None or theirs[1] < MARKER_VERSION:
                raise UnsupportedVersionError(f"broker {leader} does not serve WriteTxnMarkers v1")
            response = await conn.send(ApiKey.WRITE_TXN_MARKERS, WriteTxnMarkersRequest(markers=[marker]),
                                       version=MARKER_VERSION, timeout=self.request_timeout_s)
        except (KafkaConnectionError, KafkaTimeoutError, UnsupportedVersionError, OSError, TimeoutError) as e:
            log.debug("WriteTxnMarkers to broker %d failed: %s", leader, e)
            self.connections.drop(leader)
            return {tp: ErrorCode.NETWORK_EXCEPTION for tp in tps}
        answers = {tp: ErrorCode.UNKNOWN_SERVER_ERROR for tp in tps}
        for result in response.markers:
            if result.producer_id != producer_id:
                continue
            for t in result.topics:
                for p in t.partitions:
                    if (t.name, p.partition_index) in answers:
                        answers[(t.name, p.partition_index)] = error_code_of(p.error_code)
        return answers


async def _after_this_iteration() -> None:
    """Resume once the callbacks already scheduled on the loop have run, and those they
    schedule in turn (a connection's response flush, scheduled when a handler finishes):
    a timer due now runs after them, unlike ``asyncio.sleep(0)``."""
    loop = asyncio.get_running_loop()
    resumed = loop.create_future()
    loop.call_later(0, _resolve, resumed)
    await resumed


def _resolve(future: asyncio.Future) -> None:
    if not future.done():
        future.set_result(None)
