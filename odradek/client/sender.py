"""The producer's sender: a task that drains ready batches into Produce requests.

Each pass over the partitions with batches (``RecordAccumulator.active``) takes at most one
batch per partition whose leader is connected and has fewer than ``max_in_flight`` requests
outstanding; a batch is ready when it is sealed (full), when ``linger`` has passed since its
first record, or at once during a flush, a close, or while ``send`` waits for memory. Batches
for the same leader go into one request (split at ``max_request_size``). Passes repeat until
nothing more can go, then the task sleeps until the next linger deadline or until woken
(a new or full batch, a response, a connection or metadata refresh).

Answers, per partition: success completes the batch's futures; a retriable error (leader
moved, connection lost, timeout, not enough replicas) puts the batch back in its queue, ahead
of the batches filled after it, to be resent after a backoff, while ``retries`` and
``delivery_timeout`` allow (a batch that runs out of time fails with a KafkaTimeoutError
naming the last attempt's error); anything else fails its futures. When the error says the leader
may have moved (NOT_LEADER_OR_FOLLOWER, a lost connection, ...), the resend also waits for a
metadata refresh, so it goes to the new leader rather than the old one again. The client's
own wait for an answer is ``request_timeout``, the same value the request carries to the
broker, as in the Java producer.

Idempotence (``enable_idempotence``): the sender first gets a producer id and epoch
(InitProducerId) and stamps each batch, when first sent, with the partition's next sequence
number. At most 5 batches per partition are in flight. When one must be retried, the later
in-flight ones will come back OUT_OF_ORDER_SEQUENCE_NUMBER (the broker refuses the gap): they
are requeued by sequence behind it, and a partition whose head is a retry sends one batch at
a time until the retries are through, so the log receives them in order and exactly once
(a resent batch that had been appended is recognised by the broker as a duplicate and answered
with its original offset). A sequence error with no earlier batch outstanding or an unknown
producer id fail that batch, and the producer bumps its own epoch (KIP-360, as the Java
producer: a broker takes a higher epoch from sequence 0); at epoch 32767, a fenced epoch or an
unknown id mapping, it gets a new producer id instead.

A partition's batches in flight all go to one broker: when its leader moves, the next batch
waits until those sent to the old leader are answered. A new leader with no state for the
producer id would take a later sequence as its first and refuse the earlier ones' retries.

A batch once sent keeps its producer id, epoch and sequence for every retry, whatever
happened to the producer id meanwhile: an answer such as a timeout, a lost connection or
NOT_LEADER_OR_FOLLOWER does not say whether it was appended (an acks=all produce is appended
before it waits for the replicas, and a follower that becomes leader has the batches it
copied), and only the same stamp lets the leader recognise it. So each partition
(``PartitionQueue``) moves to a new identity, its sequences from 0, only once none of its
batches stamped with the old one is outstanding (Kafka's
``TransactionManager.maybeUpdateProducerIdAndEpoch``); until then its new batches wait. The
one exception: the batches of a partition behind the sequence its leader refused (a refusal
by the producer state, taken before anything is appended: none of them is in the log, nor
will be under that identity) are stamped anew when they go again (Kafka rewrites the
sequences of the partition that needed the epoch bump).

Transactions (``txn``, a ``TransactionManager``): the producer id comes from
``init_transactions``, never from the sender; a partition's batches go only once the
partition is in the transaction (``txn.added``; the sender asks for it with ``maybe_add``)
or right behind the request adding it to a broker that verifies (``txn.rides_behind_add``),
carry the transactional bit, and Produce requests name the transactional id. A batch that
fails puts the transaction in an error state (``txn.on_batch_failed``) instead of restarting
sequences under a new producer id.
"""

from __future__ import annotations

import asyncio
import logging
from functools import partial

from odradek.client.cluster import ClusterClient, stale_metadata
from odradek.client.errors import (
    BrokerError,
    ClientClosedError,
    KafkaConnectionError,
    KafkaError,
    KafkaTimeoutError,
    UnsupportedVersionError,
)
from odradek.client.producer_batch import ProducerBatch
from odradek.client.record_accumulator import (
    SEQUENCE_MODULUS,
    PartitionQueue,
    RecordAccumulator,
)
from odradek.protocol.generated import ApiKey
from odradek.protocol.generated.error_codes import ErrorCode
from odradek.protocol.generated.init_producer_id_request import InitProducerIdRequest
from odradek.protocol.generated.produce_request import (
    PartitionProduceData,
    ProduceRequest,
    TopicProduceData,
)

