"""One batch being filled for one partition, and how its records' futures are completed.

A ``ProducerBatch`` keeps the v2 batch it will send in a bytearray: 61 bytes reserved for the
header (layout in ``odradek.records.batch``), then the records as ``odradek.records.record``
encodes them::

    length varint | attributes 0 | timestampDelta varlong | offsetDelta varint |
    keyLength varint, key | valueLength varint, value | headerCount varint, headers

The common record (no headers, key and value together under 8 KiB, timestamp delta and
offset delta in 0..8191) is encoded here with one bytes-format from precomputed varints, about a tenth of the
general encoder's cost; everything else goes through ``encode_record``. Records are appended
while the uncompressed batch stays within ``batch_size`` (a first record always fits: a record
larger than ``batch_size`` gets a batch of its own). Per record the batch keeps only its
future and timestamp; the count and max timestamp are derived when the batch is sealed. ``seal`` compresses and writes the header
and CRC once; with idempotence the producer id, epoch and base sequence are stamped then, and
a retry resends the same bytes.

Completion: record ``i`` of a batch the broker appended at ``base_offset`` has offset
``base_offset + i``; its timestamp is the broker's append time when the topic uses
LogAppendTime (``log_append_time`` >= 0), else its create time.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
from itertools import repeat
from typing import NamedTuple

from odradek.protocol.varint import varint_bytes
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


class RecordMetadata(NamedTuple):
    """Where a produced record landed."""

    topic: str
    partition: int
    offset: int
    timestamp: int


_TABLE = 8192
_ZZ = tuple(varint_bytes(i) for i in range(_TABLE))  # zigzag varints of 0.._TABLE-1
# Key + value bytes below which the fast path's record length stays inside the table: the
# other fields (attributes, two deltas, two lengths, header count) take at most 10 bytes.
_FAST_SIZE = _TABLE - 16
_new_metadata = tuple.__new__
# What set_result raises for a future that is already done (cancelled by its owner).
_ALREADY_DONE = (asyncio.InvalidStateError, concurrent.futures.InvalidStateError)
_log = logging.getLogger("odradek.client.producer")


class ProducerBatch:
    __slots__ = (
        "attempts",
        "awaits_metadata",
        "base_sequence",
        "base_ts",
        "buf",
        "callbacks",
        "created",
        "data",
        "done",
        "futures",
        "limit",
        "partition",
        "producer_epoch",
        "producer_id",
        "retry_at",
        "size",
        "timestamps",
        "topic",
        "waiter",
    )

    def __init__(self, topic: str, partition: int, created: float, limit: int) -> None:
        self.topic = topic
        self.partition = partition
        self.buf = bytearray(BATCH_HEADER_SIZE)
        self.base_ts = 0
        self.futures: list = []
        self.timestamps: list[int] = []
        self.callbacks: list | None = None  # (record index, callable) pairs, when any
        self.created = created
        self.limit = limit
        self.data: bytes | None = None  # the sealed batch
        self.attempts = 0
        self.producer_id = -1
        self.producer_epoch = -1
        self.base_sequence = -1
        self.retry_at = 0.0
        self.awaits_metadata = -1  # retry only after metadata newer than this version
        self.done = False
        self.size = 0  # bytes counted against the producer's buffer memory
        self.waiter = None  # an asyncio future a flush waits on, made on demand

    def __repr__(self) -> str:
        return f"ProducerBatch({self.topic}-{self.partition}, {self.count} records)"

    def try_append(self, timestamp: int, key, value, headers, future) -> bool:
        """Append one record; False (nothing changed) when the batch is full."""
        futures = self.futures
        count = len(futures)
        delta = timestamp - self.base_ts if count else 0
        if (key is None and not headers and value is not None and count < _TABLE
                and 0 <= delta < _TABLE and len(value) < _FAST_SIZE):
            # The unkeyed record, the most common kind, in one bytes-format.
            zz = _ZZ
            body = b"\x00%b%b\x01%b%b\x00" % (zz[delta], zz[count], zz[len(value)], value)
            prefix = zz[len(body)]
        else:
            body, prefix = _encode(count, delta, key, value, headers)
        buf = self.buf
        if count and len(buf) + len(prefix) + len(body) > self.limit:
            return False
        buf += prefix
        buf += body
        if not count:
            self.base_ts = timestamp
        futures.append(future)
        self.timestamps.append(timestamp)
        return True

    @property
    def count(self) -> int:
        return len(self.futures)

    @property
    def max_ts(self) -> int:
        return max(self.timestamps) if self.timestamps else -1

    def add_callback(self, callback) -> None:
        """Call ``callback(metadata, exception)`` when the last appended record completes."""
        if self.callbacks is None:
            self.callbacks = []
        self.callbacks.append((self.count - 1, callback))

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
            attributes=compression,
            last_offset_delta=max(self.count - 1, 0),
            base_timestamp=self.base_ts if self.futures else -1,
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
        """Resolve every record's future with its RecordMetadata (offset -1 when unknown,
        as with acks=0)."""
        if self.done:
            return
        self._finish()
        topic, partition, futures = self.topic, self.partition, self.futures
        n = len(futures)
        offsets = range(base_offset, base_offset + n) if base_offset >= 0 else repeat(-1, n)
        timestamps = self.timestamps if log_append_time < 0 else repeat(log_append_time, n)
        new = _new_metadata
        records = zip(futures, offsets, timestamps)
        while True:
            try:
                for future, offset, timestamp in records:
                    future.set_result(new(RecordMetadata, (topic, partition, offset, timestamp)))
                break
            except _ALREADY_DONE:
                continue  # a cancelled future: the loop goes on after it
        if self.callbacks:
            offsets, timestamps = list(offsets), list(timestamps)
            for i, callback in self.callbacks:
                _call(callback, RecordMetadata(topic, partition, offsets[i], timestamps[i]), None)

    def fail(self, error: BaseException) -> None:
        """Fail every record's future with ``error``."""
        if self.done:
            return
        self._finish()
        for future in self.futures:
            if not future.done():
                future.set_exception(error)
                future.exception()  # fire-and-forget sends must not warn "never retrieved"
        if self.callbacks:
            for _, callback in self.callbacks:
                _call(callback, None, error)


def _encode(count: int, delta: int, key, value, headers) -> tuple[bytes, bytes]:
    """``(body, length prefix)`` of a record: by bytes-format when every varint is in the
    table, else by the general encoder (which returns the prefix inside the body)."""
    ksize = 0 if key is None else len(key)
    vsize = 0 if value is None else len(value)
    if headers or count >= _TABLE or not 0 <= delta < _TABLE or ksize + vsize >= _FAST_SIZE:
        return encode_record(count, delta, key, value, headers or ()), b""
    zz = _ZZ
    kpart = b"\x01" if key is None else zz[ksize] + key
    vpart = b"\x01" if value is None else zz[vsize] + value
    body = b"\x00%b%b%b%b\x00" % (zz[delta], zz[count], kpart, vpart)
    return body, zz[len(body)]


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

