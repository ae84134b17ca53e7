"""The synchronous producer (see ``sync`` for how the synchronous clients run): ``send``
appends in the caller's thread, the client's own event loop thread only ships batches.

It lives apart from the consumer (``sync``), so that an application or tool that only
produces loads none of the consumer's modules (nor numpy, which the consumer's record
decoding uses: ``records/record_spans.py``).
"""

from __future__ import annotations

import concurrent.futures
import logging
import queue
import threading
import time

from odradek.client.errors import BufferFullError, ClientClosedError
from odradek.client.produce_request_result import ProduceRequestResult
from odradek.client.producer import AsyncProducer, _Refused, normalize_headers
from odradek.client.record_future import RecordFuture
from odradek.client.sync_client import _forward, _SyncClient
from odradek.client.sync_record_future import SyncRecordFuture

__all__ = ["Producer"]

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
