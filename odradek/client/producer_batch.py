"""One batch being filled for one partition, and how its records' futures are completed.

A ``ProducerBatch`` keeps the v2 batch it will send in a bytearray: 61 bytes reserved for the
header (layout in ``odradek.records.batch``), then the records as ``odradek.records.record``
encodes them::

    length varint | attributes 0 | timestampDelta varlong | offsetDelta varint |
    keyLength varint, key | valueLength varint, value | headerCount varint, headers

It is a ``MemoryRecordsBuilder`` (``_memory_records_builder.c``), whose ``append`` adds a record
without headers in C: the producer's once-per-record step. Records with headers go through
``try_append`` and ``encode_record``. Records are appended while the uncompressed batch stays
within ``batch_size`` (a first record always fits: a record larger than ``batch_size`` gets a
batch of its own). Per record the batch keeps only its timestamp; the max timestamp is
derived when the batch is sealed. ``seal`` compresses and writes the header and CRC once; with
idempotence the producer id, epoch and base sequence are stamped then (and, in a transaction,
the transactional bit), and a retry resends the same bytes.

Completion: the batch has one ``ProduceRequestResult`` and appending returns record ``i``'s
future as the pair ``(result, i)`` (``RecordFuture``), so settling the batch is one step
whatever its record count: record ``i`` of a batch the broker appended at ``base_offset`` has
offset ``base_offset + i``; its timestamp is the broker's append time when the topic uses
LogAppendTime (``log_append_time`` >= 0), else its create time. Delivery callbacks
(``add_callback``) are called, in append order, after the futures are settled.
"""

from __future__ import annotations

import logging
import time

from odradek.client._memory_records_builder import MemoryRecordsBuilder
from odradek.client.produce_request_result import ProduceRequestResult, RecordMetadata  # noqa: F401 - re-exported
from odradek.client.record_future import RecordFuture
from odradek.records import compression as codecs
from odradek.records.batch import (
    BATCH_HEADER_SIZE,
    LOG_OVERHEAD,
    BatchHeader,
    read_header,
    update_crc,
    write_header,
)
from odradek.records.record import encode_record

_log = logging.getLogger("odradek.client.producer")
_TRANSACTIONAL = 0x10  # attributes bit 4


