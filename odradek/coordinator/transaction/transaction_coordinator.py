"""``TransactionCoordinator``: the transaction coordinator's runtime on the broker's event loop.

A transactional id belongs to one ``__transaction_state`` partition (Java's
``String.hashCode`` of the id, non-negative, modulo the partition count:
``coordinator.partitioner``); the leader of that partition is the id's coordinator.
This runtime owns one ``TransactionShard`` per partition this broker leads (the slots,
leadership and loading of ``coordinator_runtime.CoordinatorRuntime``, shared with the group
coordinator) and does for them what they cannot do themselves:

- **load**: a shard is built by replaying its partition (``loader``) in a worker thread; until
  then its ids answer COORDINATOR_LOAD_IN_PROGRESS. Loads start at start-up, on leadership
  (``on_leadership_change``, from LeaderAndIsr / StopReplica), on FindCoordinator, and when a
  request finds this broker leading a partition without a shard of its leader epoch; the
  leader epoch is the shard's coordinator epoch. Once loaded, transactions found in
  PrepareCommit / PrepareAbort get their markers written. A partition no longer led here is
  unloaded: its ids answer NOT_COORDINATOR, its marker writers stop.
- **write**: a transit becomes one record (``transaction_log``) in one v2 batch, appended to the
  partition when its ISR has ``min.insync.replicas`` (``ReplicaManager.append_as_coordinator``);
  the transit completes once the high watermark passes it with the ISR still that large
  (acks=all, ``ReplicaManager.replication_error``), else the metadata stays as it was and the
  client gets Kafka's mapping of the write error (``TransactionStateManager``'s: an ISR short
  of ``min.insync.replicas`` before or after the append, or a timeout, COORDINATOR_NOT_AVAILABLE;
  a lost leadership NOT_COORDINATOR).
- **end**: EndTxn is answered once PrepareCommit / PrepareAbort is written; the markers are
  then written by ``TransactionMarkerChannel`` and CompleteCommit / CompleteAbort follows.
- **verify** (``TransactionVerification``): whether a partition is in a transaction, for the
  partition leaders of this broker (KIP-890).
- **settle**: an AddPartitionsToTxn that finds the id's previous transaction being ended
  here waits for it, up to ``SETTLE_WAIT_S``, instead of answering CONCURRENT_TRANSACTIONS.
- **time**: every ``transaction.abort.timed.out.transaction.cleanup.interval.ms`` Ongoing
  transactions past their timeout are aborted with their producer fenced (epoch bumped);
  every ``transaction.remove.expired.transaction.cleanup.interval.ms`` ids idle for
  ``transactional.id.expiration.ms`` are forgotten (a tombstone).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable

from odradek.coordinator.coordinator_runtime import CoordinatorError, CoordinatorRuntime, CoordinatorSlot
from odradek.coordinator.partitioner import partition_for
from odradek.coordinator.transaction.loader import load_shard
from odradek.coordinator.transaction.marker_channel import TransactionMarkerChannel
from odradek.coordinator.transaction.transaction_config import TRANSACTION_STATE_TOPIC, TransactionConfig
from odradek.coordinator.transaction.transaction_log import TransactionLogRecord
from odradek.coordinator.transaction.transaction_metadata import (
    IllegalTransition,
    TransactionMetadata,
    TxnTransit,
)
from odradek.coordinator.transaction.transaction_shard import TransactionShard
from odradek.coordinator.transaction.transaction_state import TransactionState
from odradek.coordinator.transaction.transaction_verification import TransactionVerification, settled
from odradek.protocol.generated.error_codes import ErrorCode
from odradek.records.builder import BatchBuilder

log = logging.getLogger("odradek.coordinator.transaction")

E = ErrorCode
OFFSETS_TOPIC = "__consumer_offsets"
SETTLE_WAIT_S = 0.5  # the longest an AddPartitionsToTxn waits for its previous transaction to end


class TransactionCoordinator(TransactionVerification, CoordinatorRuntime):
    TOPIC = TRANSACTION_STATE_TOPIC
    CONFIG = TransactionConfig
    ROLE = "transaction coordinator"
    log = log

    def __init__(self, broker, config: TransactionConfig) -> None:
        super().__init__(broker, config)
        self.markers = TransactionMarkerChannel(broker, retry_backoff_s=config.marker_retry_backoff_ms / 1000)
        self._tasks: set[asyncio.Task] = set()
        # The transit being written per transactional id, and a future done once it is.
        self._in_flight: dict[str, tuple[TxnTransit, asyncio.Future]] = {}
        # Transactions whose markers are being written: a future done once they are complete.
        self._completing: dict[str, asyncio.Future] = {}
        # AddPartitionsToTxn waiting for the previous transaction to end: its partitions, and
        # a future done once it has been answered.
        self._deferred: dict[str, tuple[frozenset, asyncio.Future]] = {}

    def _periodic(self) -> list[tuple[int, object]]:
        return [(self.config.abort_timed_out_interval_ms, self.abort_timed_out_transactions),
                (self.config.remove_expired_interval_ms, self.expire_transactional_ids)]

    def shutdown(self) -> None:
        super().shutdown()
        for task in list(self._tasks):
            task.cancel()
        self.markers.close()

    # --- the runtime's hooks ------------------------------------------------------------------
    def _new_slot(self, p: int, leader_epoch: int) -> CoordinatorSlot:
        return CoordinatorSlot(p, leader_epoch, TransactionShard(p, leader_epoch))

    def _load_shard(self, shard, plog):
        return load_shard(shard, plog)

    def _loaded(self, slot: CoordinatorSlot, stats) -> None:
        """Markers go out for the transactions found in PrepareCommit / PrepareAbort."""
        if stats is not None:
            log.info("loaded %s-%d: %d records up to offset %d, %d transactional ids", TRANSACTION_STATE_TOPIC,
                     slot.partition, stats.records, stats.end_offset, len(slot.shard.transactions))
        slot.loading = False
        for txn in slot.shard.preparing():
            self._spawn_markers(slot, txn)

    def _track(self, task: asyncio.Task) -> None:
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    # --- writing ------------------------------------------------------------------------------
    def _transition(self, slot: CoordinatorSlot, txn: TransactionMetadata, transit: TxnTransit
                    ) -> Awaitable[ErrorCode]:
        """Write ``transit`` and complete it, or leave ``txn`` as it was: the client's error.

        The record is appended now. With the ISR this broker alone (one broker, or followers
        out of sync) the transit is complete before this returns, so a request read next
        (a Produce pipelined behind an AddPartitionsToTxn) finds it done. Otherwise it is in
        flight (``_in_flight``, which ``verify`` waits for) until the ISR has the record."""
        try:
            error, last_offset = self._append_record(slot, TransactionLogRecord(txn.transactional_id, transit))
            if error == E.NONE:
                error = self._replication_error(slot, last_offset)
                if error is None:
                    done = asyncio.get_running_loop().create_future()
                    self._in_flight[txn.transactional_id] = (transit, done)
                    return self._replicate_transit(slot, txn, transit, last_offset, done)
        except BaseException:
            txn.abort_pending()
            raise
        return _answered(self._finish_transit(slot, txn, transit, error))

    async def _replicate_transit(self, slot: CoordinatorSlot, txn: TransactionMetadata, transit: TxnTransit,
                                 last_offset: int, done: asyncio.Future) -> ErrorCode:
        try:
            error = await self._replicated(slot, last_offset)
        except BaseException:
            txn.abort_pending()
            raise
        else:
            return self._finish_transit(slot, txn, transit, error)
        finally:
            if self._in_flight.get(txn.transactional_id, (None, None))[1] is done:
                del self._in_flight[txn.transactional_id]
            done.set_result(None)

    def _finish_transit(self, slot: CoordinatorSlot, txn: TransactionMetadata, transit: TxnTransit,
                        error: ErrorCode) -> ErrorCode:
        if error == E.NONE and not self._current(slot):
            error = E.NOT_COORDINATOR
        if error == E.NONE:
            txn.complete(transit)
        else:
            txn.abort_pending()
        return error

    async def _write(self, slot: CoordinatorSlot, record: TransactionLogRecord) -> ErrorCode:
        """Append ``record`` and wait until the ISR has it; Kafka's error mapping."""
        error, last_offset = self._append_record(slot, record)
        if error != E.NONE:
            return error
        return await self._replicated(slot, last_offset)

    def _append_record(self, slot: CoordinatorSlot, record: TransactionLogRecord) -> tuple[ErrorCode, int]:
        """Append ``record`` to the slot's partition: ``(NONE, last offset)`` or the client's
        error (Kafka's mapping of the append's) and -1."""
        part = self._led_partition(slot)
        if part is None:
            return E.NOT_COORDINATOR, -1
        builder = BatchBuilder()
        builder.append(self.clock.milliseconds(), record.key_bytes(), record.value_bytes())
        # (An ISR short of min.insync.replicas refuses it NOT_ENOUGH_REPLICAS: mapped below.)
        error, last_offset = self._append_to(slot, part, builder.build(), E.UNKNOWN_SERVER_ERROR)
        return (E.NONE, last_offset) if error == E.NONE else (_write_error(error), -1)

    def _replication_error(self, slot: CoordinatorSlot, last_offset: int) -> ErrorCode | None:
        """How the acks=all write of the record at ``last_offset`` stands, in Kafka's mapping
        for clients (``ReplicaManager.replication_error``: NOT_ENOUGH_REPLICAS_AFTER_APPEND,
        the ISR having shrunk below ``min.insync.replicas`` while it waited, becomes
        COORDINATOR_NOT_AVAILABLE; NOT_LEADER_OR_FOLLOWER becomes NOT_COORDINATOR); None while
        it waits."""
        error = self.broker.replica_manager.replication_error(TRANSACTION_STATE_TOPIC, slot.partition, last_offset)
        return None if error is None else _write_error(error)

    async def _replicated(self, slot: CoordinatorSlot, last_offset: int) -> ErrorCode:
        """Wait until the write of the record at ``last_offset`` is over; Kafka's error mapping."""
        error = self._replication_error(slot, last_offset)
        if error is None:
            waits = [(TRANSACTION_STATE_TOPIC, slot.partition, last_offset, None)]
            await self.broker.replica_manager.wait_for_replication(waits, self.config.write_timeout_ms / 1000)
            error = self._replication_error(slot, last_offset)
        return _write_error(E.REQUEST_TIMED_OUT) if error is None else error

    # --- ending transactions ------------------------------------------------------------------
    def _prepare_end(self, slot: CoordinatorSlot, txn: TransactionMetadata, transit: TxnTransit
                     ) -> Awaitable[ErrorCode]:
        """Write PrepareCommit / PrepareAbort; then the markers go out in the background."""
        written = self._transition(slot, txn, transit)
        error = answer_now(written)
        if error is None:
            return self._after_prepare(slot, txn, written)
        if error == E.NONE:
            self._spawn_markers(slot, txn)
        return written

    async def _after_prepare(self, slot: CoordinatorSlot, txn: TransactionMetadata, written) -> ErrorCode:
        error = await written
        if error == E.NONE:
            self._spawn_markers(slot, txn)
        return error

    def _spawn_markers(self, slot: CoordinatorSlot, txn: TransactionMetadata) -> None:
        """Write the markers of ``txn`` (preparing), then CompleteCommit / CompleteAbort, in
        the background; ``_completing`` holds a future done when that ends."""
        tid = txn.transactional_id
        done = self._completing[tid] = asyncio.get_running_loop().create_future()

        def finished(_task) -> None:
            if self._completing.get(tid) is done:
                del self._completing[tid]
            done.set_result(None)
        self._spawn(self._write_markers(slot, txn), slot).add_done_callback(finished)

    async def _write_markers(self, slot: CoordinatorSlot, txn: TransactionMetadata) -> None:
        commit = txn.state == TransactionState.PREPARE_COMMIT
        done = await self.markers.write_markers(
            txn.producer_id, txn.producer_epoch, commit, slot.shard.coordinator_epoch, set(txn.partitions),
            still_valid=lambda: self._current(slot), on_done=txn.remove_partition)
        while done and self._current(slot) and txn.state.is_preparing:
            if txn.pending is None:
                error = await self._transition(slot, txn, txn.prepare_complete(self.clock.milliseconds()))
                if error == E.NONE:
                    log.debug("%s: %s", txn.transactional_id, txn.state.state_name)
                    return
                log.info("%s: writing %s failed (%s); retrying", txn.transactional_id,
                         "CompleteCommit" if commit else "CompleteAbort", error.name)
            await asyncio.sleep(self.config.marker_retry_backoff_ms / 1000)

    # --- time ---------------------------------------------------------------------------------
    def abort_timed_out_transactions(self, now_ms: int | None = None) -> int:
        """Fence and abort the Ongoing transactions past their timeout (Kafka's
        ``abortTimedOutTransactions``); return how many."""
        now = self.clock.milliseconds() if now_ms is None else now_ms
        count = 0
        for slot in list(self._slots.values()):
            if slot.loading:
                continue
            for txn in slot.shard.timed_out(now):
                log.info("aborting transaction of %s (producer %d, epoch %d): open longer than %d ms",
                         txn.transactional_id, txn.producer_id, txn.producer_epoch, txn.timeout_ms)
                try:
                    transit = txn.prepare_fence_and_abort(now)
                except IllegalTransition as e:  # an epoch that cannot be bumped: left to its producer
                    log.error("cannot abort the timed-out transaction of %s: %s", txn.transactional_id, e)
                    continue
                ending = self._prepare_end(slot, txn, transit)
                if asyncio.iscoroutine(ending):  # (else answered at once: the markers are under way)
                    self._spawn(ending, slot)
                count += 1
        return count

    def expire_transactional_ids(self, now_ms: int | None = None) -> int:
        """Forget ids idle for ``transactional.id.expiration.ms`` (a tombstone each)."""
        now = self.clock.milliseconds() if now_ms is None else now_ms
        count = 0
        for slot in list(self._slots.values()):
            if slot.loading:
                continue
            for txn in slot.shard.expired(now, self.config.id_expiration_ms):
                txn.prepare_dead()
                self._spawn(self._expire(slot, txn), slot)
                count += 1
        return count

    async def _expire(self, slot: CoordinatorSlot, txn: TransactionMetadata) -> None:
        error = E.NOT_COORDINATOR
        try:
            error = await self._write(slot, TransactionLogRecord(txn.transactional_id, None))
        finally:
            if error == E.NONE and slot.shard.transactions.get(txn.transactional_id) is txn:
                del slot.shard.transactions[txn.transactional_id]
                log.info("transactional id %s expired", txn.transactional_id)
            else:
                txn.abort_pending()

    # --- the transaction APIs -----------------------------------------------------------------
    async def init_producer_id(self, transactional_id: str, timeout_ms: int, producer_id: int = -1,
                               producer_epoch: int = -1) -> tuple[ErrorCode, int, int]:
        """``(error, producer id, epoch)`` for a transactional producer (see ``TransactionShard``)."""
        if not transactional_id:
            return E.INVALID_REQUEST, -1, -1
        if timeout_ms <= 0 or timeout_ms > self.config.max_timeout_ms:
            return E.INVALID_TRANSACTION_TIMEOUT, -1, -1
        if (producer_id == -1) != (producer_epoch == -1):
            return E.INVALID_REQUEST, -1, -1
        expected = None if producer_id == -1 else (producer_id, producer_epoch)
        try:
            slot = self._slot_for(transactional_id)
            result = slot.shard.init_producer_id(transactional_id, timeout_ms, expected, self.clock.milliseconds(),
                                                 self._new_producer_id)
        except CoordinatorError as e:
            return e.error, -1, -1
        if isinstance(result, ErrorCode):
            return result, -1, -1
        txn = slot.shard.get(transactional_id)
        if result.state == TransactionState.PREPARE_ABORT:  # fencing an Ongoing transaction
            error = await self._prepare_end(slot, txn, result)
            return (E.CONCURRENT_TRANSACTIONS if error == E.NONE else error), -1, -1
        error = await self._transition(slot, txn, result)
        if error != E.NONE:
            return error, -1, -1
        log.info("initialized transactional id %s with producer %d epoch %d", transactional_id, txn.producer_id,
                 txn.producer_epoch)
        return E.NONE, txn.producer_id, txn.producer_epoch

    def _new_producer_id(self) -> int:
        try:
            return self.broker.producer_ids.init_producer_id().producer_id
        except OSError as e:
            self.broker.log_storage_error(f"could not reserve producer ids: {e}")
            raise CoordinatorError(E.COORDINATOR_LOAD_IN_PROGRESS) from None

    def add_partitions(self, transactional_id: str, producer_id: int, producer_epoch: int,
                       partitions) -> Awaitable[ErrorCode]:
        """The partitions are added once the returned awaitable gives NONE. The transit is
        prepared before this returns, so a Produce read after this request on the same
        connection finds it in flight (``verify``)."""
        return self._operate(transactional_id, lambda shard, now: shard.add_partitions(
            transactional_id, producer_id, producer_epoch, partitions, now), self._transition,
            self._settle_deadline(), frozenset(partitions))

    def offsets_partition(self, group_id: str) -> int:
        """The ``__consumer_offsets`` partition of ``group_id`` (AddOffsetsToTxn adds it)."""
        topic = self.broker.metadata_image().topic(OFFSETS_TOPIC)
        n = len(topic.partitions) if topic is not None else self.broker.config["offsets.topic.num.partitions"]
        return partition_for(group_id, n)

    def add_offsets(self, transactional_id: str, producer_id: int, producer_epoch: int,
                    group_id: str) -> Awaitable[ErrorCode]:
        return self.add_partitions(transactional_id, producer_id, producer_epoch,
                                   [(OFFSETS_TOPIC, self.offsets_partition(group_id))])

    def end_txn(self, transactional_id: str, producer_id: int, producer_epoch: int,
                commit: bool) -> Awaitable[ErrorCode]:
        return self._operate(transactional_id, lambda shard, now: shard.end_txn(
            transactional_id, producer_id, producer_epoch, commit, now), self._prepare_end)

    def _operate(self, transactional_id: str, operation, write, settle_by: float | None = None,
                 adding: frozenset = frozenset()) -> Awaitable[ErrorCode]:
        """Run ``operation(shard, now_ms)`` on the shard of ``transactional_id`` now; a transit
        it returns is written by ``write(slot, txn, transit)``, whose error is the answer. An
        ErrorCode it returns (or the slot's, INVALID_REQUEST for an empty id) is the answer.
        ``settle_by`` (loop time): CONCURRENT_TRANSACTIONS from a transaction being ended
        here is not answered before then; the operation runs again once it ended, and
        meanwhile ``_deferred`` holds the partitions it is ``adding`` (``verify`` waits)."""
        if not transactional_id:
            return _answered(E.INVALID_REQUEST)
        try:
            slot = self._slot_for(transactional_id)
        except CoordinatorError as e:
            return _answered(e.error)
        result = operation(slot.shard, self.clock.milliseconds())
        if result == E.CONCURRENT_TRANSACTIONS and settle_by is not None:
            settling = self._settling(transactional_id)
            if settling is not None:
                deferred = asyncio.get_running_loop().create_future()
                self._deferred[transactional_id] = (adding, deferred)
                return self._operate_after(settling, settle_by, transactional_id, operation, write, deferred)
        if isinstance(result, ErrorCode):
            return _answered(result)
        return write(slot, slot.shard.get(transactional_id), result)

    async def _operate_after(self, settling: asyncio.Future, settle_by: float, transactional_id: str,
                             operation, write, deferred: asyncio.Future) -> ErrorCode:
        try:
            if not await settled(settling, settle_by):
                return E.CONCURRENT_TRANSACTIONS
            adding = self._deferred[transactional_id][0]
            return await self._operate(transactional_id, operation, write, settle_by, adding)
        finally:
            if self._deferred.get(transactional_id, (None, None))[1] is deferred:
                del self._deferred[transactional_id]
            deferred.set_result(None)

    # --- settling (a transaction being ended) --------------------------------------------------
    # An AddPartitionsToTxn (and a transaction's verification) that finds the previous
    # transaction of its id still being ended here waits for it, up to SETTLE_WAIT_S, rather
    # than answering CONCURRENT_TRANSACTIONS at once: a producer that begins its next
    # transaction as soon as EndTxn is answered would otherwise retry (Java's after 20 ms)
    # while the markers, written in-process in a fraction of a millisecond, complete.
    def _settle_deadline(self) -> float:
        return asyncio.get_running_loop().time() + SETTLE_WAIT_S

    def _settling(self, transactional_id: str) -> asyncio.Future | None:
        """A future done at the next step of ``transactional_id``'s transaction being ended:
        its transit in flight written, or its markers and Complete* written (None: neither)."""
        in_flight = self._in_flight.get(transactional_id)
        return in_flight[1] if in_flight is not None else self._completing.get(transactional_id)

    def describe(self, transactional_id: str) -> tuple[ErrorCode, TransactionMetadata | None]:
        if not transactional_id:
            return E.INVALID_REQUEST, None
        try:
            slot = self._slot_for(transactional_id)
        except CoordinatorError as e:
            return e.error, None
        txn = slot.shard.get(transactional_id)
        if txn is None or txn.state == TransactionState.DEAD or txn.producer_epoch < 0:
            return E.TRANSACTIONAL_ID_NOT_FOUND, None
        return E.NONE, txn

    def list_transactions(self, states=(), producer_ids=(), duration_ms: int = -1
                          ) -> tuple[ErrorCode, list[str], list[TransactionMetadata]]:
        """``(error, unknown state filters, transactions)`` of the loaded shards."""
        if self._closed:
            return E.COORDINATOR_NOT_AVAILABLE, [], []
        self.refresh()
        unknown = [s for s in states if TransactionState.from_name(s) is None]
        wanted = {TransactionState.from_name(s) for s in states} - {None}
        if states and not wanted:
            return E.NONE, unknown, []
        now = self.clock.milliseconds()
        found = []
        for slot in self._slots.values():
            if slot.loading:
                continue
            for txn in slot.shard.transactions.values():
                if txn.producer_epoch < 0 or (wanted and txn.state not in wanted):
                    continue
                if producer_ids and txn.producer_id not in producer_ids:
                    continue
                if duration_ms >= 0 and now - txn.start_ms < duration_ms:
                    continue
                found.append(txn)
        error = E.COORDINATOR_LOAD_IN_PROGRESS if self.is_loading() else E.NONE
        return error, unknown, found


