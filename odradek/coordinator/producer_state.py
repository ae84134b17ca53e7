"""Idempotent-producer state of one partition: who wrote what, so retries are not appended twice.

An idempotent producer stamps every v2 batch with ``producer_id``, ``producer_epoch`` and
``base_sequence`` (the sequence number of its first record; each partition's sequences start at
0 and wrap from Int32.MaxValue back to 0). The last sequence of a batch is ``base_sequence +
last_offset_delta`` with the same wraparound (Kafka uses the offset delta, not the record
count, so both agree for any valid batch). Per producer id the partition keeps its epoch and
the metadata of its last ``NUM_BATCHES_TO_RETAIN`` (5) batches: a producer has at most 5
requests in flight per partition, so a retry is always one of the last 5 batches.

Rules for a client batch with ``producer_id >= 0`` (``check``; Kafka ≥ 2.4 behaviour):

* epoch below the stored epoch → ``INVALID_PRODUCER_EPOCH`` (47), what produce returns since
  KIP-588 and what librdkafka expects on the data path;
* epoch above the stored epoch → the sequence must be 0, else ``OUT_OF_ORDER_SEQUENCE_NUMBER``
  (45); appending the batch then resets the producer's cached batches;
* same epoch, (first seq, last seq) equal to one of the cached batches → duplicate: nothing is
  appended and the produce response carries the original batch's base offset, no error;
* same epoch otherwise → the base sequence must follow the last cached one (``last + 1``,
  wrapping; 0 when nothing is cached), else ``OUT_OF_ORDER_SEQUENCE_NUMBER``;
* unknown producer id → accepted with any sequence. Brokers before 2.4 answered
  ``UNKNOWN_PRODUCER_ID`` (59) when the sequence was not 0, but the state of a live producer
  may be gone legitimately (retention deleted its batches, or ``producer.id.expiration.ms``
  expired it), and since KIP-360 brokers accept and start tracking it. We do the same.
* a negative epoch or sequence next to a producer id → ``INVALID_RECORD`` (87): Kafka's
  validator refuses such client batches too.

Control batches (transaction markers) only check fencing (an older epoch is refused); when
appended they close the producer's open transaction. Transactions are otherwise not modelled.

``check`` never changes state; the partition calls ``update`` only after the append succeeded,
so a failed append leaves state as it was. A Produce request (v3+) carries one batch per
partition, so check, append and update run once per batch. ``update`` applies a batch exactly
as the log holds it (followers and recovery use it unchecked): the epoch becomes the batch's
epoch, and a change of epoch drops the cached batches.

Snapshot layout (``snapshot``/``load``; version 1, integers big-endian)::

    offset  size  field
         0     2  version                 1
         2     4  crc                     CRC-32C of bytes 6..end
         6     8  map_end_offset          first offset not reflected in this state
        14     4  entry_count
        18     …  entries, ascending producer id, each:
                    8  producer_id
                    2  epoch
                    8  last_offset             last offset of its newest batch or marker
                    8  last_timestamp          max timestamp of that batch or marker
                    8  current_txn_first_offset  -1 when no transaction is open
                    1  batch_count             0..5, oldest first, each 32 bytes:
                         4 first_seq, 4 last_seq, 8 first_offset, 8 last_offset, 8 timestamp

Unlike Kafka's snapshot (which keeps only the newest batch) all cached batches are kept, so a
retry of any of the last 5 batches is still recognised after a restart. The log writes a
snapshot when it rolls a segment and, on restart, loads the newest one and calls ``rebuild``
with the headers of the batches from ``map_end_offset`` on.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from types import MappingProxyType
from typing import Iterable, Mapping

import crc32c as _crc32c

from odradek.protocol.generated.error_codes import ErrorCode
from odradek.records.batch import NO_SEQUENCE, BatchHeader

NUM_BATCHES_TO_RETAIN = 5
# Sequences are non-negative Int32 values: 0 .. 2**31 - 1, after which they wrap to 0.
SEQUENCE_MODULUS = 1 << 31
# Kafka's producer.id.expiration.ms default: one day.
DEFAULT_PRODUCER_ID_EXPIRATION_MS = 86_400_000

SNAPSHOT_VERSION = 1
_SNAPSHOT_HEADER = struct.Struct(">hIqi")
_CRC_START = 6
_ENTRY = struct.Struct(">qhqqqB")
_BATCH = struct.Struct(">iiqqq")


def increment_sequence(sequence: int, increment: int) -> int:
    """``sequence + increment`` on the wrapping sequence space (Int32.MaxValue + 1 is 0)."""
    return (sequence + increment) % SEQUENCE_MODULUS


class CorruptSnapshotError(ValueError):
    """The bytes given to ``ProducerStateManager.load`` are not a valid snapshot."""


@dataclass(frozen=True, slots=True)
class BatchMetadata:
    """What is remembered of one appended batch: its sequence and offset ranges."""

    first_seq: int
    last_seq: int
    first_offset: int
    last_offset: int
    timestamp: int


@dataclass(frozen=True, slots=True)
class ProducerEntry:
    """The state of one producer id in one partition.

    ``batches`` holds at most 5 batches, oldest first, all written with ``epoch``.
    ``last_offset``/``last_timestamp`` describe the newest batch or marker of this producer.
    """

    producer_id: int
    epoch: int
    batches: tuple[BatchMetadata, ...]
    last_offset: int
    last_timestamp: int
    current_txn_first_offset: int | None = None

    @property
    def last_seq(self) -> int:
        """Last sequence appended in this epoch, NO_SEQUENCE (-1) when none is cached."""
        return self.batches[-1].last_seq if self.batches else NO_SEQUENCE

    def find_duplicate(self, first_seq: int, last_seq: int) -> BatchMetadata | None:
        for batch in self.batches:
            if batch.first_seq == first_seq and batch.last_seq == last_seq:
                return batch
        return None


@dataclass(frozen=True, slots=True)
class CheckResult:
    """The verdict on a batch: append it (``ok``), skip it (``duplicate``), or refuse it."""

    error: ErrorCode = ErrorCode.NONE
    duplicate: BatchMetadata | None = None
    message: str | None = None

    @property
    def ok(self) -> bool:
        return self.error == ErrorCode.NONE and self.duplicate is None

    @property
    def is_duplicate(self) -> bool:
        return self.duplicate is not None


OK = CheckResult()


def _refuse(error: ErrorCode, message: str) -> CheckResult:
    return CheckResult(error=error, message=message)


class ProducerStateManager:
    """Producer ids, epochs and recent batches of one partition; pure logic, no I/O.

    Not thread-safe: the partition serialises check, append and update.
    """

    def __init__(self, map_end_offset: int = 0) -> None:
        self._entries: dict[int, ProducerEntry] = {}
        self._map_end_offset = map_end_offset

    @property
    def map_end_offset(self) -> int:
        """The first offset whose batch is not reflected in this state."""
        return self._map_end_offset

    def advance(self, end_offset: int) -> None:
        """The log grew to ``end_offset`` with batches of no producer id (which leave the
        entries as they are): what ``update`` does for each such batch, in one call."""
        if end_offset > self._map_end_offset:
            self._map_end_offset = end_offset

    def entries(self) -> Mapping[int, ProducerEntry]:
        """A read-only live view of the state, by producer id."""
        return MappingProxyType(self._entries)

    def entry(self, producer_id: int) -> ProducerEntry | None:
        return self._entries.get(producer_id)

    def __len__(self) -> int:
        return len(self._entries)

    def __repr__(self) -> str:
        return (
            f"ProducerStateManager(producers={len(self._entries)}, "
            f"map_end_offset={self._map_end_offset})"
        )

    # -- the produce path -------------------------------------------------------------------

    def check(self, header: BatchHeader) -> CheckResult:
        """Judge a client batch against the state without changing it (rules in the module doc)."""
        producer_id, epoch = header.producer_id, header.producer_epoch
        if producer_id < 0:
            return OK
        entry = self._entries.get(producer_id)
        if entry is not None and epoch < entry.epoch:
            return _refuse(
                ErrorCode.INVALID_PRODUCER_EPOCH,
                f"producer {producer_id} epoch {epoch} is older than its epoch {entry.epoch}",
            )
        if header.is_control:
            return OK
        first_seq = header.base_sequence
        if epoch < 0 or first_seq < 0:
            return _refuse(
                ErrorCode.INVALID_RECORD,
                f"producer {producer_id}: batch epoch {epoch}, base sequence {first_seq}",
            )
        if entry is None:
            return OK
        if epoch > entry.epoch:
            if first_seq == 0:
                return OK
            return _refuse(
                ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER,
                f"producer {producer_id} new epoch {epoch} must start at 0, not {first_seq}",
            )
        last_seq = increment_sequence(first_seq, header.last_offset_delta)
        duplicate = entry.find_duplicate(first_seq, last_seq)
        if duplicate is not None:
            return CheckResult(duplicate=duplicate)
        expected = increment_sequence(entry.last_seq, 1)
        if first_seq != expected:
            return _refuse(
                ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER,
                f"producer {producer_id} epoch {epoch}: expected sequence {expected}, "
                f"got {first_seq}",
            )
        return OK

    def update(
        self, header: BatchHeader, first_offset: int | None = None, *, timestamp: int | None = None
    ) -> None:
        """Apply a batch the log has just appended; every batch may be passed, idempotent or not.

        ``first_offset`` is the base offset the batch was given (default: the header's);
        ``timestamp`` overrides ``header.max_timestamp`` (pass the broker time for topics with
        LogAppendTime when the header was read before it was patched). Unchecked: callers check
        client batches first; followers and recovery apply what the log holds.
        """
        base = header.base_offset if first_offset is None else first_offset
        last_offset = base + header.last_offset_delta
        if last_offset + 1 > self._map_end_offset:
            self._map_end_offset = last_offset + 1
        producer_id = header.producer_id
        if producer_id < 0:
            return
        when = header.max_timestamp if timestamp is None else timestamp
        previous = self._entries.get(producer_id)
        epoch = header.producer_epoch
        batches: tuple[BatchMetadata, ...] = ()
        txn_first_offset = None
        if previous is not None:
            txn_first_offset = previous.current_txn_first_offset
            if previous.epoch == epoch:
                batches = previous.batches
        if header.is_control:
            txn_first_offset = None  # a commit or abort marker ends the open transaction
        else:
            if header.base_sequence >= 0:
                last_seq = increment_sequence(header.base_sequence, header.last_offset_delta)
                batch = BatchMetadata(header.base_sequence, last_seq, base, last_offset, when)
                batches = (batches + (batch,))[-NUM_BATCHES_TO_RETAIN:]
            if header.is_transactional and txn_first_offset is None:
                txn_first_offset = base
        self._entries[producer_id] = ProducerEntry(
            producer_id, epoch, batches, last_offset, when, txn_first_offset
        )

    # -- housekeeping -----------------------------------------------------------------------

    def expire(
        self, now_ms: int, producer_id_expiration_ms: int = DEFAULT_PRODUCER_ID_EXPIRATION_MS
    ) -> list[int]:
        """Forget producers silent for at least ``producer_id_expiration_ms``; return their ids.

        Silence is measured from the max timestamp of the producer's newest batch, as Kafka
        does; producers with an open transaction are kept.
        """
        expired = [
            producer_id
            for producer_id, entry in self._entries.items()
            if entry.current_txn_first_offset is None
            and now_ms - entry.last_timestamp >= producer_id_expiration_ms
        ]
        for producer_id in expired:
            del self._entries[producer_id]
        return sorted(expired)

    def truncate_to(self, offset: int) -> None:
        """Forget every batch at or beyond ``offset`` (the log was truncated to end there).

        Example: a producer with batches at offsets 0-9, 10-19 and 20-29 truncated to 15 keeps
        only the batch 0-9, so its next expected sequence is again the one after that batch.
        A producer left with no batch below ``offset`` is forgotten (and then accepted with any
        sequence, as an unknown producer). An epoch change always drops older batches, so an
        epoch bump beyond ``offset`` leaves no batch and is undone by forgetting the producer.
        Not undone: a marker beyond ``offset`` that closed a transaction begun before it. When
        that matters, ``load`` a snapshot taken at or below ``offset`` and ``rebuild`` instead.
        """
        for producer_id, entry in list(self._entries.items()):
            if entry.last_offset < offset:
                continue
            kept = tuple(batch for batch in entry.batches if batch.last_offset < offset)
            if not kept:
                del self._entries[producer_id]
                continue
            txn = entry.current_txn_first_offset
            if txn is not None and txn >= offset:
                txn = None
            newest = kept[-1]
            self._entries[producer_id] = ProducerEntry(
                producer_id, entry.epoch, kept, newest.last_offset, newest.timestamp, txn
            )
        self._map_end_offset = min(self._map_end_offset, offset)

    def rebuild(self, headers: Iterable[BatchHeader]) -> None:
        """Replay the headers of batches read from the log, in offset order.

        Batches ending before ``map_end_offset`` are already reflected and are skipped, so the
        scan may start at the beginning of the segment holding ``map_end_offset``.
        """
        for header in headers:
            if header.last_offset >= self._map_end_offset:
                self.update(header)

    # -- snapshots --------------------------------------------------------------------------

    def snapshot(self) -> bytes:
        """The state as bytes in the layout of the module docstring (deterministic)."""
        parts = []
        for producer_id in sorted(self._entries):
            entry = self._entries[producer_id]
            txn = -1 if entry.current_txn_first_offset is None else entry.current_txn_first_offset
            parts.append(
                _ENTRY.pack(
                    producer_id,
                    entry.epoch,
                    entry.last_offset,
                    entry.last_timestamp,
                    txn,
                    len(entry.batches),
                )
            )
            for b in entry.batches:
                parts.append(
                    _BATCH.pack(b.first_seq, b.last_seq, b.first_offset, b.last_offset, b.timestamp)
                )
        body = struct.pack(">qi", self._map_end_offset, len(self._entries)) + b"".join(parts)
        return struct.pack(">hI", SNAPSHOT_VERSION, _crc32c.crc32c(body)) + body

    @classmethod
    def load(cls, data: bytes) -> "ProducerStateManager":
        """Rebuild a manager from ``snapshot()`` bytes; raises CorruptSnapshotError if invalid."""
        data = bytes(data)
        if len(data) < _SNAPSHOT_HEADER.size:
            raise CorruptSnapshotError(f"snapshot of {len(data)} bytes is shorter than its header")
        version, crc, map_end_offset, count = _SNAPSHOT_HEADER.unpack_from(data, 0)
        if version != SNAPSHOT_VERSION:
            raise CorruptSnapshotError(f"unsupported producer snapshot version {version}")
        if _crc32c.crc32c(memoryview(data)[_CRC_START:]) != crc:
            raise CorruptSnapshotError("producer snapshot CRC mismatch")
        # Each entry takes at least _ENTRY.size (35) bytes: bounds the count before looping.
        if count < 0 or count > (len(data) - _SNAPSHOT_HEADER.size) // _ENTRY.size:
            raise CorruptSnapshotError(f"impossible producer count {count}")
        manager = cls(map_end_offset)
        pos = _SNAPSHOT_HEADER.size
        previous_id = -1
        for _ in range(count):
            entry, pos = _read_entry(data, pos)
            if entry.producer_id <= previous_id:
                raise CorruptSnapshotError(f"producer {entry.producer_id} out of order")
            previous_id = entry.producer_id
            manager._entries[entry.producer_id] = entry
        if pos != len(data):
            raise CorruptSnapshotError(f"{len(data) - pos} bytes after the last producer")
        return manager


def _read_entry(data: bytes, pos: int) -> tuple[ProducerEntry, int]:
    if len(data) - pos < _ENTRY.size:
        raise CorruptSnapshotError("producer snapshot entry truncated")
    producer_id, epoch, last_offset, last_timestamp, txn, count = _ENTRY.unpack_from(data, pos)
    pos += _ENTRY.size
    if producer_id < 0 or epoch < 0:
        raise CorruptSnapshotError(f"invalid producer {producer_id} epoch {epoch}")
    if count > NUM_BATCHES_TO_RETAIN or len(data) - pos < count * _BATCH.size:
        raise CorruptSnapshotError(f"producer {producer_id}: bad batch count {count}")
    batches = []
    for _ in range(count):
        batch = BatchMetadata(*_BATCH.unpack_from(data, pos))
        pos += _BATCH.size
        if min(batch.first_seq, batch.last_seq) < 0 or batch.last_offset < batch.first_offset:
            raise CorruptSnapshotError(f"producer {producer_id}: invalid batch {batch}")
        batches.append(batch)
    txn_first_offset = None if txn < 0 else txn
    entry = ProducerEntry(
        producer_id, epoch, tuple(batches), last_offset, last_timestamp, txn_first_offset
    )
    return entry, pos
