"""The producer's buffer: one queue of batches per partition, filled by ``send`` and drained
by the sender.

Per partition (``PartitionQueue``): at most one *open* batch taking records, then *sealed*
batches waiting to be sent, oldest first (a batch is sealed when a record no longer fits, or
when the sender takes it because ``linger`` passed or a flush asked). A retried batch goes
back to the front, so a partition's batches always leave in the order they were filled.

Per topic (``TopicState``): the partition count from metadata, the queues, the sticky
partition for unkeyed records (see ``partitioner``), and records sent before the topic's
metadata was known (``waiting``), which are placed once it arrives.

Memory: ``buffered`` counts, like the Java producer's buffer pool, ``batch_size`` bytes (or
the size of a larger single record) per batch not yet completed; ``send`` refuses records
beyond ``buffer_memory`` (BufferFullError) and ``on_space`` waiters are woken when
completions bring it below.

Threads: ``lock`` guards the shared state (``topics``, each ``TopicState`` and its queues'
``open`` and ``sealed``, the records appended to an open batch, ``active``, ``incomplete``,
``buffered``). The asyncio producer appends on its loop only, without it; the synchronous
``Producer`` appends from its callers' threads holding it, while the loop's side (the sender
taking and requeueing batches, expiry, flush, metadata, close) always holds it whenever it
touches that state. It is held for data structure steps only: never across an await, never
while user code runs (callbacks, partitioners) and never while sealing a batch, so nobody
waits on it long. A batch taken off its queue under the lock belongs to the loop alone.
``in_flight``, ``next_sequence`` and the producer identity are the loop's alone;
``_space_waiters`` too. The loop
goes first (``AccumulatorLock``): a caller appending in a tight loop would otherwise take the
lock again before the woken loop thread runs, and starve it.
"""

from __future__ import annotations

import asyncio
import itertools
import threading
import time
from collections import deque

from odradek.client.producer_batch import ProducerBatch

# Idempotence: sequence numbers are int32 and wrap to 0 (Kafka's DefaultRecordBatch rule).
SEQUENCE_MODULUS = 2**31
_sleep = time.sleep


class AccumulatorLock:
    """The accumulator's lock, which the loop gets before any caller waiting with it.

    The loop takes it with ``with``; callers' threads with ``acquire``/``release`` (or
    ``lock``, the plain lock, after ``if loop_waits: give_way()``). A Python lock is not
    fair: a woken waiter must still win the lock, then the GIL, against a thread that already
    runs and takes the lock again a microsecond after releasing it. So while the loop waits
    (``loop_waits``), callers step aside until it has the lock; at most the callers that were
    past that check get in before it.
    """

    __slots__ = ("lock", "loop_waits")

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.loop_waits = False

    def __enter__(self) -> None:
        lock = self.lock
        if not lock.acquire(False):
            self.loop_waits = True
            lock.acquire()
            self.loop_waits = False

    def __exit__(self, *exc) -> None:
        self.lock.release()

    def give_way(self) -> None:
        """In a caller's thread: let the waiting loop have the lock first."""
        while self.loop_waits:
            _sleep(0)  # lets go of the GIL, which the loop needs too

    def acquire(self) -> None:
        if self.loop_waits:
            self.give_way()
        self.lock.acquire()

    def release(self) -> None:
        self.lock.release()


class PartitionQueue:
    """One partition's batches. Under idempotence also its producer identity: every batch of
    the queue that has a sequence number (in flight, or sealed and waiting for a retry) was
    stamped with ``producer_id`` and ``producer_epoch``, and ``next_sequence`` is the next
    one under them. ``refused_from``: None, or the first sequence the leader's producer
    state refused under that identity (OUT_OF_ORDER_SEQUENCE_NUMBER with nothing earlier
    outstanding, UNKNOWN_PRODUCER_ID, a fenced epoch): no batch from there on was appended,
    and none will be under that identity. The sender moves the queue to its current
    identity (``adopt``) only when no batch stamped with the old one is outstanding."""

    __slots__ = ("in_flight", "next_sequence", "open", "partition", "producer_epoch", "producer_id",
                 "refused_from", "sealed", "topic")

    def __init__(self, topic: str, partition: int) -> None:
        self.topic = topic
        self.partition = partition
        self.open: ProducerBatch | None = None
        self.sealed: deque[ProducerBatch] = deque()
        self.in_flight: list[ProducerBatch] = []  # sent, unanswered; by base sequence
        self.next_sequence = 0
        self.producer_id = -1
        self.producer_epoch = -1
        self.refused_from: int | None = None

    def __repr__(self) -> str:
        return f"PartitionQueue({self.topic}-{self.partition}, sealed={len(self.sealed)})"

    def stamps_as(self, producer_id: int, producer_epoch: int) -> bool:
        """Whether the queue's next batch may be stamped with this identity as it stands."""
        return (self.refused_from is None and self.producer_id == producer_id
                and self.producer_epoch == producer_epoch)

    def adopt(self, producer_id: int, producer_epoch: int) -> None:
        """Move to a new producer identity, sequences from 0 (Kafka's
        ``TransactionManager.maybeUpdateProducerIdAndEpoch``); call only when none of the
        queue's batches stamped with the old one is outstanding."""
        self.producer_id, self.producer_epoch = producer_id, producer_epoch
        self.next_sequence = 0
        self.refused_from = None

    def behind_refusal(self, batch: ProducerBatch) -> bool:
        """Whether ``batch`` (stamped with the queue's identity) comes after a refused
        sequence: then none of it was appended, and it may be stamped anew."""
        return self.refused_from is not None and batch.base_sequence > self.refused_from

    def earlier_outstanding(self, batch: ProducerBatch) -> bool:
        """Whether a batch with a lower sequence than ``batch`` is in flight or waiting to be
        retried (then an OUT_OF_ORDER_SEQUENCE_NUMBER for ``batch`` is expected)."""
        return any(0 <= other.base_sequence < batch.base_sequence
                   for other in itertools.chain(self.in_flight, self.sealed))

    def head(self) -> ProducerBatch | None:
        """The next batch to send: the oldest sealed one, else the open one."""
        if self.sealed:
            return self.sealed[0]
        return self.open

    def take_head(self) -> ProducerBatch:
        if self.sealed:
            return self.sealed.popleft()
        batch, self.open = self.open, None
        return batch

    def requeue(self, batch: ProducerBatch) -> None:
        """Put a batch back for a retry, before every batch filled after it (by base sequence
        under idempotence, else by creation), so retries leave in their original order."""
        for i, other in enumerate(self.sealed):
            if batch.base_sequence >= 0:
                later = other.base_sequence < 0 or other.base_sequence > batch.base_sequence
            else:
                later = other.created > batch.created
            if later:
                self.sealed.insert(i, batch)
                return
        self.sealed.append(batch)


