"""The asyncio producer: ``send`` puts a record into a batch and returns a future of where it
landed; a background sender ships the batches.

    async with AsyncProducer("127.0.0.1:9092", linger_ms=5) as producer:
        future = producer.send("events", b"value", key=b"user-1")
        metadata = await future          # RecordMetadata(topic, partition, offset, timestamp)
        await producer.flush()

``send`` never blocks and does no I/O: it serializes, picks the partition (see
``partitioner``: murmur2 of the key like Java's default partitioner, sticky for unkeyed
records, or a custom callable), and appends the record to its partition's open batch
(``record_accumulator``, ``producer_batch``). It raises ``BufferFullError`` when
``buffer_memory`` bytes are waiting already (``await wait_for_buffer()`` then), and
``ClientClosedError`` after ``close``. A record for a topic whose metadata is not known yet is
held until it is (auto-creating the topic when the broker allows), or failed with a timeout
after ``max_block_ms``.

Configuration follows the Java producer's names and defaults (``acks="all"``,
``linger_ms=5``, ``batch_size=16384``, ``max_request_size=1048576``,
``buffer_memory=33554432``, ``delivery_timeout_ms=120000``, ...). ``enable_idempotence``
defaults to on when ``acks="all"`` (as in Kafka 3+) and quietly off against a broker without
InitProducerId; asking for it explicitly with other acks is an error.

Transactions (``transactional_id``, ``transaction_timeout_ms=60000``; see
``transaction_manager``): ``await init_transactions()`` once, then per transaction
``begin_transaction()``, sends, optionally ``await send_offsets_to_transaction(offsets,
group)``, and ``await commit_transaction()`` or ``await abort_transaction()``;
``await prepare_transaction()`` flushes and returns a ``TransactionHandle`` for another
process to end (``transactions.end_transaction``). ``send`` outside a transaction raises
TransactionStateError. A transactional producer is idempotent (acks="all").

Delivery callbacks: ``send(..., callback=f)`` calls ``f(metadata, None)`` or
``f(None, exception)`` on the event loop when the record completes.

The future ``send`` returns is a ``RecordFuture`` (see ``record_future``): an asyncio future
by behaviour, but only a ``(batch result, index)`` pair, so a record costs one small tuple and
a batch is settled at once.

Threads: ``send`` belongs to the loop's thread. The synchronous ``Producer`` instead appends
from its callers' threads under the accumulator's lock (see ``record_accumulator``) through
``_choose`` (no lock, may run user code), ``_append`` and ``_park`` (lock held, no user code;
the first two are in ``producer_append``, mixed in), and routes what must run on the loop
through ``_soon`` (here: call now, on the loop).
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Self

from odradek.client.client_security import connection_settings
from odradek.client.cluster import ClusterClient
from odradek.client.errors import (
    BufferFullError,
    ClientClosedError,
    KafkaError,
    KafkaTimeoutError,
)
from odradek.client.partitioner import murmur2
from odradek.client.producer_append import ProducerAppend, _Refused, fail_record
from odradek.client.producer_batch import RecordMetadata
from odradek.client.record_accumulator import RecordAccumulator, TopicState
from odradek.client.record_future import RecordFuture
from odradek.client.producer_config import ACKS as _ACKS
from odradek.client.producer_config import COMPRESSION_TYPES
from odradek.client.producer_config import idempotence as _idempotence
from odradek.client.record_headers import normalize_headers
from odradek.client.sender import Sender
from odradek.client.transaction_manager import TransactionManager
from odradek.client.transactional_producer import TransactionalProducer

__all__ = ["COMPRESSION_TYPES", "AsyncProducer", "RecordMetadata", "normalize_headers"]

_log = logging.getLogger("odradek.client.producer")
_PARKED_OVERHEAD = 70  # what a held record is counted beyond its key and value
_time_ns = time.time_ns


class AsyncProducer(ProducerAppend, TransactionalProducer):
    def __init__(
        self,
        bootstrap_servers,
        *,
        client_id: str = "odradek-producer",
        acks="all",
        compression_type: str | None = "none",
        compression_level: int | None = None,
        linger_ms: float = 5,
        batch_size: int = 16384,
        max_request_size: int = 1048576,
        buffer_memory: int = 33554432,
        enable_idempotence: bool | None = None,
        retries: int = 2147483647,
        delivery_timeout_ms: int = 120_000,
        request_timeout_ms: int = 30_000,
        max_in_flight_requests_per_connection: int = 5,
        retry_backoff_ms: int = 100,
        retry_backoff_max_ms: int = 1000,
        metadata_max_age_ms: int = 300_000,
        max_block_ms: int = 60_000,
        key_serializer=None,
        value_serializer=None,
        partitioner=None,
        allow_auto_create_topics: bool = True,
        transactional_id: str | None = None,
        transaction_timeout_ms: int = 60_000,
        security=None,  # security.protocol, ssl.*, sasl.* (client/client_security.py)
    ) -> None:
        if transactional_id is not None and enable_idempotence is False:
            raise ValueError("a transactional producer is idempotent: leave enable_idempotence on")
        if acks not in _ACKS:
            raise ValueError(f"acks must be 'all', -1, 0 or 1, not {acks!r}")
        self.acks = _ACKS[acks]
        if (compression_type or "none") not in COMPRESSION_TYPES:
            raise ValueError(f"compression_type must be one of {sorted(COMPRESSION_TYPES)}")
        if batch_size <= 0 or max_request_size <= 0 or buffer_memory <= 0:
            raise ValueError("batch_size, max_request_size and buffer_memory must be positive")
        enable_idempotence = _idempotence(True if transactional_id is not None else enable_idempotence,
                                          self.acks, retries, max_in_flight_requests_per_connection)
        self._cluster = ClusterClient(
            bootstrap_servers, client_id=client_id, request_timeout_ms=request_timeout_ms,
            retry_backoff_ms=retry_backoff_ms, retry_backoff_max_ms=retry_backoff_max_ms,
            metadata_max_age_ms=metadata_max_age_ms, allow_auto_create_topics=allow_auto_create_topics,
            **connection_settings(security),
        )
        self._acc = RecordAccumulator(batch_size, linger_ms / 1000, buffer_memory)
        self._topics = self._acc.topics
        self._sender = Sender(
            self._cluster, self._acc, acks=self.acks, request_timeout=request_timeout_ms / 1000,
            max_in_flight=max_in_flight_requests_per_connection, retries=retries,
            delivery_timeout=delivery_timeout_ms / 1000,
            compression=COMPRESSION_TYPES[compression_type or "none"],
            compression_level=compression_level, max_request_size=max_request_size,
            idempotence=enable_idempotence,
        )
        self._max_request_size = max_request_size
        self._max_block = max_block_ms / 1000
        self._key_serializer = key_serializer
        self._value_serializer = value_serializer
        self._partitioner = partitioner
        # No serializers or partitioner to call: ``send`` may take its short path.
        self._plain = key_serializer is None and value_serializer is None and partitioner is None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._now = time.monotonic  # a new batch's creation time: the loop's clock once started
        self._task: asyncio.Task | None = None
        self._closed = False
        self._txn = None if transactional_id is None else TransactionManager(
            self, transactional_id, transaction_timeout_ms, self._max_block, delivery_timeout_ms / 1000)
        self._sender.txn = self._txn

    @property
    def cluster(self) -> ClusterClient:
        return self._cluster

    @property
    def buffered_bytes(self) -> int:
        return self._acc.buffered

    @property
    def buffer_memory(self) -> int:
        return self._acc.buffer_memory

    async def start(self) -> Self:
        """Connect to the cluster and start the sender."""
        self._loop = asyncio.get_running_loop()
        self._now = self._loop.time
        await self._cluster.start()
        self._cluster.metadata_listeners.append(self._on_metadata)
        self._task = self._loop.create_task(self._sender.run())
        self._task.add_done_callback(self._sender_ended)
        return self

    async def __aenter__(self) -> Self:
        return await self.start()

    async def __aexit__(self, *exc) -> None:
        await self.close()

    # --- sending -------------------------------------------------------------------------
    def send(self, topic: str, value=None, key=None, headers=None, partition: int | None = None,
             timestamp: int | None = None, *, callback=None, future=None) -> RecordFuture:
        """Queue one record; return a future of its ``RecordMetadata`` (a ``RecordFuture``,
        which behaves as an asyncio future).

        ``timestamp`` is milliseconds since the epoch (now when None). ``headers`` is a dict
        or ``(str, bytes)`` pairs. ``future``: also settle this future-like object (any with
        ``set_result``/``set_exception``/``done``, e.g. a ``concurrent.futures.Future``) and
        return it instead. Raises BufferFullError, ClientClosedError, or TypeError /
        ValueError for a record that cannot be serialized.
        """
        # The common case in a few lines: plain record, known topic, an open batch with room.
        # (Memory is reserved per batch, so appending to an open batch needs no check.)
        if self._plain and headers is None and partition is None and callback is None and future is None:
            state = self._topics.get(topic)
            if state is not None:
                if key is None:
                    queue = state.sticky_queue
                    batch = None if queue is None else queue.open
                elif state.num_partitions:
                    batch = state.queues[(murmur2(key) & 0x7FFFFFFF) % state.num_partitions].open
                else:
                    batch = None
                if batch is not None:
                    record = batch.append(timestamp, key, value)
                    if record is not None:
                        return record
        return self.enqueue(topic, value, key, headers, partition, timestamp, callback, future, True)

    async def send_and_wait(self, topic: str, value=None, key=None, headers=None,
                            partition: int | None = None, timestamp: int | None = None) -> RecordMetadata:
        """Send one record (waiting for buffer space if needed) and wait for its metadata."""
        while True:
            try:
                future = self.send(topic, value, key, headers, partition, timestamp)
                break
            except BufferFullError:
                await self.wait_for_buffer()
        return await future

    def serialize(self, key, value, headers):
        """Apply the serializers (None keys and values stay None) and normalize headers."""
        if key is not None and self._key_serializer is not None:
            key = self._key_serializer(key)
        if value is not None and self._value_serializer is not None:
            value = self._value_serializer(value)
        return key, value, normalize_headers(headers) if headers else None

    def enqueue(self, topic, value, key, headers, partition, timestamp, callback, future,
                check_space: bool, serialized: bool = False):
        """What ``send`` does, returning the record's future (``future`` itself when given:
        any future-like object to settle); ``check_space=False`` skips the memory limit."""
        if self._closed:
            raise ClientClosedError("producer is closed")
        if self._loop is None:
            raise RuntimeError("AsyncProducer.start() was not awaited (or use 'async with')")
        if self._txn is not None:
            self._txn.check_send()
        if not serialized and (headers or self._key_serializer or self._value_serializer):
            key, value, headers = self.serialize(key, value, headers)
        if timestamp is None:
            timestamp = _time_ns() // 1_000_000
        acc = self._acc
        if check_space and acc.buffered >= acc.buffer_memory:
            raise BufferFullError(f"{acc.buffered} bytes buffered (buffer_memory {acc.buffer_memory})")
        state = acc.topics.get(topic)
        # Held records go first: a record waits while earlier ones for its topic still do.
        if state is None or not state.num_partitions or state.ready is not None:
            if future is None:
                future = RecordFuture.standalone(topic, timestamp, self._loop)
                target = future[0]
            else:
                target = future
            self._park(topic, (value, key, headers, partition, timestamp, callback, target))
            return future
        return self._place(state, value, key, headers, partition, timestamp, callback, future)

    @staticmethod
    def _soon(fn, *args) -> None:
        """Run ``fn(*args)`` on the loop: here, at once (the sync producer puts its own)."""
        fn(*args)

    # --- metadata ------------------------------------------------------------------------
    def _park(self, topic: str, args: tuple) -> None:
        """Hold a record until its topic's metadata is known (under the lock when threaded):
        ``args`` are ``(value, key, headers, partition, timestamp, callback, target)``."""
        state = self._acc.topic(topic)
        state.waiting.append(args)
        # Held records count against the buffer too, until they are placed in batches.
        self._acc.buffered += _PARKED_OVERHEAD + len(args[0] or b"") + len(args[1] or b"")
        if state.ready is None:
            # While ``ready`` is set, every new record of the topic is held behind these.
            state.ready = self._loop.create_future()
            self._soon(self._start_waiting, state)

    def _start_waiting(self, state: TopicState) -> None:
        self._loop.create_task(self._await_topic(state, state.ready))

    async def _await_topic(self, state: TopicState, ready: asyncio.Future) -> None:
        cluster = self._cluster
        cluster.add_topics([state.name])
        try:
            await cluster.wait_for_topics([state.name], self._loop.time() + self._max_block)
            self._on_metadata(cluster.metadata)
        except (KafkaError, OSError) as e:
            if isinstance(e, KafkaTimeoutError):
                e = KafkaTimeoutError(f"topic {state.name} not in metadata after max_block_ms")
            cluster.topics.discard(state.name)
            for args in self._unpark(state, last=True):
                fail_record(args[-1], args[-2], e)
        else:
            # Records held meanwhile (by other threads) join the list: place until none is left.
            while waiting := self._unpark(state):
                for args in waiting:
                    self._place_held(state, args)
        finally:
            with self._acc.lock:
                if state.ready is ready:
                    state.ready = None
            ready.set_result(None)

    def _place_held(self, state: TopicState, args: tuple) -> None:
        value, key, headers, partition, timestamp, callback, target = args
        try:
            partition = self._choose(state, key, partition)
            with self._acc.lock:
                self._append(state, partition, value, key, headers, timestamp, callback, target)
        except _Refused as e:
            fail_record(target, callback, e.error)
        except Exception as e:  # noqa: BLE001 - belongs to that record's future
            fail_record(target, callback, e)

    def _unpark(self, state: TopicState, last: bool = False) -> list:
        """Take the held records of ``state``; when none are left (or ``last``), stop holding
        new ones, in the same step so that none is left behind."""
        acc = self._acc
        with acc.lock:
            waiting, state.waiting = state.waiting, []
            acc.buffered -= sum(_PARKED_OVERHEAD + len(a[0] or b"") + len(a[1] or b"") for a in waiting)
            if last or not waiting:
                state.ready = None
        acc.wake_waiters()
        return waiting

    def _on_metadata(self, snapshot) -> None:
        with self._acc.lock:
            for name, state in self._acc.topics.items():
                count = snapshot.partition_count(name)
                if count:
                    state.resize(count, snapshot.available_partitions(name))

    async def partitions_for(self, topic: str) -> list[int]:
        """The partitions of ``topic`` (waiting up to ``max_block_ms`` for its metadata)."""
        self._cluster.add_topics([topic])
        meta = await self._cluster.wait_for_topics([topic], self._loop.time() + self._max_block)
        return list(range(meta.partition_count(topic)))

    # --- flushing and closing ------------------------------------------------------------
    async def wait_for_buffer(self) -> None:
        """Wait until the buffered bytes are below ``buffer_memory`` (the sender meanwhile
        sends open batches without lingering)."""
        if self._acc.has_space():
            return
        waiter = self._loop.create_future()
        self._acc.on_space(waiter)
        self._sender.wake()
        await waiter

    def on_buffer_space(self, callback) -> None:
        """Call ``callback()`` (on the loop) once the buffer is below ``buffer_memory``."""
        self._acc.on_space(callback)
        self._sender.wake()

    async def flush(self, timeout: float | None = None) -> None:
        """Send everything queued now, without waiting for linger, and wait until every
        record sent before this call has completed (succeeded or failed)."""
        deadline = None if timeout is None else self._loop.time() + timeout
        with self._acc.lock:
            parked = [s.ready for s in self._acc.topics.values() if s.ready is not None]
        if parked:
            await self._wait(parked, deadline)
        batches = self._acc.seal_all()
        self._sender.wake()
        waiters = []
        for batch in batches:
            if batch.waiter is None:
                batch.waiter = self._loop.create_future()
            waiters.append(batch.waiter)
        if waiters:
            await self._wait(waiters, deadline)

    async def _wait(self, futures, deadline) -> None:
        timeout = None if deadline is None else max(deadline - self._loop.time(), 0)
        _, pending = await asyncio.wait(futures, timeout=timeout)
        if pending:
            raise KafkaTimeoutError(f"flush timed out with {len(pending)} batches outstanding")

    async def close(self, timeout: float | None = None) -> None:
        """Send what is queued (within ``timeout`` seconds, None: no limit), then close.
        Records still unsent when time runs out fail with ClientClosedError. An open
        transaction is aborted, as Java's producer does (a prepared one stays open)."""
        if self._closed:
            return
        self._closed = True
        self._plain = False  # send's short path skips the closed check
        if self._task is not None:
            try:
                await self.flush(timeout)
            except KafkaTimeoutError:
                self._sender.abort_all(ClientClosedError("producer closed before delivery"))
            if self._txn is not None:
                await self._txn.abort_on_close(timeout)
            self._sender.closing = True
            self._sender.wake()
            try:
                await asyncio.wait_for(asyncio.shield(self._task), 5)
            except TimeoutError:
                self._task.cancel()
        await self._cluster.close()

    def _sender_ended(self, task: asyncio.Task) -> None:
        if task.cancelled():
            error: BaseException = ClientClosedError("producer closed")
        else:
            error = task.exception()
            if error is None:
                return
            _log.error("producer sender failed", exc_info=error)
        self._closed = True
        self._plain = False
        self._sender.abort_all(error if isinstance(error, KafkaError) else ClientClosedError(repr(error)))
