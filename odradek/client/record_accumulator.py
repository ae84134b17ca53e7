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
"""

from __future__ import annotations

import asyncio
from collections import deque

from odradek.client.producer_batch import ProducerBatch

# Idempotence: sequence numbers are int32 and wrap to 0 (Kafka's DefaultRecordBatch rule).
SEQUENCE_MODULUS = 2**31


class PartitionQueue:
    __slots__ = ("in_flight", "next_sequence", "open", "partition", "sealed", "topic")

    def __init__(self, topic: str, partition: int) -> None:
        self.topic = topic
        self.partition = partition
        self.open: ProducerBatch | None = None
        self.sealed: deque[ProducerBatch] = deque()
        self.in_flight: list[ProducerBatch] = []  # sent, unanswered; by base sequence
        self.next_sequence = 0

    def __repr__(self) -> str:
        return f"PartitionQueue({self.topic}-{self.partition}, sealed={len(self.sealed)})"

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

    def topic(self, name: str) -> TopicState:
        state = self.topics.get(name)
        if state is None:
            state = self.topics[name] = TopicState(name)
        return state

    def seal_all(self) -> None:
        """Seal every open batch (a flush or close sends them without waiting for linger)."""
        for queue in self.active:
            if queue.open is not None and queue.open.count:
                queue.sealed.append(queue.open)
                queue.open = None

    def release(self, batch: ProducerBatch) -> None:
        """A batch completed or failed: forget it and free its memory."""
        self.incomplete.discard(batch)
        self.unreserve(batch.size)
        batch.size = 0

    def unreserve(self, size: int) -> None:
        self.buffered -= size
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
        for queue in list(self.active):
            while queue.sealed and now - queue.sealed[0].created >= delivery_timeout:
                out.append(queue.sealed.popleft())
            if queue.open is not None and not queue.sealed and now - queue.open.created >= delivery_timeout:
                out.append(queue.open)
                queue.open = None
        return out
