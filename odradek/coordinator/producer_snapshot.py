"""The producer state snapshot file (``producer-state.snapshot``): encode and decode.

Layout, version 2 (integers big-endian)::

    offset  size  field
         0     2  version                 2
         2     4  crc                     CRC-32C of bytes 6..end
         6     8  map_end_offset          first offset not reflected in this state
        14     4  entry_count
        18     …  entries, ascending producer id, each:
                    8  producer_id
                    2  epoch
                    8  last_offset             last offset of its newest batch or marker
                    8  last_timestamp          max timestamp of that batch or marker
                    8  current_txn_first_offset  -1 when no transaction is open
                    4  coordinator_epoch       of the newest marker seen, -1 when none
                    1  batch_count             0..5, oldest first, each 32 bytes:
                         4 first_seq, 4 last_seq, 8 first_offset, 8 last_offset, 8 timestamp

Version 1 is the same without ``coordinator_epoch``; it is still read (coordinator epoch
-1), never written. The open transactions of a loaded state are those of its entries, as in
Kafka's snapshots (which keep the same two fields). Unlike Kafka's snapshot (which keeps only
the newest batch) all cached batches are kept, so a retry of any of the last 5 batches is
still recognised after a restart.

``SnapshotList``: the snapshots a running broker keeps in memory, the part Kafka's snapshot
files (one per segment roll) play when a log is truncated (``UnifiedLog.truncateTo`` ->
``ProducerStateManager.truncateAndReload``): the state is rebuilt from the latest snapshot at
or below the truncation offset plus a replay of the log from there, so a replay covers only
what lies between the two.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Iterable, Mapping

import crc32c as _crc32c

from odradek.coordinator.producer_entry import (
    NUM_BATCHES_TO_RETAIN,
    BatchMetadata,
    ProducerEntry,
)

SNAPSHOT_VERSION = 2
_HEADER = struct.Struct(">hIqi")
_CRC_START = 6
_ENTRY_V1 = struct.Struct(">qhqqqB")
_ENTRY_V2 = struct.Struct(">qhqqqiB")
_BATCH = struct.Struct(">iiqqq")
# version, crc, map_end_offset: what ``map_end_offset_of`` reads of a file.
_MAP_END_PREFIX = struct.Struct(">hIq")
MAP_END_PREFIX_SIZE = _MAP_END_PREFIX.size


class CorruptSnapshotError(ValueError):
    """The bytes given to ``ProducerStateManager.load`` are not a valid snapshot."""


def encode(map_end_offset: int, entries: Iterable[ProducerEntry]) -> bytes:
    """The snapshot of ``entries`` (deterministic: sorted by producer id), version 2."""
    parts = []
    count = 0
    for entry in sorted(entries, key=lambda e: e.producer_id):
        count += 1
        txn = -1 if entry.current_txn_first_offset is None else entry.current_txn_first_offset
        parts.append(_ENTRY_V2.pack(entry.producer_id, entry.epoch, entry.last_offset,
                                    entry.last_timestamp, txn, entry.coordinator_epoch,
                                    len(entry.batches)))
        for b in entry.batches:
            parts.append(_BATCH.pack(b.first_seq, b.last_seq, b.first_offset, b.last_offset, b.timestamp))
    body = struct.pack(">qi", map_end_offset, count) + b"".join(parts)
    return struct.pack(">hI", SNAPSHOT_VERSION, _crc32c.crc32c(body)) + body


def decode(data: bytes) -> tuple[int, list[ProducerEntry]]:
    """``(map_end_offset, entries)`` of a version 1 or 2 snapshot; CorruptSnapshotError when
    ``data`` is not one (bad CRC, unknown version, truncated, entries out of order...)."""
    data = bytes(data)
    if len(data) < _HEADER.size:
        raise CorruptSnapshotError(f"snapshot of {len(data)} bytes is shorter than its header")
    version, crc, map_end_offset, count = _HEADER.unpack_from(data, 0)
    if version not in (1, 2):
        raise CorruptSnapshotError(f"unsupported producer snapshot version {version}")
    if _crc32c.crc32c(memoryview(data)[_CRC_START:]) != crc:
        raise CorruptSnapshotError("producer snapshot CRC mismatch")
    layout = _ENTRY_V1 if version == 1 else _ENTRY_V2
    # Each entry takes at least layout.size bytes: bounds the count before looping.
    if count < 0 or count > (len(data) - _HEADER.size) // layout.size:
        raise CorruptSnapshotError(f"impossible producer count {count}")
    pos = _HEADER.size
    previous_id = -1
    entries = []
    for _ in range(count):
        entry, pos = _read_entry(data, pos, layout)
        if entry.producer_id <= previous_id:
            raise CorruptSnapshotError(f"producer {entry.producer_id} out of order")
        previous_id = entry.producer_id
        entries.append(entry)
    if pos != len(data):
        raise CorruptSnapshotError(f"{len(data) - pos} bytes after the last producer")
    return map_end_offset, entries


def _read_entry(data: bytes, pos: int, layout: struct.Struct) -> tuple[ProducerEntry, int]:
    if len(data) - pos < layout.size:
        raise CorruptSnapshotError("producer snapshot entry truncated")
    fields = layout.unpack_from(data, pos)
    pos += layout.size
    if layout is _ENTRY_V1:
        producer_id, epoch, last_offset, last_timestamp, txn, count = fields
        coordinator_epoch = -1
    else:
        producer_id, epoch, last_offset, last_timestamp, txn, coordinator_epoch, count = fields
    if producer_id < 0 or epoch < 0 or coordinator_epoch < -1:
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
    entry = ProducerEntry(producer_id, epoch, tuple(batches), last_offset, last_timestamp,
                          txn_first_offset, coordinator_epoch)
    return entry, pos


def map_end_offset_of(data: bytes) -> int:
    """The ``map_end_offset`` of a snapshot from its first ``MAP_END_PREFIX_SIZE`` bytes,
    unchecked beyond its version (whether a snapshot file lies above a truncation offset
    needs no more); CorruptSnapshotError when they are not a snapshot's."""
    if len(data) < MAP_END_PREFIX_SIZE:
        raise CorruptSnapshotError(f"snapshot of {len(data)} bytes is shorter than its header")
    version, _, map_end_offset = _MAP_END_PREFIX.unpack_from(data, 0)
    if version not in (1, 2):
        raise CorruptSnapshotError(f"unsupported producer snapshot version {version}")
    return map_end_offset


