"""The transactional producer's state machine (Kafka's ``TransactionManager``).

States and the calls that move between them (``State``)::

    UNINITIALIZED --init_transactions--> INITIALIZING --> READY
    READY --begin_transaction--> IN_TRANSACTION
    IN_TRANSACTION --commit_transaction--> COMMITTING --> READY
    IN_TRANSACTION --prepare_transaction--> PREPARED --commit/abort_transaction--> READY
    IN_TRANSACTION | PREPARED | ABORTABLE_ERROR --abort_transaction--> ABORTING --> READY
    any --a batch or request failed--> ABORTABLE_ERROR (abort_transaction, then go on)
    any --fenced (PRODUCER_FENCED, INVALID_PRODUCER_EPOCH), not authorized--> FATAL_ERROR

A call that times out leaves the state where it was (INITIALIZING, COMMITTING, ABORTING), and
the same call again resumes it, as the Java producer does.

Requests, all to the transactional id's coordinator (FindCoordinator key type 1,
``GroupCoordinatorClient`` with ``TRANSACTION_KEY``), except TxnOffsetCommit, which goes to the
group's coordinator:

- InitProducerId with the transactional id and ``transaction_timeout_ms``: the producer id and
  epoch the sender stamps on every batch (sequences restart at 0); after an abort that
  followed an UNKNOWN_PRODUCER_ID or OUT_OF_ORDER_SEQUENCE_NUMBER, InitProducerId with the
  current id and epoch bumps the epoch (KIP-360) instead of failing the producer.
- AddPartitionsToTxn before a partition's first batch of a transaction is sent: the producer
  calls ``maybe_add`` when a batch is opened for a partition not in the transaction yet, so
  the request travels while the batch lingers; the sender sends a partition's batches only
  once it is ``added``. Partitions that come while a request is out go in the next one.
  CONCURRENT_TRANSACTIONS (the previous transaction's markers are still being written) is
  retried after 0.1 ms, doubling. Exception (``rides_behind_add``): a broker with odradek's
  ``odradek.transaction.verification`` feature that is both the coordinator and the
  partition's leader gets the partition's batches right behind the AddPartitionsToTxn naming
  it, on the same connection, without waiting for the answer: it reads them in order and
  appends the batches only once the partition is added (KIP-890 verification). A batch
  refused meanwhile (the add failed or was retried) is retried like any other.
- AddOffsetsToTxn, then TxnOffsetCommit to the group coordinator (``send_offsets``).
- EndTxn once every batch of the transaction is acknowledged; not sent for a transaction that
  added neither partitions nor offsets (it does not exist at the coordinator).

Threads: everything here runs on the producer's loop. The synchronous producer's callers'
threads only read ``state`` (``check_send``) and ``added``.
"""

from __future__ import annotations

import asyncio
import enum
import logging

from odradek.client.coordinator import TRANSACTION_KEY, GroupCoordinatorClient
from odradek.client.errors import (
    BrokerError,
    KafkaError,
    KafkaTimeoutError,
    TransactionAbortedError,
    TransactionStateError,
)
from odradek.client.topic_partition import OffsetAndMetadata
from odradek.client.transactions import (
    CONCURRENT_RETRY_S,
    ConsumerGroupMetadata,
    TransactionHandle,
    send_end_txn,
    txn_request,
)
from odradek.protocol.features import TRANSACTION_VERIFICATION
from odradek.protocol.generated import ApiKey
from odradek.protocol.generated.add_offsets_to_txn_request import AddOffsetsToTxnRequest
from odradek.protocol.generated.add_partitions_to_txn_request import (
    AddPartitionsToTxnRequest,
    AddPartitionsToTxnTopic,
)
from odradek.protocol.generated.error_codes import ErrorCode
from odradek.protocol.generated.init_producer_id_request import InitProducerIdRequest
from odradek.protocol.generated.txn_offset_commit_request import (
    TxnOffsetCommitRequest,
    TxnOffsetCommitRequestPartition,
    TxnOffsetCommitRequestTopic,
)

_log = logging.getLogger("odradek.client.producer")

# Errors after which this producer may never write again (Java: fatal errors).
FATAL = frozenset({
    ErrorCode.PRODUCER_FENCED, ErrorCode.INVALID_PRODUCER_EPOCH, ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
    ErrorCode.INVALID_TXN_STATE, ErrorCode.CLUSTER_AUTHORIZATION_FAILED, ErrorCode.INVALID_TRANSACTION_TIMEOUT,
    ErrorCode.TRANSACTION_COORDINATOR_FENCED,
})
# Batch errors after which the epoch is bumped when the transaction is aborted (KIP-360).
BUMP = frozenset({ErrorCode.UNKNOWN_PRODUCER_ID, ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER,
                  ErrorCode.INVALID_PRODUCER_ID_MAPPING})
