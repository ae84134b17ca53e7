"""``LeaderEpochFileCache``: which leader epoch wrote which offsets of a partition log.

Kafka's ``LeaderEpochFileCache`` (KIP-101, KIP-279). Every v2 batch carries the epoch of
the leader that appended it (``partition_leader_epoch``); the cache keeps, for each epoch
present in the log, the offset of its first batch, in increasing epoch and offset order::

    epoch  start_offset
        0             0      offsets 0..1249 were written by the leader of epoch 0
        3          1250      offsets 1250.. (to the log end) by the leader of epoch 3

A follower that comes back asks the leader where its own latest epoch ends
(OffsetForLeaderEpoch), and truncates where the two logs diverge
(``replication/truncation.py``). The leader answers from ``end_offset_for``.

The entries are persisted in the log's ``leader-epoch-checkpoint`` file
(``leader_epoch_checkpoint``), rewritten (fsynced) on every change, so the file never lacks an
epoch whose batches are in the log: ``assign`` runs before the batches are written. It may
hold entries past the log's end after a crash; ``open_leader_epoch_cache`` cuts them
(``truncate_from_end``) when the log is opened. Changes are rare: one per leadership change
(and a follower's truncation, a log start offset moving past the first entry's start).

Thread safety: the entries are an immutable tuple replaced in one assignment, so readers take
no lock; writers hold the cache's lock (the log calls them under its own lock anyway).
"""

from __future__ import annotations

import logging
import struct
import threading
from bisect import bisect_left, bisect_right
from collections.abc import Iterable
from typing import NamedTuple

from odradek.storage.errors import CheckpointError
from odradek.storage.leader_epoch_checkpoint import EpochEntry, LeaderEpochCheckpointFile

logger = logging.getLogger(__name__)

# Kafka's OffsetsForLeaderEpochResponse.UNDEFINED_EPOCH and UNDEFINED_EPOCH_OFFSET.
UNDEFINED_EPOCH = -1
UNDEFINED_EPOCH_OFFSET = -1


