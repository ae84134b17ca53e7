"""The synchronous client: the asyncio clients run on an event loop in a background thread.

    with Producer("127.0.0.1:9092") as producer:
        future = producer.send("events", b"value", key=b"k")   # a concurrent.futures.Future
        print(future.result())                                   # RecordMetadata
    with Consumer("127.0.0.1:9092", auto_offset_reset="earliest") as consumer:
        consumer.assign([TopicPartition("events", 0)])
        for record in consumer:                                  # ConsumerRecord
            ...

Each client owns one thread running its own event loop (uvloop's when installed; see
``sync_client``); every call is handed to that loop, so the asyncio objects are only ever touched from their own thread.
The exception is ``Producer.send``, the one hot path, which is not a round trip: it
serializes and appends the record to its partition's open batch in the caller's thread,
under the producer's accumulator lock (see ``Producer`` and ``record_accumulator``), and
the loop only ships batches. When ``buffer_memory`` is used up, ``send`` blocks up to
``max_block_ms`` (as the Java producer does) and then raises BufferFullError. Delivery
callbacks run on the loop's thread. The futures are ``SyncRecordFuture``s:
``concurrent.futures.Future``s that read their outcome from the record's batch and build a
Condition only when someone waits (see ``sync_record_future``): nothing is done per record
when its batch completes.

Configuration and semantics are those of ``AsyncProducer``, ``AsyncConsumer`` and
``AsyncAdminClient``; timeouts given here are in seconds, like ``concurrent.futures``.

A group consumer's rebalance listener runs in the thread that called ``poll`` (or ``close``,
``unsubscribe``), as in Kafka's Java client, so it may call the consumer: while the loop
waits for a callback, that thread runs it (``Consumer._run``).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import queue
import threading
import time
from collections import deque

from odradek.client.consumer import AsyncConsumer
from odradek.client.consumer_record import consumer_records
from odradek.client.errors import BufferFullError, ClientClosedError
from odradek.client.produce_request_result import ProduceRequestResult
from odradek.client.producer import AsyncProducer, _Refused, normalize_headers
from odradek.client.record_future import RecordFuture
from odradek.client.sync_admin import AdminClient  # its own module: no producer or consumer loaded
from odradek.client.sync_client import EventLoopThread, _forward, _forward_sync, _SyncClient
from odradek.client.sync_record_future import SyncRecordFuture

__all__ = ["AdminClient", "Consumer", "EventLoopThread", "Producer"]

_time_ns = time.time_ns
_log = logging.getLogger("odradek.client.producer")


class Producer(_SyncClient):
    """The synchronous producer: ``send`` appends in the caller's thread.

    A record goes straight into its partition's open batch under the accumulator's lock
    (``record_accumulator``), as Java's ``RecordAccumulator`` does; the loop only sends. What
    must run on the loop (waking the sender for a new or full batch, starting the wait for an
    unknown topic's metadata, a refused record's callback) is handed to it with
    ``call_soon_threadsafe``, once per batch at most for the common record. Under the lock:
    the closed check, the memory check, the append or the hold; never user code (the
    serializers and the partitioner run before, callbacks on the loop after).
    """

    def __init__(self, bootstrap_servers, **config) -> None:
        self._max_block = config.get("max_block_ms", 60_000) / 1000
        # Serializers run in the caller's thread, so their errors raise from send.
        self._key_serializer = config.pop("key_serializer", None)
        self._value_serializer = config.pop("value_serializer", None)
        # This producer's futures know it through their class: making one sets nothing.
        self._future_type = type("SyncRecordFuture", (SyncRecordFuture,), {"_owner": self})
        super().__init__(AsyncProducer(bootstrap_servers, **config), "odradek-producer")
        producer = self._producer = self._client
        self._acc = producer._acc
        self._topics = self._acc.topics
        self._gate = self._acc.lock  # the loop goes first
        self._lock = self._gate.lock
        self._loop = self._thread.loop
        self._loop_thread = self._thread.thread.ident
        # Batches are made in callers' threads too: the loop's clock (monotonic) read directly.
        producer._now = time.monotonic
        producer._soon = self._soon

    def send(self, topic: str, value=None, key=None, headers=None, partition: int | None = None,
             timestamp: int | None = None, *, callback=None) -> concurrent.futures.Future:
        """Queue one record; return a ``concurrent.futures.Future`` of its RecordMetadata.
        Blocks up to ``max_block_ms`` while the buffer is full (then BufferFullError)."""
        if key is not None and self._key_serializer is not None:
            key = self._key_serializer(key)
        if value is not None and self._value_serializer is not None:
            value = self._value_serializer(value)
        if timestamp is None:
            timestamp = _time_ns() // 1_000_000
        if key is None and partition is None and not headers:
            # The common record: into the sticky partition's open batch, if it has room.
            record = None
            if self._gate.loop_waits:
                self._gate.give_way()
            lock = self._lock
            lock.acquire()
            try:
                state = self._topics.get(topic)
                if state is not None and state.ready is None and self._producer._plain:
                    queue = state.sticky_queue
                    batch = None if queue is None else queue.open
                    if batch is not None:
                        record = batch.append(timestamp, None, value, self._future_type)
                        if record is not None and callback is not None:
                            batch.add_callback(callback)
            except Exception:  # noqa: BLE001 - the general path below fails its future
                record = None
            finally:
                lock.release()
            if record is not None:
                return record
        return self._send(topic, value, key, normalize_headers(headers) if headers else None,
                          partition, timestamp, callback)

    def _send(self, topic, value, key, headers, partition, timestamp, callback):
        """``send`` of any record: chooses the partition (user code, no lock), then appends
        or holds it under the lock, waiting (no lock) while the buffer is full."""
        if self._producer._txn is not None:
            self._producer._txn.check_send()
        deadline = None
        while True:
            state = self._topics.get(topic)
            known = state is not None and state.num_partitions > 0
            try:
                chosen = self._producer._choose(state, key, partition) if known else partition
                link = self._add(topic, known, value, key, headers, partition, chosen, timestamp, callback)
            except BufferFullError:
                if deadline is None:
                    deadline = time.monotonic() + self._max_block
                self._wait_for_space(deadline)
                continue
            except _Refused as e:
                link = self._failed(topic, timestamp, callback, e.error)
            except ClientClosedError:
                if self._loop.is_closed():
                    raise
                link = self._failed(topic, timestamp, callback, ClientClosedError("producer is closed"))
            except Exception as e:  # noqa: BLE001 - belongs to that record's future, as on the loop
                link = self._failed(topic, timestamp, callback, e)
            return self._future_type((link[0], link[1]))

    def _add(self, topic, known, value, key, headers, partition, chosen, timestamp, callback) -> RecordFuture:
        """Holding the lock: append the record, or hold it until its topic is known (also while
        earlier records of the topic are held); the record's future."""
        producer, acc = self._producer, self._acc
        self._gate.acquire()
        try:
            if producer._closed:
                raise ClientClosedError("producer is closed")
            # Memory is reserved per batch: a record that may need a new one needs room.
            if acc.buffered >= acc.buffer_memory:
                raise BufferFullError(f"{acc.buffered} bytes buffered (buffer_memory {acc.buffer_memory})")
            state = self._topics.get(topic)
            if not known or state.ready is not None:
                target = ProduceRequestResult.standalone(topic, timestamp, self._loop)
                producer._park(topic, (value, key, headers, partition, timestamp, callback, target))
                return RecordFuture((target, 0))
            return producer._append(state, chosen, value, key, headers, timestamp, callback, None)
        finally:
            self._gate.release()

    def _failed(self, topic: str, timestamp: int, callback, error: BaseException) -> RecordFuture:
        """The settled future of a record that gets no batch; its callback runs on the loop."""
        result = ProduceRequestResult.standalone(topic, timestamp, self._loop)
        result.fail(error)  # before anyone can wait on it: nothing to notify
        if callback is not None:
            self._soon(_call, callback, None, error)
        return RecordFuture((result, 0))

    def _soon(self, fn, *args) -> None:
        """Run ``fn(*args)`` on the loop: at once from the loop's thread, else handed over
        (at once after all when the loop is gone)."""
        if threading.get_ident() != self._loop_thread:
            try:
                self._loop.call_soon_threadsafe(fn, *args)
                return
            except RuntimeError:  # the loop is closed
                pass
        fn(*args)

    def _watch(self, future: SyncRecordFuture) -> None:
        """From any thread: settle a materialized future once its record is settled."""
        try:
            self._loop.call_soon_threadsafe(future.settle_when_done)
        except RuntimeError:  # the loop is closed: every record was settled or abandoned
            if future[0].done:
                future.settle()
            elif not future.done():
                future.set_exception(ClientClosedError("producer closed before delivery"))

    def _wait_for_space(self, deadline: float) -> None:
        acc = self._acc
        while True:
            if self._producer._closed:
                return  # the next attempt reports it
            if acc.buffered < acc.buffer_memory:
                return
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise BufferFullError(f"no buffer space within max_block_ms ({self._max_block} s)")
            room = threading.Event()
            try:
                self._loop.call_soon_threadsafe(self._producer.on_buffer_space, room.set)
            except RuntimeError:
                raise ClientClosedError("producer is closed") from None
            room.wait(min(remaining, 0.05))

    def flush(self, timeout: float | None = None) -> None:
        """Send everything and wait until every record sent before completed."""
        self._thread.run(self._producer.flush(timeout))

    def close(self, timeout: float | None = None) -> None:
        """Deliver what is queued (within ``timeout`` seconds), then stop."""
        if self._thread.loop.is_closed():
            return
        try:
            self._thread.run(self._producer.close(timeout))
        finally:
            self._thread.stop()

    partitions_for = _forward("partitions_for", AsyncProducer)
    init_transactions = _forward("init_transactions", AsyncProducer)
    send_offsets_to_transaction = _forward("send_offsets_to_transaction", AsyncProducer)
    commit_transaction = _forward("commit_transaction", AsyncProducer)
    abort_transaction = _forward("abort_transaction", AsyncProducer)
    prepare_transaction = _forward("prepare_transaction", AsyncProducer)

    def begin_transaction(self) -> None:
        """Start a transaction (a state change only: done in the caller's thread)."""
        self._producer.begin_transaction()

    @property
    def transaction_state(self) -> str | None:
        return self._producer.transaction_state


