"""The aborted transaction index: one ``.txnindex`` file per segment (Kafka's ``TransactionIndex``).

When an ABORT marker is appended to a segment, the transaction it ends is recorded in that
segment's index, so that a ``read_committed`` fetch can tell consumers which producers' data
in the range it returns belongs to aborted transactions (Fetch's ``aborted_transactions``).
Committed transactions are not recorded: consumers deliver everything else.

File layout (Kafka's ``AbortedTxn``): a sequence of 34-byte entries, big-endian::

    offset  size  field
         0     2  version              0
         2     8  producer_id
        10     8  first_offset         first offset of the aborted transaction's data
        18     8  last_offset          offset of its ABORT marker
        26     8  last_stable_offset   the partition's LSO once the marker was appended

Invariants: entries are in marker order, so ``last_offset`` strictly increases; every
``last_offset`` lies in the segment (at or above its base offset, below its end). The file
is created on the first entry; a segment without aborted transactions has none.

Recovery: the file is a cache of what the log's markers say. After an unclean stop the
producer state's replay of the batches past its snapshot re-adds the entries of the ABORT
markers it meets (``append`` ignores one already present), and the log end's segment's index
is cut to the log end first (``truncate_to``), so a rebuilt or damaged-and-cut log and its
indexes agree. A torn last entry (a crash mid-write) is ignored when reading.

Durability: appends are written at once (page cache, so they survive a kill -9) and
fsynced when the segment is flushed (``flush``), like the other indexes.
"""

from __future__ import annotations

import os
import struct
import threading
from bisect import bisect_right
from dataclasses import dataclass

from odradek.storage.file_ops import fsync_path, unlink_quietly

TXN_INDEX_EXT = ".txnindex"
ABORTED_TXN_VERSION = 0
_ENTRY = struct.Struct(">hqqqq")
ENTRY_SIZE = _ENTRY.size  # 34


@dataclass(frozen=True, slots=True)
class AbortedTxn:
    """One entry of the index (see the module docstring)."""

    producer_id: int
    first_offset: int
    last_offset: int
    last_stable_offset: int

    def encode(self) -> bytes:
        return _ENTRY.pack(ABORTED_TXN_VERSION, self.producer_id, self.first_offset,
                           self.last_offset, self.last_stable_offset)


@dataclass(frozen=True, slots=True)
class TxnIndexSearchResult:
    """What ``collect`` found; ``complete``: no later segment can hold more (an entry's LSO
    reached the upper bound, so every transaction overlapping the range ended before)."""

    aborted: list[AbortedTxn]
    complete: bool


def decode_entries(data: bytes) -> list[AbortedTxn]:
    """The entries of a ``.txnindex`` file's bytes, up to the first torn or unknown one."""
    entries = []
    previous = None
    for pos in range(0, len(data) - ENTRY_SIZE + 1, ENTRY_SIZE):
        version, pid, first, last, lso = _ENTRY.unpack_from(data, pos)
        if version != ABORTED_TXN_VERSION or (previous is not None and last <= previous):
            break
        entries.append(AbortedTxn(pid, first, last, lso))
        previous = last
    return entries


class TransactionIndex:
    """The ``.txnindex`` of one segment; its path follows the segment's (``path_of()`` gives
    it, so a renamed segment renames nothing here). Entries are read once and kept."""

    def __init__(self, path_of) -> None:
        self._path_of = path_of
        self._entries: list[AbortedTxn] | None = None
        self._dirty = False
        self._lock = threading.Lock()

    @property
    def path(self) -> str:
        return self._path_of()

    def entries(self) -> list[AbortedTxn]:
        """All entries, oldest first (loaded from the file on first use)."""
        entries = self._entries
        if entries is None:
            with self._lock:
                entries = self._entries
                if entries is None:
                    entries = self._entries = self._read()
        return entries

    def _read(self) -> list[AbortedTxn]:
        try:
            with open(self.path, "rb") as f:
                return decode_entries(f.read())
        except FileNotFoundError:
            return []

    def __len__(self) -> int:
        return len(self.entries())

    def append(self, txn: AbortedTxn) -> bool:
        """Record ``txn``; False (nothing written) when an entry with its marker offset is
        there already (a replay). Raises ValueError when its marker offset is below the last
        entry's (markers are appended in offset order), OSError from the disk."""
        entries = self.entries()
        with self._lock:
            if entries and txn.last_offset <= entries[-1].last_offset:
                if any(e.last_offset == txn.last_offset for e in entries):
                    return False
                raise ValueError(f"aborted transaction {txn} does not follow {entries[-1]} in {self.path}")
            self._write_at(len(entries) * ENTRY_SIZE, txn.encode())
            entries.append(txn)
            self._dirty = True
            return True

    def _write_at(self, position: int, data: bytes) -> None:
        fd = os.open(self.path, os.O_WRONLY | os.O_CREAT, 0o644)
        try:
            os.ftruncate(fd, position)  # drops a torn entry a crash may have left
            os.pwrite(fd, data, position)
        finally:
            os.close(fd)

    def truncate_to(self, offset: int) -> None:
        """Forget the entries whose marker is at or above ``offset`` (the segment was cut
        there)."""
        entries = self.entries()
        keep = sum(1 for e in entries if e.last_offset < offset)
        if keep == len(entries):
            return
        with self._lock:
            del entries[keep:]
            if keep == 0:
                unlink_quietly(self.path)
            else:
                fd = os.open(self.path, os.O_WRONLY)
                try:
                    os.ftruncate(fd, keep * ENTRY_SIZE)
                finally:
                    os.close(fd)
            self._dirty = keep > 0

    def reset(self) -> None:
        """Forget every entry and remove the file (a segment rebuilt from scratch)."""
        with self._lock:
            self._entries = []
            self._dirty = False
            unlink_quietly(self.path)

    def forget(self) -> None:
        """Drop the entries kept in memory (the file was renamed or deleted under us)."""
        self._entries = None

    def collect(self, fetch_offset: int, upper_bound: int) -> TxnIndexSearchResult:
        """Kafka's ``collectAbortedTxns``: the entries of transactions overlapping
        ``[fetch_offset, upper_bound)`` (marker at or after ``fetch_offset``, data beginning
        before ``upper_bound``), and whether the search may stop here."""
        found = []
        for txn in self.entries():
            if txn.last_offset >= fetch_offset and txn.first_offset < upper_bound:
                found.append(txn)
            if txn.last_stable_offset >= upper_bound:
                return TxnIndexSearchResult(found, True)
        return TxnIndexSearchResult(found, False)

    def flush(self) -> None:
        """fsync the file if entries were written since the last flush."""
        if not self._dirty:
            return
        self._dirty = False
        fsync_path(self.path)


def segment_holding(segments, offset: int) -> int:
    """The position in ``segments`` (ascending base offsets) of the one holding ``offset``
    (the first one for an offset below them all)."""
    return max(bisect_right([s.base_offset for s in segments], offset) - 1, 0)


def collect_aborted(segments, fetch_offset: int, upper_bound: int) -> list[AbortedTxn]:
    """Kafka's ``collectAbortedTransactions``: the aborted transactions with data in
    ``[fetch_offset, upper_bound)``, searched in the ``txn_index`` of ``segments`` from the
    one holding ``fetch_offset`` on, until an entry shows that no later one can overlap the
    range (its LSO reached ``upper_bound``)."""
    found: list[AbortedTxn] = []
    for segment in segments[segment_holding(segments, fetch_offset):]:
        result = segment.txn_index.collect(fetch_offset, upper_bound)
        found.extend(result.aborted)
        if result.complete:
            break
    return found