class TopicState:
    __slots__ = ("available", "name", "num_partitions", "queues", "ready", "sticky", "sticky_queue", "waiting")

    def __init__(self, name: str) -> None:
        self.name = name
        self.num_partitions = 0
        self.queues: list[PartitionQueue] = []
        self.sticky = -1
        self.sticky_queue: PartitionQueue | None = None  # queues[sticky], or None
        self.available: list[int] = []
        self.waiting: list[tuple] = []  # send() arguments until metadata is known
        self.ready: asyncio.Future | None = None  # resolved when ``waiting`` was placed

    def resize(self, num_partitions: int, available: list[int]) -> None:
        """Take a new partition count (partitions only grow) and the led partitions."""
        for p in range(len(self.queues), num_partitions):
            self.queues.append(PartitionQueue(self.name, p))
        self.num_partitions = max(num_partitions, self.num_partitions)
        self.available = available

    def set_sticky(self, partition: int) -> None:
        self.sticky = partition
        self.sticky_queue = self.queues[partition]


class RecordAccumulator:
    def __init__(self, batch_size: int, linger: float, buffer_memory: int) -> None:
        self.batch_size = batch_size
        self.linger = linger
        self.buffer_memory = buffer_memory
        self.buffered = 0
        self.topics: dict[str, TopicState] = {}
        self.active: set[PartitionQueue] = set()  # queues holding batches
        self.incomplete: set[ProducerBatch] = set()
        self._space_waiters: list = []  # futures / callables woken when memory frees up
        self.lock = AccumulatorLock()  # see the module docstring

    def topic(self, name: str) -> TopicState:
        state = self.topics.get(name)
        if state is None:
            state = self.topics[name] = TopicState(name)
        return state

    def seal_all(self) -> list[ProducerBatch]:
        """Seal every open batch (a flush or close sends them without waiting for linger);
        return the batches not completed yet, all taken under the lock."""
        with self.lock:
            for queue in self.active:
                if queue.open is not None and queue.open.count:
                    queue.sealed.append(queue.open)
                    queue.open = None
            return list(self.incomplete)

    def release(self, batch: ProducerBatch) -> None:
        """On the loop: a batch completed or failed, forget it and free its memory."""
        with self.lock:
            self.incomplete.discard(batch)
            self.buffered -= batch.size
        batch.size = 0
        self.wake_waiters()

    def unreserve(self, size: int) -> None:
        """On the loop: free ``size`` bytes."""
        with self.lock:
            self.buffered -= size
        self.wake_waiters()

    def wake_waiters(self) -> None:
        """On the loop, not holding the lock: wake the ``on_space`` waiters if there is room."""
        if self._space_waiters and self.buffered < self.buffer_memory:
            self.release_waiters()

    @property
    def short_of_space(self) -> bool:
        """Someone waits for memory: the sender then sends open batches without lingering."""
        return bool(self._space_waiters)

    def has_space(self) -> bool:
        return self.buffered < self.buffer_memory

    def on_space(self, waiter) -> None:
        """Resolve the future or call the callable once ``buffered`` drops below the limit."""
        self._space_waiters.append(waiter)
        if self.has_space():
            self.release_waiters()

    def release_waiters(self) -> None:
        waiters, self._space_waiters = self._space_waiters, []
        for waiter in waiters:
            if isinstance(waiter, asyncio.Future):
                if not waiter.done():
                    waiter.set_result(None)
            else:
                waiter()

    def expired(self, now: float, delivery_timeout: float) -> list[ProducerBatch]:
        """Batches not in flight whose delivery timeout passed, removed from their queues."""
        out = []
        with self.lock:
            for queue in self.active:
                while queue.sealed and now - queue.sealed[0].created >= delivery_timeout:
                    out.append(queue.sealed.popleft())
                if queue.open is not None and not queue.sealed and now - queue.open.created >= delivery_timeout:
                    out.append(queue.open)
                    queue.open = None
        return out
