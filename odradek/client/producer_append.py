"""``ProducerAppend``: where a record goes and how it joins a batch (a mixin of
``AsyncProducer``, kept apart because it is one concept: Java's ``KafkaProducer.partition``
and ``RecordAccumulator.append``, ``tryAppend`` and ``appendNewBatch``).

A record of a topic whose partitions are known gets its partition (``_choose``: given, the
custom partitioner's, murmur2 of the key, or sticky for unkeyed records) and is appended to
that partition's open batch, or to a new one that seals the previous (``_append_new``, which
also adds the partition to an open transaction while the batch lingers and reserves
``batch_size`` bytes of ``buffer_memory``). A record that gets no batch (partition out of
range, larger than ``max_request_size``, a transaction that cannot take it) is refused
(``_Refused``) and its future failed (``fail_record``), as a batch failure would fail it.

``_choose`` runs user code and needs no lock; ``_append`` and what it calls run no user code,
so the synchronous ``Producer`` calls them under the accumulator's lock. It uses the
producer's ``_acc``, ``_txn``, ``_partitioner``, ``_max_request_size``, ``_now``, ``_loop``,
``_sender`` and ``_soon``; see ``producer``.
"""

from __future__ import annotations

from odradek.client.errors import BrokerError, KafkaError
from odradek.client.partitioner import murmur2, next_sticky
from odradek.client.produce_request_result import forward
from odradek.client.producer_batch import ProducerBatch
from odradek.client.record_accumulator import TopicState
from odradek.client.record_future import RecordFuture
from odradek.protocol.generated.error_codes import ErrorCode


def fail_record(target, callback, error: BaseException) -> None:
    """Fail one record that never reached a batch, as a batch failure would: ``target`` is
    its standalone ``ProduceRequestResult`` or the future-like object it was given."""
    forward(target, None, error)
    if callback is not None:
        callback(None, error)


class _Refused(Exception):
    """A record that gets no batch (bad partition, too large): its future fails with ``error``."""

    def __init__(self, error: BaseException) -> None:
        super().__init__(error)
        self.error = error


class ProducerAppend:
    """Record placement for ``AsyncProducer`` (a mixin: its state is the producer's)."""

    def _place(self, state: TopicState, value, key, headers, partition, timestamp, callback, target):
        """Put a record into its partition's batch; return its future (``target`` when
        given: a standalone result or future-like object the batch then settles)."""
        try:
            partition = self._choose(state, key, partition)
            return self._append(state, partition, value, key, headers, timestamp, callback, target)
        except _Refused as e:
            return self._refuse(state.name, timestamp, callback, target, e.error)

    def _choose(self, state: TopicState, key, partition):
        """The record's partition: given, the custom partitioner's, or murmur2 of the key;
        None for sticky. Needs no lock: partitions only grow, so a choice stays valid."""
        if partition is None:
            if self._partitioner is not None:
                partition = self._partitioner(state.name, key, state.num_partitions)
            if partition is None and key is not None:
                partition = (murmur2(key) & 0x7FFFFFFF) % state.num_partitions
        return partition

    def _append(self, state: TopicState, partition, value, key, headers, timestamp, callback, target):
        """Append to partition ``partition`` (None: sticky) of a topic with known partitions;
        its future. Raises _Refused. Runs no user code (safe under the accumulator's lock)."""
        if partition is None:
            return self._place_sticky(state, value, headers, timestamp, callback, target)
        n = state.num_partitions
        if not 0 <= partition < n:
            raise _Refused(BrokerError(
                ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"partition {partition} not in 0..{n - 1}", state.name))
        queue = state.queues[partition]
        batch = queue.open
        record = None if batch is None else batch.try_append(timestamp, key, value, headers)
        if record is None:
            return self._append_new(queue, value, key, headers, timestamp, callback, target)
        return self._attach(batch, record, callback, target)

    def _place_sticky(self, state: TopicState, value, headers, timestamp, callback, target):
        """Unkeyed: the sticky partition's open batch, else a new partition and batch."""
        queue = state.sticky_queue
        batch = None if queue is None else queue.open
        record = None if batch is None else batch.try_append(timestamp, None, value, headers)
        if record is None:
            state.set_sticky(next_sticky(state.sticky, state.available, state.num_partitions))
            queue = state.sticky_queue
            batch = queue.open
            record = None if batch is None else batch.try_append(timestamp, None, value, headers)
            if record is None:
                return self._append_new(queue, value, None, headers, timestamp, callback, target)
        return self._attach(batch, record, callback, target)

    @staticmethod
    def _attach(batch: ProducerBatch, record: RecordFuture, callback, target):
        """Register the just-appended record's callback and forward target; its future."""
        if callback is not None:
            batch.add_callback(callback)
        if target is None:
            return record
        batch.add_forward(target)
        return target

    def _refuse(self, topic: str, timestamp: int, callback, target, error: BaseException):
        """Fail a record that gets no batch; its future."""
        if target is None:
            record = RecordFuture.standalone(topic, timestamp, self._loop)
            target = record[0]
        else:
            record = target
        fail_record(target, callback, error)
        return record

    def _append_new(self, queue, value, key, headers, timestamp, callback, target):
        """Start a new batch for the queue with the record (the previous one is sealed), and
        return the record's future; a record alone exceeding ``max_request_size`` is
        refused (_Refused)."""
        acc = self._acc
        txn = self._txn
        if txn is not None:
            try:
                txn.check_append()
            except KafkaError as e:
                raise _Refused(e) from None
            if (queue.topic, queue.partition) not in txn.added:
                self._soon(txn.maybe_add, queue.topic, queue.partition)  # while the batch lingers
        batch = ProducerBatch(queue.topic, queue.partition, self._now(), acc.batch_size, self._loop)
        record = batch.try_append(timestamp, key, value, headers)
        if len(batch.buf) > self._max_request_size:
            raise _Refused(BrokerError(
                ErrorCode.MESSAGE_TOO_LARGE,
                f"record of {len(batch.buf) - 61} bytes exceeds max_request_size {self._max_request_size}",
                f"{queue.topic}-{queue.partition}"))
        queue.open, full = batch, queue.open
        acc.incomplete.add(batch)
        acc.active.add(queue)
        # Memory is reserved per batch, as Java's pool allocates batch_size buffers.
        batch.size = max(acc.batch_size, len(batch.buf))
        acc.buffered += batch.size
        if full is not None:
            queue.sealed.append(full)
            self._soon(self._sender.wake)  # a full batch goes now
        else:
            self._soon(self._sender.wake_by, batch.created + acc.linger)
        return self._attach(batch, record, callback, target)