# How many snapshots a ``SnapshotList`` holds at most. After high watermark pruning a
# partition holds one or two; more accumulate only while the high watermark stalls (a lagging
# follower still in the ISR) or during a restart's replay, which has no high watermark yet.
MAX_SNAPSHOTS = 8


@dataclass(frozen=True, slots=True)
class StateSnapshot:
    """The producers of a partition as of ``offset``: what every batch below it left
    (``ProducerEntry`` values are immutable, so a snapshot shares them with the live state)."""

    offset: int
    entries: Mapping[int, ProducerEntry]


class SnapshotList:
    """Snapshots of one partition's producer state, ascending offset (Kafka's snapshot files
    of a log directory, held in memory).

    Which are kept: a truncation goes to the high watermark or above unless an unclean
    election made another replica leader, so ``on_high_watermark`` drops every snapshot
    older than the newest one at or below it. Beyond ``MAX_SNAPSHOTS`` the second oldest goes:
    the oldest is that newest one below the high watermark, the next truncation's likely
    base, and the newer ones stay dense where the log grows. Dropping any snapshot never makes
    a rebuild wrong, only longer (without one at or below the offset it starts from the log
    start offset, as Kafka's does).

    None is written to disk: after a restart there are the one a clean stop wrote (the file
    above, ``ProducerStateManager.load``) and those taken while replaying the log past it, so
    a truncation below the offset of a clean stop's snapshot replays from the log start."""

    __slots__ = ("_snapshots",)

    def __init__(self) -> None:
        self._snapshots: list[StateSnapshot] = []

    def __len__(self) -> int:
        return len(self._snapshots)

    def offsets(self) -> list[int]:
        return [s.offset for s in self._snapshots]

    def take(self, offset: int, entries: Mapping[int, ProducerEntry]) -> None:
        """Keep a copy of ``entries`` as the state at ``offset``; snapshots above it (none,
        while the state only moves forward) and one at it are replaced."""
        self.delete_above(offset)
        snapshots = self._snapshots
        if snapshots and snapshots[-1].offset == offset:
            snapshots.pop()
        snapshots.append(StateSnapshot(offset, dict(entries)))
        if len(snapshots) > MAX_SNAPSHOTS:
            del snapshots[1]

    def latest_at_or_below(self, offset: int, log_start_offset: int) -> StateSnapshot | None:
        """The newest snapshot in ``[log_start_offset, offset]`` (one below the log start
        offset would need a replay of batches no longer in the log); None when there is none."""
        for snapshot in reversed(self._snapshots):
            if snapshot.offset <= offset:
                return snapshot if snapshot.offset >= log_start_offset else None
        return None

    def delete_above(self, offset: int) -> None:
        """Forget the snapshots above ``offset`` (states of batches the log no longer has)."""
        snapshots = self._snapshots
        while snapshots and snapshots[-1].offset > offset:
            snapshots.pop()

    def on_high_watermark(self, high_watermark: int) -> None:
        """Forget the snapshots older than the newest one at or below ``high_watermark``."""
        snapshots = self._snapshots
        if len(snapshots) > 1 and snapshots[1].offset <= high_watermark:
            keep = 1
            while keep + 1 < len(snapshots) and snapshots[keep + 1].offset <= high_watermark:
                keep += 1
            del snapshots[:keep]
