"""The synchronous client: the asyncio clients run on an event loop in a background thread.

    with Producer("127.0.0.1:9092") as producer:
        future = producer.send("events", b"value", key=b"k")   # a concurrent.futures.Future
        print(future.result())                                   # RecordMetadata
    with Consumer("127.0.0.1:9092", auto_offset_reset="earliest") as consumer:
        consumer.assign([TopicPartition("events", 0)])
        for record in consumer:                                  # ConsumerRecord
            ...

Each client owns one thread running its own event loop (uvloop's when installed); every call
is handed to that loop, so the asyncio objects are only ever touched from their own thread. ``Producer.send`` is the one hot
path and is not a round trip: it serializes in the caller's thread, appends to a queue and
wakes the loop once per burst (not per record); the loop moves queued records into batches.
When ``buffer_memory`` is used up, ``send`` blocks up to ``max_block_ms`` (as the Java
producer does) and then raises BufferFullError. Delivery callbacks run on the loop's thread.
The futures are ``SyncRecordFuture``s: ``concurrent.futures.Future``s that read their outcome
from the record's batch and build a Condition only when someone waits (see
``sync_record_future``): nothing is done per record when its batch completes.

Configuration and semantics are those of ``AsyncProducer``, ``AsyncConsumer`` and
``AsyncAdminClient``; timeouts given here are in seconds, like ``concurrent.futures``.

A group consumer's rebalance listener runs in the thread that called ``poll`` (or ``close``,
``unsubscribe``), as in Kafka's Java client, so it may call the consumer: while the loop
waits for a callback, that thread runs it (``Consumer._run``).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import queue
import threading
import time
from collections import deque

from odradek.client.admin import AsyncAdminClient
from odradek.client.consumer import AsyncConsumer
from odradek.client.consumer_record import consumer_records
from odradek.client.errors import BufferFullError, ClientClosedError
from odradek.client.producer import AsyncProducer, fail_record, normalize_headers
from odradek.client.record_future import RecordFuture
from odradek.client.sync_record_future import SyncRecordFuture, new_future

__all__ = ["AdminClient", "Consumer", "EventLoopThread", "Producer"]

# What a record waiting between the caller's thread and the loop counts beyond its key and value.
_QUEUED_OVERHEAD = 70
_time_ns = time.time_ns


def new_event_loop() -> asyncio.AbstractEventLoop:
    """uvloop's loop when it is installed (a project dependency: cheaper futures, timers and
    cross-thread wake-ups), else asyncio's."""
    try:
        import uvloop
    except ImportError:
        return asyncio.new_event_loop()
    return uvloop.new_event_loop()


class EventLoopThread:
    """An event loop running forever in a daemon thread."""

    def __init__(self, name: str, loop_factory=new_event_loop) -> None:
        self.loop = loop_factory()
        self.thread = threading.Thread(target=self.loop.run_forever, name=name, daemon=True)
        self.thread.start()

    def run(self, coroutine, timeout: float | None = None):
        """Run ``coroutine`` on the loop and return its result (raising its exception)."""
        future = asyncio.run_coroutine_threadsafe(coroutine, self.loop)
        try:
            return future.result(timeout)
        except concurrent.futures.TimeoutError:
            future.cancel()
            raise

    def call(self, fn, *args):
        """Call ``fn(*args)`` on the loop's thread and return its result."""
        async def call():
            return fn(*args)

        return self.run(call())

    def stop(self) -> None:
        if self.loop.is_closed():
            return
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(30)
        self.loop.close()


def _forward(name: str, target):
    """A method that runs the async client's method ``name`` on the loop."""
    def method(self, *args, **kwargs):
        return self._thread.run(getattr(self._client, name)(*args, **kwargs))

    method.__name__ = name
    method.__doc__ = getattr(target, name).__doc__
    return method


def _forward_sync(name: str, target):
    """A method that calls the async client's plain method ``name`` on the loop's thread."""
    def method(self, *args, **kwargs):
        return self._thread.call(lambda: getattr(self._client, name)(*args, **kwargs))

    method.__name__ = name
    method.__doc__ = getattr(target, name).__doc__
    return method


class _SyncClient:
    _client = None

    def __init__(self, client, name: str) -> None:
        self._thread = EventLoopThread(name)
        self._client = client
        try:
            self._thread.run(client.start())
        except BaseException:
            self._thread.stop()
            raise

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self, timeout: float | None = None) -> None:
        if self._thread.loop.is_closed():
            return
        try:
            self._thread.run(self._client.close(), None if timeout is None else timeout + 5)
        finally:
            self._thread.stop()