def _call(callback, metadata, error) -> None:
    try:
        callback(metadata, error)
    except Exception:  # noqa: BLE001 - a user callback must not break the loop
        _log.exception("delivery callback raised")


class _CallerThreadListener:
    """A rebalance listener whose callbacks run in the thread blocked in ``Consumer._run``."""

    def __init__(self, consumer: Consumer, listener) -> None:
        self._consumer = consumer
        self._listener = listener

    async def _call(self, fn, partitions) -> None:
        calls = self._consumer._callbacks
        if calls is None:  # nobody waits in _run: run it here
            fn(partitions)
            return
        loop = asyncio.get_running_loop()
        done = loop.create_future()

        def settle(error):
            if not done.done():
                done.set_result(None) if error is None else done.set_exception(error)

        def run():
            try:
                fn(partitions)
            except BaseException as e:  # noqa: BLE001 - handed back to the loop
                loop.call_soon_threadsafe(settle, e)
            else:
                loop.call_soon_threadsafe(settle, None)

        calls.put(run)
        await done

    async def on_partitions_revoked(self, revoked) -> None:
        fn = getattr(self._listener, "on_partitions_revoked", None)
        if fn is not None:
            await self._call(fn, revoked)

    async def on_partitions_assigned(self, assigned) -> None:
        fn = getattr(self._listener, "on_partitions_assigned", None)
        if fn is not None:
            await self._call(fn, assigned)

    async def on_partitions_lost(self, lost) -> None:
        fn = getattr(self._listener, "on_partitions_lost", None) or getattr(self._listener, "on_partitions_revoked", None)
        if fn is not None:
            await self._call(fn, lost)