def _answered(error: ErrorCode) -> asyncio.Future:
    """An answer known now, as a done future: a handler may answer without a task
    (``answer_now``)."""
    future = asyncio.get_running_loop().create_future()
    future.set_result(error)
    return future


def answer_now(answer: Awaitable[ErrorCode]) -> ErrorCode | None:
    """The error code of an operation's ``answer`` if it is known already, else None."""
    return answer.result() if isinstance(answer, asyncio.Future) and answer.done() else None


def _write_error(error: ErrorCode) -> ErrorCode:
    """What a client sees when the coordinator's write failed (Kafka's
    ``TransactionStateManager.appendTransactionToLog``)."""
    if error in (E.UNKNOWN_TOPIC_OR_PARTITION, E.NOT_ENOUGH_REPLICAS, E.NOT_ENOUGH_REPLICAS_AFTER_APPEND,
                 E.REQUEST_TIMED_OUT):
        return E.COORDINATOR_NOT_AVAILABLE
    if error in (E.NOT_LEADER_OR_FOLLOWER, E.KAFKA_STORAGE_ERROR):
        return E.NOT_COORDINATOR
    if error in (E.MESSAGE_TOO_LARGE, E.RECORD_LIST_TOO_LARGE):
        return E.UNKNOWN_SERVER_ERROR
    return error