class Producer(_SyncClient):
    def __init__(self, bootstrap_servers, **config) -> None:
        self._max_block = config.get("max_block_ms", 60_000) / 1000
        # Serializers run in the caller's thread, so their errors raise from send.
        self._key_serializer = config.pop("key_serializer", None)
        self._value_serializer = config.pop("value_serializer", None)
        self._queue: deque = deque()
        self._scheduled = False
        # This producer's futures know it through their class: making one sets nothing.
        self._future_type = type("SyncRecordFuture", (SyncRecordFuture,), {"_owner": self})
        super().__init__(AsyncProducer(bootstrap_servers, **config), "odradek-producer")
        self._producer: AsyncProducer = self._client
        self._producer._refuse_when_full = False  # send() below blocks instead
        self._acc = self._producer._acc
        self._loop = self._thread.loop

    def send(self, topic: str, value=None, key=None, headers=None, partition: int | None = None,
             timestamp: int | None = None, *, callback=None) -> concurrent.futures.Future:
        """Queue one record; return a ``concurrent.futures.Future`` of its RecordMetadata."""
        loop = self._loop
        if loop.is_closed():
            raise ClientClosedError("producer is closed")
        if key is not None and self._key_serializer is not None:
            key = self._key_serializer(key)
        if value is not None and self._value_serializer is not None:
            value = self._value_serializer(value)
        if headers:
            headers = normalize_headers(headers)
        if timestamp is None:
            timestamp = _time_ns() // 1_000_000
        # Queued records count as many records of this one's size (no shared counter to
        # lock: deque appends and len are atomic).
        size = _QUEUED_OVERHEAD + (0 if value is None else len(value)) + (0 if key is None else len(key))
        acc = self._acc
        if len(self._queue) * size + acc.buffered >= acc.buffer_memory:
            self._wait_for_space(size)
        future = new_future(self._future_type)
        self._queue.append((topic, value, key, headers or None, partition, timestamp, callback, future))
        if not self._scheduled:
            self._scheduled = True
            loop.call_soon_threadsafe(self._drain)
        return future

    def _drain(self) -> None:
        """On the loop: move queued records into batches, linking each future to its record."""
        self._scheduled = False
        queue, send = self._queue, self._producer.send
        while queue:
            topic, value, key, headers, partition, timestamp, callback, future = queue.popleft()
            try:
                future._link = send(topic, value, key, headers, partition, timestamp, callback=callback)
            except Exception as e:  # noqa: BLE001 - belongs to that record's future
                link = future._link = RecordFuture.standalone(topic, timestamp, self._loop)
                fail_record(link[0], callback, e)

    def _watch(self, future: SyncRecordFuture) -> None:
        """From any thread: settle a materialized future once its record is settled."""
        try:
            self._loop.call_soon_threadsafe(self._watch_on_loop, future)
        except RuntimeError:  # the loop is closed: every record was settled or abandoned
            link = future._link
            if link is not None and link.done():
                future.settle_from(link)
            elif not future.done():
                future.set_exception(ClientClosedError("producer closed before delivery"))

    def _watch_on_loop(self, future: SyncRecordFuture) -> None:
        self._drain()  # the record may still be queued
        link = future._link
        if link.done():
            future.settle_from(link)
        else:
            link.add_done_callback(future.settle_from)

    def _wait_for_space(self, size: int) -> None:
        deadline = time.monotonic() + self._max_block
        while True:
            if self._thread.loop.is_closed():
                raise ClientClosedError("producer is closed")
            if len(self._queue) * size + self._producer.buffered_bytes < self._producer.buffer_memory:
                return
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise BufferFullError(f"no buffer space within max_block_ms ({self._max_block} s)")
            room = threading.Event()
            self._loop.call_soon_threadsafe(self._notify_on_space, room)
            room.wait(min(remaining, 0.05))

    def _notify_on_space(self, room: threading.Event) -> None:
        self._drain()
        self._producer.on_buffer_space(room.set)

    async def _flush(self, timeout: float | None) -> None:
        self._drain()
        await self._producer.flush(timeout)

    def flush(self, timeout: float | None = None) -> None:
        """Send everything and wait until every record sent before completed."""
        self._thread.run(self._flush(timeout))

    async def _close(self, timeout: float | None) -> None:
        self._drain()
        await self._producer.close(timeout)

    def close(self, timeout: float | None = None) -> None:
        """Deliver what is queued (within ``timeout`` seconds), then stop."""
        if self._thread.loop.is_closed():
            return
        try:
            self._thread.run(self._close(timeout))
        finally:
            self._thread.stop()

    partitions_for = _forward("partitions_for", AsyncProducer)


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
    def __init__(self, bootstrap_servers, **config) -> None:
        self._callbacks: queue.SimpleQueue | None = None
        super().__init__(AsyncConsumer(bootstrap_servers, **config), "odradek-consumer")
        self._iterating: deque = deque()

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
        """The next ConsumerRecord; blocks until there is one (StopIteration once closed)."""
        while not self._iterating:
            if self._thread.loop.is_closed():
                raise StopIteration
            for tp, records in self.poll(1000).items():
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


class AdminClient(_SyncClient):
    def __init__(self, bootstrap_servers, **config) -> None:
        super().__init__(AsyncAdminClient(bootstrap_servers, **config), "odradek-admin")

    create_topics = _forward("create_topics", AsyncAdminClient)
    delete_topics = _forward("delete_topics", AsyncAdminClient)
    list_topics = _forward("list_topics", AsyncAdminClient)
    describe_topics = _forward("describe_topics", AsyncAdminClient)
    create_partitions = _forward("create_partitions", AsyncAdminClient)
    describe_configs = _forward("describe_configs", AsyncAdminClient)
    alter_configs = _forward("alter_configs", AsyncAdminClient)
    incremental_alter_configs = _forward("incremental_alter_configs", AsyncAdminClient)
    describe_cluster = _forward("describe_cluster", AsyncAdminClient)
    delete_records = _forward("delete_records", AsyncAdminClient)
    list_offsets = _forward("list_offsets", AsyncAdminClient)
    list_groups = _forward("list_groups", AsyncAdminClient)
    describe_groups = _forward("describe_groups", AsyncAdminClient)
    delete_groups = _forward("delete_groups", AsyncAdminClient)
    list_group_offsets = _forward("list_group_offsets", AsyncAdminClient)
    alter_group_offsets = _forward("alter_group_offsets", AsyncAdminClient)
    reset_group_offsets = _forward("reset_group_offsets", AsyncAdminClient)
    delete_group_offsets = _forward("delete_group_offsets", AsyncAdminClient)