class Consumer(_SyncClient):
    """The synchronous consumer. Iterating it yields records as they come; with
    ``consumer_timeout_ms`` (kafka-python's setting) the iteration stops once no record came
    for that long, and may be started again later."""

    def __init__(self, bootstrap_servers, *, consumer_timeout_ms: float | None = None, **config) -> None:
        self._callbacks: queue.SimpleQueue | None = None
        super().__init__(AsyncConsumer(bootstrap_servers, **config), "odradek-consumer")
        self._iterating: deque = deque()
        self._consumer_timeout = None if consumer_timeout_ms is None else consumer_timeout_ms / 1000

    def _run(self, coroutine):
        """Run ``coroutine`` on the loop; meanwhile run the listener callbacks it hands to
        this thread."""
        calls: queue.SimpleQueue = queue.SimpleQueue()
        outer, self._callbacks = self._callbacks, calls
        try:
            future = asyncio.run_coroutine_threadsafe(coroutine, self._thread.loop)
            future.add_done_callback(lambda _: calls.put(None))
            while (call := calls.get()) is not None:
                call()
        finally:
            self._callbacks = outer
        return future.result()

    def poll(self, timeout_ms: float = 0, max_records: int | None = None) -> dict:
        """``{TopicPartition: [Record, ...]}``, waiting up to ``timeout_ms`` for records."""
        return self._run(self._client.poll(timeout_ms, max_records))

    def subscribe(self, topics=None, pattern=None, listener=None) -> None:
        """Join the group for ``topics`` or ``pattern`` (see ``AsyncConsumer.subscribe``);
        ``listener``'s callbacks run in the thread that polls."""
        wrapped = None if listener is None else _CallerThreadListener(self, listener)
        self._thread.call(lambda: self._client.subscribe(topics, pattern, wrapped))

    def unsubscribe(self) -> None:
        self._hand_back()
        self._run(self._client.unsubscribe())

    def commit(self, offsets: dict | None = None) -> None:
        """Commit ``offsets``, by default those of the records this consumer handed out."""
        if offsets is None:
            offsets = self._thread.call(self._client._consumed_offsets, list(self._iterating))
        self._thread.run(self._client.commit(offsets))

    def close(self, timeout: float | None = None) -> None:
        """Stop (a group member commits, hears of its revoked partitions and leaves first)."""
        if self._thread.loop.is_closed():
            return
        try:
            self._hand_back()
            closing = self._client.close()
            self._run(closing if timeout is None else asyncio.wait_for(closing, timeout + 5))
        finally:
            self._thread.stop()

    def _hand_back(self) -> None:
        """Records this consumer holds but did not hand out are not consumed: give them back
        so that commits before revoking or closing do not count them."""
        if self._iterating:
            records, self._iterating = list(self._iterating), deque()
            self._thread.call(self._client._unread, records)

    def __iter__(self):
        return self

    def __next__(self):
        """The next ConsumerRecord; blocks until there is one (StopIteration once closed, or
        after ``consumer_timeout_ms`` without one)."""
        deadline = None if self._consumer_timeout is None else time.monotonic() + self._consumer_timeout
        while not self._iterating:
            if self._thread.loop.is_closed():
                raise StopIteration
            wait_ms = 1000
            if deadline is not None:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise StopIteration
                wait_ms = min(wait_ms, left * 1000)
            for tp, records in self.poll(wait_ms).items():
                self._iterating.extend(consumer_records(tp, records))
        return self._iterating.popleft()

    def assign(self, partitions) -> None:
        self._iterating.clear()
        self._thread.call(self._client.assign, list(partitions))

    def seek(self, tp, offset: int) -> None:
        self._drop_iterating([tp])
        self._thread.call(self._client.seek, tp, offset)

    def seek_to_beginning(self, *partitions) -> None:
        self._drop_iterating(partitions)
        self._thread.call(self._client.seek_to_beginning, *partitions)

    def seek_to_end(self, *partitions) -> None:
        self._drop_iterating(partitions)
        self._thread.call(self._client.seek_to_end, *partitions)

    def _drop_iterating(self, partitions) -> None:
        if not partitions:
            self._iterating.clear()
            return
        gone = {tuple(tp) for tp in partitions}
        self._iterating = deque(r for r in self._iterating if (r.topic, r.partition) not in gone)

    assignment = _forward_sync("assignment", AsyncConsumer)
    pause = _forward_sync("pause", AsyncConsumer)
    resume = _forward_sync("resume", AsyncConsumer)
    paused = _forward_sync("paused", AsyncConsumer)
    highwater = _forward_sync("highwater", AsyncConsumer)
    position = _forward("position", AsyncConsumer)
    beginning_offsets = _forward("beginning_offsets", AsyncConsumer)
    end_offsets = _forward("end_offsets", AsyncConsumer)
    offsets_for_times = _forward("offsets_for_times", AsyncConsumer)
    partitions_for_topic = _forward("partitions_for_topic", AsyncConsumer)
    topics = _forward("topics", AsyncConsumer)
    committed = _forward("committed", AsyncConsumer)
    subscription = _forward_sync("subscription", AsyncConsumer)
    group_metadata = _forward_sync("group_metadata", AsyncConsumer)