class LeaderEpochFileCache:
    """The epoch entries of one log, persisted in ``checkpoint`` (None: in memory only, for
    simulations and tests)."""

    def __init__(self, checkpoint: LeaderEpochCheckpointFile | None = None,
                 entries: Iterable[EpochEntry] = (), name: str = "") -> None:
        self.checkpoint = checkpoint
        self.name = name
        self._lock = threading.Lock()
        self._entries: tuple[EpochEntry, ...] = ()
        for entry in entries:
            self._entries = _assigned(self._entries, EpochEntry(*entry))[0]

    def __repr__(self) -> str:
        return f"LeaderEpochFileCache({self.name}, {list(self._entries)})"

    # -- reads ------------------------------------------------------------------------------

    @property
    def entries(self) -> tuple[EpochEntry, ...]:
        return self._entries

    @property
    def latest_entry(self) -> EpochEntry | None:
        entries = self._entries
        return entries[-1] if entries else None

    @property
    def latest_epoch(self) -> int | None:
        """The epoch of the newest entry: the one being written to (None when empty)."""
        entries = self._entries
        return entries[-1].epoch if entries else None

    @property
    def earliest_entry(self) -> EpochEntry | None:
        entries = self._entries
        return entries[0] if entries else None

    def previous_epoch(self, epoch: int | None = None) -> int | None:
        """The largest epoch below ``epoch`` (default: below the latest); None if none."""
        entries = self._entries
        if epoch is None:
            return entries[-2].epoch if len(entries) >= 2 else None
        i = bisect_left(entries, (epoch,))
        return entries[i - 1].epoch if i > 0 else None

    def epoch_entry(self, epoch: int) -> EpochEntry | None:
        entries = self._entries
        i = bisect_left(entries, (epoch,))
        return entries[i] if i < len(entries) and entries[i].epoch == epoch else None

    def epoch_for_offset(self, offset: int) -> int | None:
        """The epoch that wrote ``offset`` (the last entry starting at or before it)."""
        entries = self._entries
        best = None
        for epoch, start in entries:
            if start > offset:
                break
            best = epoch
        return best

    def end_offset_for(self, requested_epoch: int, log_end_offset: int) -> tuple[int, int]:
        """``(epoch, end_offset)`` for ``requested_epoch``, as Kafka's ``endOffsetFor``: the
        largest epoch at or below the requested one, and the offset where it ends (the start of
        the next larger epoch, or ``log_end_offset`` when the latest epoch is asked for).

        Cases, with entries (0, 10) (2, 13) (4, 17) and a log end offset of 20:

        - ``UNDEFINED_EPOCH`` asked, or an empty cache, or an epoch above every entry:
          ``(UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET)``;
        - the latest epoch, 4: ``(4, 20)``, the log end offset;
        - 1 or 0: ``(0, 13)``; 2 or 3: ``(2, 17)``;
        - below the first epoch (with a first entry (5, 11), asked 4): ``(4, 11)``, the
          requested epoch and the first entry's start offset (Kafka since 2.0: older data was
          removed, so the follower may keep what precedes the leader's earliest data).
        """
        entries = self._entries
        if requested_epoch == UNDEFINED_EPOCH or not entries:
            return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
        if entries[-1].epoch == requested_epoch:
            return requested_epoch, log_end_offset
        higher = bisect_right(entries, (requested_epoch, 2**63))  # first entry with epoch > requested
        if higher == len(entries):
            return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
        if higher == 0:
            return requested_epoch, entries[0].start_offset
        return entries[higher - 1].epoch, entries[higher].start_offset

    def entries_in_range(self, start_offset: int, end_offset: int) -> list[EpochEntry]:
        """The entries as they would be after ``truncate_from_start(start_offset)`` and
        ``truncate_from_end(end_offset)`` (Kafka's ``epochEntriesInRange``), unchanged."""
        entries = self._entries
        if start_offset >= 0:
            entries = _truncated_from_start(entries, start_offset)[0]
        return list(_truncated_from_end(entries, end_offset)[0])

    # -- changes ----------------------------------------------------------------------------

    def assign(self, epoch: int, start_offset: int) -> bool:
        """Record that ``epoch`` begins at ``start_offset``; whether anything changed.

        As Kafka's ``assign``: nothing changes when ``epoch`` is the latest epoch and does not
        start earlier (the common case: one more batch of the current epoch). Otherwise the
        new entry is appended after removing every entry that would break the order, those
        with an epoch at or above ``epoch`` or a start offset at or above ``start_offset``:
        a lower epoch at a later offset therefore replaces the entries above it
        (Kafka's ``shouldEnforceMonotonicallyIncreasingEpochs``). ValueError on negative
        values. The checkpoint is rewritten before this returns.
        """
        if epoch < 0 or start_offset < 0:
            raise ValueError(f"invalid leader epoch entry ({epoch}, {start_offset})")
        if not _update_needed(self._entries, epoch, start_offset):
            return False
        with self._lock:
            entries, removed = _assigned(self._entries, EpochEntry(epoch, start_offset))
            if entries == self._entries:
                return False
            if len(removed) > 1 or (removed and removed[0].start_offset != start_offset):
                logger.warning("%s: new epoch entry %s replaced conflicting entries %s", self.name,
                               (epoch, start_offset), [tuple(e) for e in removed])
            self._replace(entries)
            return True

    def assign_batches(self, headers) -> None:
        """``assign`` each batch's ``(partition_leader_epoch, base_offset)`` of the
        ``headers`` (``BatchHeader``s, offset order); batches without an epoch (-1) are
        skipped. One file write at most."""
        with self._lock:
            entries = self._entries
            for h in headers:
                epoch = h.partition_leader_epoch
                if epoch >= 0 and _update_needed(entries, epoch, h.base_offset):
                    entries = _assigned(entries, EpochEntry(epoch, h.base_offset))[0]
            if entries != self._entries:
                self._replace(entries)

    def assign_appended(self, data) -> None:
        """``assign`` the epochs of the batches in ``data`` (whole batches, about to be
        appended; Kafka assigns each v2 batch's ``partitionLeaderEpoch`` on append). The
        common case, one batch of the latest epoch, costs one header read."""
        base, length, epoch = _PREFIX.unpack_from(data, 0)
        if epoch == self.latest_epoch and length + 12 == len(data):
            return
        self.assign_batches(_epoch_changes(data, self.latest_epoch))

    def truncate_from_end(self, end_offset: int) -> bool:
        """Remove the entries starting at or after ``end_offset`` (the log was truncated
        there); a negative offset changes nothing. Example: (2, 6) (3, 8) (4, 11) truncated
        from the end at 9 keeps (2, 6) (3, 8); at 8, (2, 6)."""
        with self._lock:
            entries = _truncated_from_end(self._entries, end_offset)[0]
            if entries == self._entries:
                return False
            self._cut(entries)
            return True

    def truncate_from_start(self, start_offset: int) -> bool:
        """The log start offset moved to ``start_offset``: remove the entries that start
        at or below it, keeping the last of them with ``start_offset`` as its start. Example:
        (2, 6) (3, 8) (4, 11) truncated from the start at 9 becomes (3, 9) (4, 11); at 8,
        (3, 8) (4, 11); at 6 or below, unchanged; at 15, (4, 15)."""
        with self._lock:
            entries = _truncated_from_start(self._entries, start_offset)[0]
            if entries == self._entries:
                return False
            self._cut(entries)
            return True

    def flush(self) -> None:
        """Write the entries to the checkpoint as they are."""
        with self._lock:
            self._replace(self._entries)

    def clear(self) -> None:
        """Remove every entry (the log was emptied: ``Log.truncate_fully``)."""
        with self._lock:
            if self._entries or self.checkpoint is not None:
                self._cut(())

    def _replace(self, entries: tuple[EpochEntry, ...]) -> None:
        """Persist ``entries`` then publish them (a failed write changes nothing): for
        assignments, which must be on disk before the batches they describe."""
        if self.checkpoint is not None:
            self.checkpoint.write(entries)
        self._entries = entries

    def _cut(self, entries: tuple[EpochEntry, ...]) -> None:
        """Publish ``entries`` (fewer: the log already lost their batches), then persist them.
        A failed write (a full disk) is logged and not raised: the log's own change is done,
        the file keeps entries past the log's data, which the next write (any change) or the
        next opening of the log (``open_leader_epoch_cache``) removes."""
        self._entries = entries
        if self.checkpoint is not None:
            try:
                self.checkpoint.write(entries)
            except OSError as exc:
                logger.error("%s: could not write %s: %s", self.name, self.checkpoint.path, exc)