_BUMP_FROM = 3  # InitProducerId v3+ carries the current producer id and epoch


class State(enum.Enum):
    UNINITIALIZED = "Uninitialized"
    INITIALIZING = "Initializing"
    READY = "Ready"
    IN_TRANSACTION = "InTransaction"
    COMMITTING = "CommittingTransaction"
    ABORTING = "AbortingTransaction"
    PREPARED = "PreparedTransaction"
    ABORTABLE_ERROR = "AbortableError"
    FATAL_ERROR = "FatalError"


_SENDING = (State.IN_TRANSACTION, State.COMMITTING, State.PREPARED)  # partitions may still be added


class TransactionManager:
    def __init__(self, producer, transactional_id: str, transaction_timeout_ms: int, max_block: float,
                 delivery_timeout: float) -> None:
        self.producer = producer  # the AsyncProducer: its cluster, sender and flush
        self.cluster = producer.cluster
        self.sender = producer._sender
        self.transactional_id = transactional_id
        self.timeout_ms = transaction_timeout_ms
        self.max_block = max_block
        self.delivery_timeout = delivery_timeout
        self.coordinator = GroupCoordinatorClient(self.cluster, transactional_id, dedicated_connection=False,
                                                  key_type=TRANSACTION_KEY)
        self._groups: dict[str, GroupCoordinatorClient] = {}
        self.state = State.UNINITIALIZED
        self.error: BaseException | None = None
        self.added: set[tuple[str, int]] = set()  # partitions in the transaction
        self.new: set[tuple[str, int]] = set()  # for the next AddPartitionsToTxn
        self.pending: set[tuple[str, int]] = set()  # in the AddPartitionsToTxn out now
        self._pending_conn = None  # the connection that AddPartitionsToTxn was written on
        self.offsets_added = False
        self.bump_needed = False
        self._adder: asyncio.Task | None = None

    def __repr__(self) -> str:
        return f"TransactionManager({self.transactional_id!r}, {self.state.name})"

    @property
    def handle(self) -> TransactionHandle:
        return TransactionHandle(self.transactional_id, self.sender.producer_id, self.sender.producer_epoch)

    @property
    def started(self) -> bool:
        """Whether the coordinator knows of the transaction (a partition or offsets added)."""
        return bool(self.added) or self.offsets_added

    # --- checks --------------------------------------------------------------------------
    def check_send(self) -> None:
        """Raise TransactionStateError unless records may be sent now (any thread)."""
        state = self.state
        if state is not State.IN_TRANSACTION:
            raise self._state_error("send", state)

    def check_append(self) -> None:
        """Raise unless a record accepted by ``send`` may still open a batch: also while
        committing (a record held for its topic's metadata is placed during the flush)."""
        state = self.state
        if state is State.ABORTING:
            raise TransactionAbortedError("the transaction was aborted")
        if state is not State.IN_TRANSACTION and state is not State.COMMITTING:
            raise self._state_error("send", state)

    def _state_error(self, what: str, state: State) -> KafkaError:
        if state in (State.ABORTABLE_ERROR, State.FATAL_ERROR):
            need = "abort_transaction() first" if state is State.ABORTABLE_ERROR else "a new producer"
            return TransactionStateError(f"cannot {what}: the transaction failed ({self.error}); {need}")
        hints = {State.UNINITIALIZED: "call init_transactions() first",
                 State.READY: "call begin_transaction() first"}
        hint = hints.get(state, "wait for the transaction's end")
        return TransactionStateError(f"cannot {what} in state {state.value}: {hint}")

    def _require(self, what: str, *states: State) -> None:
        if self.state is State.FATAL_ERROR:
            raise self.error if isinstance(self.error, KafkaError) else self._state_error(what, self.state)
        if self.state not in states:
            raise self._state_error(what, self.state)

    def _deadline(self, timeout: float | None) -> float:
        return self.cluster.loop.time() + (self.max_block if timeout is None else timeout)

    # --- errors --------------------------------------------------------------------------
    def fail(self, error: BaseException) -> None:
        """Enter FATAL_ERROR (fenced, not authorized) or ABORTABLE_ERROR; unsent batches fail."""
        code = getattr(error, "code", None)
        if code in BUMP:
            self.bump_needed = True
        if self.state is State.FATAL_ERROR:
            return
        if code in FATAL:
            self.state, self.error = State.FATAL_ERROR, error
        elif self.state is State.ABORTING:
            return  # the abort goes on; its EndTxn discards what failed
        else:
            self.state, self.error = State.ABORTABLE_ERROR, error
        _log.info("transactional id %s: %s after %s", self.transactional_id, self.state.value, error)
        self.new.clear()
        self.sender.fail_unsent(error)

    def on_batch_failed(self, error: BaseException) -> None:
        """The sender failed a batch of the transaction: it cannot commit any more."""
        if not isinstance(error, TransactionAbortedError) and self.state is not State.ABORTING:
            self.fail(error)

    # --- init ----------------------------------------------------------------------------
    async def init(self, timeout: float | None = None) -> None:
        """InitProducerId for the transactional id: fences its earlier producers and has the
        coordinator abort (or finish committing) their open transaction."""
        self._require("init_transactions", State.UNINITIALIZED, State.INITIALIZING)
        self.state = State.INITIALIZING
        await self._within(self._init_producer_id(self._deadline(timeout), bump=False), timeout)
        self.state = State.READY

    async def _init_producer_id(self, deadline: float, bump: bool) -> None:
        sender = self.sender
        current = (sender.producer_id, sender.producer_epoch)

        def request(version: int) -> InitProducerIdRequest:
            pid, epoch = current if bump and version >= _BUMP_FROM else (-1, -1)
            return InitProducerIdRequest(transactional_id=self.transactional_id,
                                         transaction_timeout_ms=self.timeout_ms, producer_id=pid, producer_epoch=epoch)
        try:
            response = await txn_request(self.coordinator, ApiKey.INIT_PRODUCER_ID, request,
                                         lambda r: r.error_code, deadline)
        except BrokerError as e:
            if e.code in FATAL:
                self.state, self.error = State.FATAL_ERROR, e
            raise
        sender.set_producer(response.producer_id, response.producer_epoch)
        self.bump_needed = False
        _log.debug("transactional id %s: producer id %d epoch %d", self.transactional_id,
                   response.producer_id, response.producer_epoch)

    # --- begin and partitions ------------------------------------------------------------
    def begin(self) -> None:
        self._require("begin_transaction", State.READY)
        self.state = State.IN_TRANSACTION

    def maybe_add(self, topic: str, partition: int) -> None:
        """On the loop: make sure ``topic-partition`` gets into the transaction (a batch for
        it was opened, or waits to be sent)."""
        tp = (topic, partition)
        if tp in self.added or tp in self.pending or tp in self.new or self.state not in _SENDING:
            return
        self.new.add(tp)
        if self._adder is None or self._adder.done():
            self._adder = self.cluster.loop.create_task(self._add_partitions())

    def rides_behind_add(self, tp: tuple[str, int], conn) -> bool:
        """Whether a batch of ``tp`` may go on ``conn`` (its leader's connection) before the
        AddPartitionsToTxn adding ``tp`` is answered: that request was written on ``conn``,
        and the broker verifies transactions (see the module's docstring)."""
        return (conn is not None and conn is self._pending_conn and tp in self.pending
                and TRANSACTION_VERIFICATION in conn.features)

    async def _add_partitions(self) -> None:
        delay = CONCURRENT_RETRY_S
        while self.new and self.state in _SENDING:
            self.pending, self.new = self.new, set()
            try:
                code, failed = await self._send_add_partitions(self.pending)
            except Exception as e:  # noqa: BLE001 - the batches waiting for it must not wait for ever
                self.pending, self._pending_conn = set(), None
                self.fail(e if isinstance(e, KafkaError) else KafkaError(f"AddPartitionsToTxn failed: {e!r}"))
                return
            self._pending_conn = None
            if code == ErrorCode.NONE:
                self.added |= self.pending
                self.pending = set()
                delay = CONCURRENT_RETRY_S
                self.sender.wake()
                continue
            self.new |= self.pending
            self.pending = set()
            error = BrokerError(code, subject=f"{failed[0]}-{failed[1]}")
            if code == ErrorCode.CONCURRENT_TRANSACTIONS or (error.retriable and code != ErrorCode.OPERATION_NOT_ATTEMPTED):
                await asyncio.sleep(delay if code == ErrorCode.CONCURRENT_TRANSACTIONS else self.cluster.retry_backoff)
                delay = min(delay * 2, self.cluster.retry_backoff_max)
                continue
            self.fail(error)
            return

    async def _send_add_partitions(self, partitions) -> tuple[int, tuple]:
        """AddPartitionsToTxn for ``partitions``: ``(error code, a partition it names)``,
        the first error other than OPERATION_NOT_ATTEMPTED (NONE when all were added)."""
        by_topic: dict[str, list[int]] = {}
        for topic, partition in sorted(partitions):
            by_topic.setdefault(topic, []).append(partition)
        sender = self.sender
        request = AddPartitionsToTxnRequest(
            v3_and_below_transactional_id=self.transactional_id, v3_and_below_producer_id=sender.producer_id,
            v3_and_below_producer_epoch=sender.producer_epoch,
            v3_and_below_topics=[AddPartitionsToTxnTopic(t, ps) for t, ps in by_topic.items()])
        deadline = self.cluster.loop.time() + self.delivery_timeout

        def build(version: int) -> AddPartitionsToTxnRequest:
            # Called right before the request is written: batches may follow it on this connection.
            self._pending_conn = self.coordinator.current_connection
            self.sender.wake()
            return request
        response = await self.coordinator.send(ApiKey.ADD_PARTITIONS_TO_TXN, build, _first_add_error,
                                               deadline=deadline)
        found = (ErrorCode.NONE, ("", -1))
        for topic in response.results_by_topic_v3_and_below:
            for p in topic.results_by_partition:
                code = p.partition_error_code
                if code and (found[0] in (ErrorCode.NONE, ErrorCode.OPERATION_NOT_ATTEMPTED)):
                    found = (code, (topic.name, p.partition_index))
        return found

    async def _adds_done(self) -> None:
        while self._adder is not None and not self._adder.done():
            await asyncio.shield(self._adder)

    # --- offsets -------------------------------------------------------------------------
    async def send_offsets(self, offsets: dict, group, timeout: float | None = None) -> None:
        """Add the group's offsets to the transaction: committed when it commits."""
        self._require("send_offsets_to_transaction", State.IN_TRANSACTION)
        if not offsets:
            return  # as Java's producer: nothing to add
        await self._within(self._send_offsets(offsets, group_metadata(group), timeout), timeout)

    async def _send_offsets(self, offsets: dict, group: ConsumerGroupMetadata, timeout: float | None) -> None:
        deadline = self._deadline(timeout)
        sender = self.sender
        request = AddOffsetsToTxnRequest(transactional_id=self.transactional_id, producer_id=sender.producer_id,
                                         producer_epoch=sender.producer_epoch, group_id=group.group_id)
        try:
            await txn_request(self.coordinator, ApiKey.ADD_OFFSETS_TO_TXN, request, lambda r: r.error_code, deadline)
            self.offsets_added = True
            await self._txn_offset_commit(offsets, group, deadline)
        except BrokerError as e:
            self.fail(e)
            raise

    async def _txn_offset_commit(self, offsets: dict, group: ConsumerGroupMetadata, deadline: float) -> None:
        by_topic: dict[str, list[TxnOffsetCommitRequestPartition]] = {}
        for tp, value in offsets.items():
            meta = value if isinstance(value, OffsetAndMetadata) else OffsetAndMetadata(int(value))
            by_topic.setdefault(tp[0], []).append(TxnOffsetCommitRequestPartition(
                partition_index=tp[1], committed_offset=meta.offset, committed_leader_epoch=meta.leader_epoch,
                committed_metadata=meta.metadata))
        sender = self.sender
        request = TxnOffsetCommitRequest(
            transactional_id=self.transactional_id, group_id=group.group_id, producer_id=sender.producer_id,
            producer_epoch=sender.producer_epoch, generation_id=group.generation_id, member_id=group.member_id,
            group_instance_id=group.group_instance_id,
            topics=[TxnOffsetCommitRequestTopic(t, ps) for t, ps in by_topic.items()])
        coordinator = self._groups.get(group.group_id)
        if coordinator is None:
            coordinator = self._groups[group.group_id] = GroupCoordinatorClient(
                self.cluster, group.group_id, dedicated_connection=False)
        await txn_request(coordinator, ApiKey.TXN_OFFSET_COMMIT, request, _first_offset_error, deadline)

    # --- ending --------------------------------------------------------------------------
    async def prepare(self, timeout: float | None = None) -> TransactionHandle:
        """Flush the transaction and leave it open: PREPARED, its handle returned. A
        transaction that wrote nothing has no producer id in its handle (-1): there is
        nothing to end."""
        self._require("prepare_transaction", State.IN_TRANSACTION)
        await self._within(self._flush(), timeout)
        self._raise_if_failed()
        self.state = State.PREPARED
        if not self.started:
            return TransactionHandle(self.transactional_id, -1, -1)
        return self.handle

    async def commit(self, timeout: float | None = None) -> None:
        """Flush, then EndTxn(commit); raises the error that made the transaction fail."""
        self._require("commit_transaction", State.IN_TRANSACTION, State.PREPARED, State.COMMITTING)
        self.state = State.COMMITTING
        await self._within(self._commit(self._deadline(timeout)), timeout)

    async def _commit(self, deadline: float) -> None:
        await self._flush()
        self._raise_if_failed()
        if self.started:
            await self._end(True, deadline)
        self._completed()

    async def abort(self, timeout: float | None = None) -> None:
        """Fail what was not sent, wait for what was, then EndTxn(abort)."""
        self._require("abort_transaction", State.IN_TRANSACTION, State.PREPARED, State.ABORTABLE_ERROR,
                      State.ABORTING)
        self.state = State.ABORTING
        self.new.clear()
        self.sender.fail_unsent(TransactionAbortedError("the transaction was aborted"))
        await self._within(self._abort(self._deadline(timeout)), timeout)

    async def _abort(self, deadline: float) -> None:
        await self._flush()
        if self.started:
            await self._end(False, deadline)
        if self.bump_needed:
            await self._init_producer_id(deadline, bump=True)
        self._completed()

    async def abort_on_close(self, timeout: float | None) -> None:
        """The producer closes: abort a transaction still open (in transaction, failed or
        aborting), as Java's Sender does on a graceful close; a prepared one is left to
        whoever holds its handle. Failures are logged: the coordinator times it out."""
        if self.state not in (State.IN_TRANSACTION, State.ABORTABLE_ERROR, State.ABORTING):
            return
        _log.info("transactional id %s: aborting the open transaction at close", self.transactional_id)
        try:
            await self.abort(timeout)
        except KafkaError as e:
            _log.warning("transactional id %s: abort at close failed: %s", self.transactional_id, e)

    async def _flush(self) -> None:
        await self.producer.flush()
        await self._adds_done()

    async def _within(self, coroutine, timeout: float | None):
        """``await coroutine`` for at most ``timeout`` seconds (None: ``max_block_ms``); then
        KafkaTimeoutError, the state left as it was so that the same call resumes."""
        limit = self.max_block if timeout is None else timeout
        try:
            async with asyncio.timeout(limit):  # no task of its own, unlike wait_for
                return await coroutine
        except TimeoutError:
            raise KafkaTimeoutError(f"transactional id {self.transactional_id}: not done within {limit} s") from None

    def _raise_if_failed(self) -> None:
        if self.state in (State.ABORTABLE_ERROR, State.FATAL_ERROR):
            raise self.error

    async def _end(self, commit: bool, deadline: float) -> None:
        try:
            await send_end_txn(self.coordinator, self.handle, commit, deadline)
        except BrokerError as e:
            if e.code in FATAL:
                self.state, self.error = State.FATAL_ERROR, e
            elif not e.retriable:
                self.fail(e)
            raise

    def _completed(self) -> None:
        self.added.clear()
        self.new.clear()
        self.offsets_added = False
        self.error = None
        self.state = State.READY


def group_metadata(group) -> ConsumerGroupMetadata:
    """A ``ConsumerGroupMetadata`` from a group id, one already, or an object with the same
    attributes (a consumer's ``group_metadata()`` of another client)."""
    if isinstance(group, ConsumerGroupMetadata):
        return group
    if isinstance(group, str):
        return ConsumerGroupMetadata(group)
    return ConsumerGroupMetadata(group.group_id, getattr(group, "generation_id", -1),
                                 getattr(group, "member_id", ""), getattr(group, "group_instance_id", None))


def _first_add_error(response) -> int:
    for topic in response.results_by_topic_v3_and_below:
        for p in topic.results_by_partition:
            if p.partition_error_code:
                return p.partition_error_code
    return response.error_code


def _first_offset_error(response) -> int:
    for topic in response.topics:
        for p in topic.partitions:
            if p.error_code:
                return p.error_code
    return 0


__all__ = ["KafkaTimeoutError", "State", "TransactionManager", "group_metadata"]