_log = logging.getLogger("odradek.client.producer")

MAX_IN_FLIGHT_IDEMPOTENT = 5
MAX_PRODUCER_EPOCH = 32767  # an int16
_BUMP_EPOCH = frozenset({ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER, ErrorCode.UNKNOWN_PRODUCER_ID})
_RESET_PRODUCER = frozenset({
    ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER, ErrorCode.UNKNOWN_PRODUCER_ID,
    ErrorCode.INVALID_PRODUCER_EPOCH, ErrorCode.INVALID_PRODUCER_ID_MAPPING,
})


class Sender:
    def __init__(self, cluster: ClusterClient, accumulator: RecordAccumulator, *, acks: int,
                 request_timeout: float, max_in_flight: int, retries: int, delivery_timeout: float,
                 compression: int, compression_level: int | None, max_request_size: int,
                 idempotence: bool | None) -> None:
        self.cluster = cluster
        self.acc = accumulator
        self.acks = acks
        self.request_timeout = request_timeout
        self.max_in_flight = max_in_flight
        self.retries = retries
        self.delivery_timeout = delivery_timeout
        self.compression = compression
        self.compression_level = compression_level
        self.max_request_size = max_request_size
        # None: on if the broker can (InitProducerId), as Kafka's default with acks=all.
        self.idempotence = idempotence
        self.producer_id = -1
        self.producer_epoch = -1
        self.txn = None  # the TransactionManager of a transactional producer
        self.closing = False
        self.closing_hard = False  # a close ran out of time: retry nothing
        self._in_flight: dict[int, int] = {}
        self._wake: asyncio.Future | None = None
        self._sleep_until = float("inf")  # when a sleeping sender's timer wakes it
        self._pending_wake = False

    @property
    def idempotent(self) -> bool:
        return bool(self.idempotence)

    def wake(self) -> None:
        wake = self._wake
        if wake is not None and not wake.done():
            wake.set_result(None)
        else:
            self._pending_wake = True

    def wake_by(self, deadline: float) -> None:
        """Make sure the sender looks again by ``deadline`` (loop time): a new batch's linger
        end. Costs nothing when it sleeps until then anyway."""
        if self._wake is None or self._sleep_until > deadline:
            self.wake()

    async def run(self) -> None:
        loop = asyncio.get_running_loop()
        self.cluster.metadata_listeners.append(lambda _: self.wake())
        while True:
            if self.idempotence is not False and self.producer_id < 0 and self.acc.incomplete and self.txn is None:
                try:
                    await self._init_producer_id()
                except KafkaError as e:
                    _log.warning("cannot get a producer id: %s", e)
                    self.abort_all(e, hard=False)
            now = loop.time()
            self.cluster.maybe_update()
            for batch in self.acc.expired(now, self.delivery_timeout):
                self._fail(batch, _expired(batch))
            delay = self._send_ready(now)
            if self.closing and not self.acc.incomplete:
                return
            stale_in = self.cluster.stale_in(now)
            if stale_in is not None and (delay is None or stale_in < delay):
                # an idle producer refreshes its metadata too (metadata.max.age.ms, as Kafka's
                # sender does through NetworkClient.poll), so its next send finds the leaders
                delay = stale_in + 0.01  # just past it: maybe_update wants older than the age
            if self._pending_wake:
                self._pending_wake = False
                await asyncio.sleep(0)
                continue
            self._wake = wake = loop.create_future()
            timer = loop.call_later(delay, self.wake) if delay is not None else None
            self._sleep_until = now + delay if delay is not None else float("inf")
            try:
                await wake
            finally:
                self._wake = None
                if timer is not None:
                    timer.cancel()

    # --- sending -------------------------------------------------------------------------
    def _send_ready(self, now: float) -> float | None:
        """Send every batch that can go; return seconds until one may become ready."""
        next_delay = None
        while True:
            by_node, delay = self._collect(now)
            if delay is not None and (next_delay is None or delay < next_delay):
                next_delay = delay
            if not by_node:
                return next_delay
            for node, batches in by_node.items():
                self._send_request(node, batches)

    def _collect(self, now: float):
        """``({leader: [batch, ...]}, seconds until the next may be ready)``: the batches
        taken off their queues (under the accumulator's lock), stamped and sealed (not)."""
        acc = self.acc
        with acc.lock:
            taken, next_delay, need_update = self._pick(now)
        if need_update:
            self.cluster.request_update()
        by_node: dict[int, list[ProducerBatch]] = {}
        for leader, queue, batch in taken:
            by_node.setdefault(leader, []).append(self._take(queue, batch))
        return by_node, next_delay

    def _pick(self, now: float):
        """Holding the lock: take the head of every queue whose batch may go now."""
        acc, meta, cluster = self.acc, self.cluster.metadata, self.cluster
        force = self.closing or acc.short_of_space
        txn = self.txn
        taken: list[tuple[int, PartitionQueue, ProducerBatch]] = []
        next_delay = None
        need_update = False
        for queue in list(acc.active):
            batch = queue.head()
            if batch is None:
                acc.active.discard(queue)
                continue
            if batch.awaits_metadata >= 0:
                # Sent to a leader that was not: wait for newer metadata (the refresh wakes
                # us), but not forever if refreshes keep failing.
                give_up = batch.retry_at + cluster.retry_backoff_max
                if cluster.metadata_version > batch.awaits_metadata or now >= give_up:
                    batch.awaits_metadata = -1
                else:
                    next_delay = give_up - now if next_delay is None else min(next_delay, give_up - now)
                    continue
            wait = batch.retry_at - now
            if batch is queue.open and not force:
                wait = max(wait, batch.created + acc.linger - now)
            if wait > 0:
                next_delay = wait if next_delay is None else min(next_delay, wait)
                continue
            if self.idempotent and queue.in_flight and (
                    batch.attempts > 0 or len(queue.in_flight) >= MAX_IN_FLIGHT_IDEMPOTENT
                    or not queue.stamps_as(self.producer_id, self.producer_epoch)):
                # (a new identity: batches stamped with the old one are still in flight)
                continue
            leader = meta.leader(queue.topic, queue.partition)
            rides = False
            if txn is not None and (queue.topic, queue.partition) not in txn.added:
                rides = leader is not None and txn.rides_behind_add((queue.topic, queue.partition),
                                                                    cluster.connection_nowait(leader))
                if not rides:
                    txn.maybe_add(queue.topic, queue.partition)  # its writing and its answer wake us
                    continue
            if leader is None:
                need_update = True
                continue
            if self.idempotent and queue.in_flight and queue.in_flight[0].node != leader:
                # the leader moved with batches in flight to the old one (module docstring)
                continue
            if self._in_flight.get(leader, 0) >= self.max_in_flight:
                continue
            if cluster.connection_nowait(leader) is None:
                waiting = cluster.connecting(leader)
                if waiting is not None:
                    cluster.after_connect(waiting, self.wake)
                continue
            batch = queue.take_head()
            batch.rode_behind_add = rides
            batch.node = leader
            taken.append((leader, queue, batch))
        return taken, next_delay, need_update

    def _take(self, queue: PartitionQueue, batch: ProducerBatch) -> ProducerBatch:
        """A batch just taken off ``queue`` (now the loop's alone): stamped and sealed."""
        if self.idempotent and batch.base_sequence < 0:
            if not queue.stamps_as(self.producer_id, self.producer_epoch):
                queue.adopt(self.producer_id, self.producer_epoch)  # nothing older outstanding (_pick)
            batch.producer_id, batch.producer_epoch = self.producer_id, self.producer_epoch
            batch.base_sequence = queue.next_sequence
            queue.next_sequence = (queue.next_sequence + batch.count) % SEQUENCE_MODULUS
            batch.transactional = self.txn is not None
            if batch.data is not None:
                batch.restamp(self.producer_id, self.producer_epoch, batch.base_sequence)
        batch.seal(self.compression, self.compression_level)
        batch.attempts += 1
        if self.idempotent:
            queue.in_flight.append(batch)
            queue.in_flight.sort(key=lambda b: b.base_sequence)
        return batch

    def _send_request(self, node: int, batches: list[ProducerBatch]) -> None:
        """One Produce request per ``max_request_size`` worth of batches."""
        group: list[ProducerBatch] = []
        size = 0
        for batch in batches:
            if group and size + len(batch.data) > self.max_request_size:
                self._send_group(node, group)
                group, size = [], 0
            group.append(batch)
            size += len(batch.data)
        if group:
            self._send_group(node, group)

    def _send_group(self, node: int, batches: list[ProducerBatch]) -> None:
        topics: dict[str, list[PartitionProduceData]] = {}
        for batch in batches:
            topics.setdefault(batch.topic, []).append(PartitionProduceData(batch.partition, batch.data))
        request = ProduceRequest(
            transactional_id=None if self.txn is None else self.txn.transactional_id, acks=self.acks, timeout_ms=int(self.request_timeout * 1000),
            topic_data=[TopicProduceData(name, parts) for name, parts in topics.items()],
        )
        conn = self.cluster.connection_nowait(node)
        future = conn.send(ApiKey.PRODUCE, request, expect_response=self.acks != 0,
                           timeout=self.request_timeout)
        self._in_flight[node] = self._in_flight.get(node, 0) + 1
        future.add_done_callback(partial(self._on_response, node, batches))

    # --- answers -------------------------------------------------------------------------
    def _on_response(self, node: int, batches: list[ProducerBatch], future: asyncio.Future) -> None:
        self._in_flight[node] -= 1
        now = self.cluster.loop.time()
        error = ClientClosedError("producer closed") if future.cancelled() else future.exception()
        if error is not None:
            for batch in batches:
                self._retry_or_fail(batch, error, now)
        elif self.acks == 0:
            for batch in batches:
                self._complete(batch, -1, -1)
        else:
            self._handle(future.result(), batches, now)
        self.wake()

    def _handle(self, response, batches: list[ProducerBatch], now: float) -> None:
        by_partition = {(b.topic, b.partition): b for b in batches}
        for topic in response.responses:
            for p in topic.partition_responses:
                batch = by_partition.pop((topic.name, p.index), None)
                if batch is None:
                    continue
                code = p.error_code
                if code == ErrorCode.NONE or code == ErrorCode.DUPLICATE_SEQUENCE_NUMBER:
                    self._complete(batch, p.base_offset, p.log_append_time_ms)
                else:
                    error = BrokerError(code, p.error_message, f"{topic.name}-{p.index}")
                    self._retry_or_fail(batch, error, now)
        for batch in by_partition.values():
            self._retry_or_fail(batch, KafkaConnectionError("broker did not answer for the partition"), now)

    def _queue(self, batch: ProducerBatch) -> PartitionQueue:
        return self.acc.topics[batch.topic].queues[batch.partition]

    def _complete(self, batch: ProducerBatch, base_offset: int, log_append_time: int) -> None:
        if self.idempotent:
            _remove(self._queue(batch).in_flight, batch)
        batch.complete(base_offset, log_append_time)
        self.acc.release(batch)

    def _fail(self, batch: ProducerBatch, error: BaseException) -> None:
        if self.idempotent:
            _remove(self._queue(batch).in_flight, batch)
        batch.fail(error)
        self.acc.release(batch)
        if self.txn is not None:
            if batch.base_sequence >= 0:
                self.txn.bump_needed = True  # its sequence numbers are a gap now
            self.txn.on_batch_failed(error)

    def _retry_or_fail(self, batch: ProducerBatch, error: BaseException, now: float) -> None:
        queue = self._queue(batch)
        if self.idempotent:
            _remove(queue.in_flight, batch)
        code = getattr(error, "code", None)
        retriable = isinstance(error, KafkaError) and error.retriable
        if self.idempotent and code == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER:
            # Expected while an earlier batch of the partition is being retried.
            with self.acc.lock:
                retriable = queue.earlier_outstanding(batch)
        if self.idempotent and queue.behind_refusal(batch):
            # Not appended (its leader refused an earlier sequence of its identity): it goes
            # again as a batch never sent, under the partition's next identity.
            batch.base_sequence = -1
            retriable = retriable or code in _RESET_PRODUCER
        waits_for_add = self.txn is not None and (batch.topic, batch.partition) not in self.txn.added
        if code == ErrorCode.INVALID_TXN_STATE and batch.rode_behind_add:
            # Sent behind the AddPartitionsToTxn of its partition (``rides_behind_add``), it
            # found the partition not added yet: it goes again once the add is answered.
            retriable = True
        if (retriable and not self.closing_hard and batch.attempts <= self.retries
                and now - batch.created < self.delivery_timeout):
            # One waiting for its partition's add needs no backoff: the add's answer releases it.
            batch.retry_at = now if waits_for_add else now + self.cluster.backoff(batch.attempts - 1)
            batch.last_error = error
            with self.acc.lock:
                queue.requeue(batch)
                self.acc.active.add(queue)
            if stale_metadata(error):
                batch.awaits_metadata = self.cluster.metadata_version
                self.cluster.request_update()
            return
        if self.txn is not None:
            self._fail(batch, error)
            return
        if self.idempotent and code in _RESET_PRODUCER and batch.base_sequence >= 0:
            self._refused(queue, batch, code)
        batch.fail(error)
        self.acc.release(batch)

    # --- idempotence ---------------------------------------------------------------------
    async def _init_producer_id(self) -> None:
        request = InitProducerIdRequest(transactional_id=None, transaction_timeout_ms=60_000,
                                        producer_id=-1, producer_epoch=-1)

        async def attempt():
            response = await self.cluster.send(None, ApiKey.INIT_PRODUCER_ID, request)
            if response.error_code:
                raise BrokerError(response.error_code, subject="InitProducerId")
            return response

        try:
            response = await self.cluster.retry(attempt, self.cluster.loop.time() + self.delivery_timeout)
        except UnsupportedVersionError:
            if self.idempotence:
                raise
            self.idempotence = False  # auto mode against a broker without idempotence
            return
        self.idempotence = True
        self.producer_id, self.producer_epoch = response.producer_id, response.producer_epoch
        _log.debug("producer id %d epoch %d", self.producer_id, self.producer_epoch)

    def set_producer(self, producer_id: int, producer_epoch: int) -> None:
        """A producer id and epoch from InitProducerId: each partition's sequences restart
        at 0 under them (``PartitionQueue.adopt``, once its older batches are resolved)."""
        self.producer_id, self.producer_epoch = producer_id, producer_epoch
        self.idempotence = True

    def _refused(self, queue: PartitionQueue, batch: ProducerBatch, code: int) -> None:
        """The leader's producer state refused ``batch`` with ``code`` (failed by the caller):
        its partition gets no more batches under their identity, and the producer a new one
        (the module docstring says which) unless it has one already. Nothing is appended from
        the refused sequence on: the partition's batches behind it are stamped anew once their
        answer comes (``PartitionQueue.behind_refusal``); an earlier one keeps its stamp."""
        if (batch.producer_id, batch.producer_epoch) == (self.producer_id, self.producer_epoch):
            if code in _BUMP_EPOCH and self.producer_epoch < MAX_PRODUCER_EPOCH:
                self.producer_epoch += 1
            else:
                self.producer_id = -1  # the run loop gets a new one before sending again
        if queue.refused_from is None or batch.base_sequence < queue.refused_from:
            queue.refused_from = batch.base_sequence

    # --- closing -------------------------------------------------------------------------
    def abort_all(self, error: BaseException, hard: bool = True) -> None:
        """Fail every batch not yet completed (a close that ran out of time, or no producer
        id to be had)."""
        self.closing_hard = hard
        acc = self.acc
        with acc.lock:  # empty the queues at once, then fail their batches (user code) without it
            batches = list(acc.incomplete)
            for queue in acc.active:
                queue.sealed.clear()
                queue.open = None
                queue.in_flight.clear()
            acc.active.clear()
        for batch in batches:
            batch.fail(error)
            acc.release(batch)


    def fail_unsent(self, error: BaseException) -> None:
        """Fail every batch not sent yet (an aborted or failed transaction); batches in
        flight complete as the broker answers."""
        acc = self.acc
        with acc.lock:
            batches = []
            for queue in acc.active:
                batches.extend(queue.sealed)
                queue.sealed.clear()
                if queue.open is not None:
                    batches.append(queue.open)
                    queue.open = None
        for batch in batches:
            if batch.base_sequence >= 0 and self.txn is not None:
                self.txn.bump_needed = True
            batch.fail(error)
            acc.release(batch)
        self.wake()


def _remove(batches: list, batch) -> None:
    try:
        batches.remove(batch)
    except ValueError:
        pass


def _expired(batch: ProducerBatch) -> KafkaTimeoutError:
    """The error of a batch ``delivery_timeout`` expired: it names the last attempt's error
    (NOT_ENOUGH_REPLICAS, ...), also its ``__cause__``, when the batch was being retried."""
    why = batch.last_error
    error = KafkaTimeoutError(f"{batch!r} expired: not delivered within delivery_timeout_ms"
                              + (f"; the last attempt failed: {why}" if why is not None else ""))
    error.__cause__ = why
    return error