class _EpochStart(NamedTuple):
    base_offset: int
    partition_leader_epoch: int


# A batch's first fields (``records/batch.py``): base offset, batch length, leader epoch; the
# magic byte follows at 16.
_PREFIX = struct.Struct(">qii")


def _epoch_changes(data, latest: int | None):
    """``_EpochStart`` of each v2 batch of ``data`` whose epoch differs from the one before
    (the first compared with ``latest``)."""
    pos, end = 0, len(data)
    while pos + 17 <= end:
        base, length, epoch = _PREFIX.unpack_from(data, pos)
        if length <= 0:
            return  # not a batch (callers pass validated ones)
        if epoch != latest and data[pos + 16] >= 2:
            yield _EpochStart(base, epoch)
            latest = epoch
        pos += 12 + length


def _update_needed(entries: tuple[EpochEntry, ...], epoch: int, start_offset: int) -> bool:
    if not entries:
        return True
    last = entries[-1]
    return epoch != last.epoch or start_offset < last.start_offset


def _assigned(entries: tuple[EpochEntry, ...], new: EpochEntry) -> tuple[tuple[EpochEntry, ...], list[EpochEntry]]:
    """``entries`` with ``new`` appended after dropping the entries from the end that
    conflict with it; the dropped ones (newest first)."""
    if not _update_needed(entries, new.epoch, new.start_offset):
        return entries, []
    keep = len(entries)
    while keep and (entries[keep - 1].epoch >= new.epoch or entries[keep - 1].start_offset >= new.start_offset):
        keep -= 1
    return entries[:keep] + (new,), list(reversed(entries[keep:]))


def _truncated_from_end(entries, end_offset: int):
    if end_offset < 0 or not entries or entries[-1].start_offset < end_offset:
        return entries, []
    keep = len(entries)
    while keep and entries[keep - 1].start_offset >= end_offset:
        keep -= 1
    return entries[:keep], list(entries[keep:])


def _truncated_from_start(entries, start_offset: int):
    drop = 0
    while drop < len(entries) and entries[drop].start_offset <= start_offset:
        drop += 1
    if drop == 0:
        return entries, []
    first = EpochEntry(entries[drop - 1].epoch, start_offset)
    return (first,) + entries[drop:], list(entries[:drop])


def open_leader_epoch_cache(directory: str, name: str, log_start_offset: int, log_end_offset: int,
                            headers_from, recover_from: int) -> LeaderEpochFileCache:
    """The cache of the log in ``directory``, made consistent with the log as it was loaded.

    ``headers_from(offset)`` yields the batch headers of the log from ``offset``
    (``Log.batch_headers``); ``recover_from``: the recovery point after an unclean stop
    (the log end offset after a clean one: nothing to recover).

    - The checkpoint is read; when it is missing while the log holds batches (a log written
      before odradek kept epochs, or a file lost) or does not parse (``CheckpointError``,
      logged at ERROR: Kafka would take the log directory offline here), the entries are
      rebuilt from every batch header of the log. That reads one header per batch, once.
    - After an unclean stop, the batches from the recovery point on are assigned again (as
      Kafka's recovery does), so an epoch whose entry a crash lost is found.
    - Entries past the log end are cut, and the first entry moved to the log start offset.
    """
    checkpoint = LeaderEpochCheckpointFile.in_directory(directory)
    try:
        entries = checkpoint.read()
    except CheckpointError as exc:
        logger.error("%s: %s; rebuilding the leader epoch cache from the log's batches", name, exc)
        entries = None
    cache = LeaderEpochFileCache(checkpoint, entries or (), name)
    if entries is None and log_end_offset > log_start_offset:
        cache.assign_batches(headers_from(log_start_offset))
        cache.flush()  # even with no entries (batches without epochs): rebuilt once only
    elif recover_from < log_end_offset:
        cache.assign_batches(headers_from(max(recover_from, log_start_offset)))
    cache.truncate_from_end(log_end_offset)
    cache.truncate_from_start(log_start_offset)
    return cache