class ProducerBatch(MemoryRecordsBuilder):
    # From MemoryRecordsBuilder: buf, timestamps, limit, result, future_type, count, base_ts.
    __slots__ = (
        "attempts",
        "awaits_metadata",
        "base_sequence",
        "callbacks",
        "created",
        "data",
        "done",
        "last_error",
        "node",
        "partition",
        "producer_epoch",
        "producer_id",
        "retry_at",
        "rode_behind_add",
        "size",
        "topic",
        "transactional",
        "waiter",
    )

    def __init__(self, topic: str, partition: int, created: float, limit: int, loop=None) -> None:
        timestamps: list[int] = []
        # ``loop``: where the records' futures schedule their done callbacks.
        result = ProduceRequestResult(topic, partition, timestamps, loop)
        super().__init__(bytearray(BATCH_HEADER_SIZE), timestamps, limit, result, RecordFuture)
        self.topic = topic
        self.partition = partition
        self.callbacks: list | None = None  # (record index, callable) pairs, when any
        self.created = created
        self.data: bytes | None = None  # the sealed batch
        self.attempts = 0
        self.producer_id = -1
        self.producer_epoch = -1
        self.base_sequence = -1
        self.transactional = False  # the batch's transactional bit, set before sealing
        self.retry_at = 0.0
        self.awaits_metadata = -1  # retry only after metadata newer than this version
        self.rode_behind_add = False  # last sent before its partition was added (TransactionManager)
        self.node = -1  # the broker its last attempt went to
        self.done = False
        self.last_error: BaseException | None = None  # why the last attempt is being retried
        self.size = 0  # bytes counted against the producer's buffer memory
        self.waiter = None  # an asyncio future a flush waits on, made on demand

    def __repr__(self) -> str:
        return f"ProducerBatch({self.topic}-{self.partition}, {self.count} records)"

    def try_append(self, timestamp: int | None, key, value, headers, future=None) -> RecordFuture | None:
        """Append one record and return its future, ``future((result, index))`` (a
        ``RecordFuture`` by default, or the sync producer's kind); None (nothing changed)
        when the batch is full. ``timestamp`` None is now."""
        if not headers:
            return self.append(timestamp, key, value, future)
        if timestamp is None:
            timestamp = time.time_ns() // 1_000_000
        count = self.count
        delta = timestamp - self.base_ts if count else 0
        record = encode_record(count, delta, key, value, headers)
        buf = self.buf
        if count and len(buf) + len(record) > self.limit:
            return None
        buf += record
        if not count:
            self.base_ts = timestamp
        self.count = count + 1
        self.timestamps.append(timestamp)
        return (future or self.future_type)((self.result, count))

    @property
    def max_ts(self) -> int:
        return max(self.timestamps) if self.timestamps else -1

    def add_callback(self, callback) -> None:
        """Call ``callback(metadata, exception)`` when the last appended record completes."""
        if self.callbacks is None:
            self.callbacks = []
        self.callbacks.append((self.count - 1, callback))

    def add_forward(self, target) -> None:
        """Also settle ``target`` (see ``produce_request_result.forward``) with the last
        appended record's outcome."""
        self.result.add_forward(self.count - 1, target)

    def seal(self, compression: int = codecs.NONE, level: int | None = None) -> bytes:
        """Finish the batch (header, compression, CRC) once; later calls return the same.
        Set ``producer_id``, ``producer_epoch`` and ``base_sequence`` before, for idempotence."""
        if self.data is None:
            self.data = self._build(compression, level)
            self.buf = None  # the uncompressed copy is no longer needed
        return self.data

    def restamp(self, producer_id: int, producer_epoch: int, base_sequence: int) -> None:
        """Set the idempotence fields of a sealed batch (they are covered by the CRC)."""
        self.producer_id, self.producer_epoch, self.base_sequence = producer_id, producer_epoch, base_sequence
        data = bytearray(self.data)
        header = _header_with(data, producer_id, producer_epoch, base_sequence)
        write_header(data, 0, header)
        update_crc(data, 0, len(data))
        self.data = bytes(data)

    def _build(self, compression: int, level: int | None) -> bytes:
        buf = self.buf
        if compression != codecs.NONE:
            body = codecs.compress(compression, memoryview(buf)[BATCH_HEADER_SIZE:], level)
            out = bytearray(BATCH_HEADER_SIZE)
            out += body
        else:
            out = buf
        header = BatchHeader(
            base_offset=0,
            batch_length=len(out) - LOG_OVERHEAD,
            partition_leader_epoch=-1,
            magic=2,
            crc=0,
            attributes=compression | (_TRANSACTIONAL if self.transactional else 0),
            last_offset_delta=max(self.count - 1, 0),
            base_timestamp=self.base_ts if self.count else -1,
            max_timestamp=self.max_ts,
            producer_id=self.producer_id,
            producer_epoch=self.producer_epoch,
            base_sequence=self.base_sequence,
            records_count=self.count,
        )
        write_header(out, 0, header)
        update_crc(out, 0, len(out))
        return bytes(out)

    # --- completion ----------------------------------------------------------------------
    def _finish(self) -> None:
        self.done = True
        if self.waiter is not None and not self.waiter.done():
            self.waiter.set_result(None)

    def complete(self, base_offset: int, log_append_time: int = -1) -> None:
        """Settle every record: record ``i`` at ``base_offset + i`` (offset -1 when unknown,
        as with acks=0)."""
        if self.done:
            return
        self._finish()
        result = self.result
        result.complete(base_offset, log_append_time)
        if self.callbacks:
            metadata = result.metadata
            for i, callback in self.callbacks:
                _call(callback, metadata(i), None)

    def fail(self, error: BaseException) -> None:
        """Fail every record with ``error``."""
        if self.done:
            return
        self._finish()
        self.result.fail(error)
        if self.callbacks:
            for _, callback in self.callbacks:
                _call(callback, None, error)


def _call(callback, metadata, error) -> None:
    try:
        callback(metadata, error)
    except Exception:  # noqa: BLE001 - a user callback must not break the sender
        _log.exception("delivery callback raised")


def _header_with(data, producer_id: int, producer_epoch: int, base_sequence: int) -> BatchHeader:
    h = read_header(data, 0)
    return BatchHeader(
        h.base_offset, h.batch_length, h.partition_leader_epoch, h.magic, 0, h.attributes,
        h.last_offset_delta, h.base_timestamp, h.max_timestamp, producer_id, producer_epoch,
        base_sequence, h.records_count,
    )

