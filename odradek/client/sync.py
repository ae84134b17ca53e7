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

``Consumer`` is defined here, ``Producer`` in ``sync_producer`` and ``AdminClient`` in
``sync_admin``; this module exports all three.
"""

from __future__ import annotations

import asyncio
import queue
import time
from collections import deque

from odradek.client.consumer import AsyncConsumer
from odradek.client.consumer_record import consumer_records
# The admin client and the producer have modules of their own: an application that only
# administers or produces loads none of the consumer's modules (nor numpy).
from odradek.client.sync_admin import AdminClient
from odradek.client.sync_client import EventLoopThread, _forward, _forward_sync, _SyncClient
from odradek.client.sync_producer import Producer

__all__ = ["AdminClient", "Consumer", "EventLoopThread", "Producer"]

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
