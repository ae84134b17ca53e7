"""``LogSegment``: one ``.log`` file of batches with its offset and time indexes.

Files of a segment whose base offset is 368769, in its partition directory (Kafka's
documentation, 'Log': a file is named by the first offset it holds; zero-padded to 20 digits,
as Kafka's ``LogSegment`` files are)::

    00000000000000368769.log        batches verbatim (layout: records.batch)
    00000000000000368769.index      offset -> position (layout: offset_index)
    00000000000000368769.timeindex  timestamp -> offset (layout: time_index)
    00000000000000368769.txnindex   aborted transactions, when any (layout: transaction_index)

A suffix after the extension marks a file in transition: ``.deleted`` (removed from the log,
erased later), ``.cleaned`` (being written by the cleaner), ``.swap`` (cleaned and ready
to replace the segments it covers).

Invariants: the ``.log`` file holds ``size`` bytes of whole batches whose offsets strictly
increase and are all at or above ``base_offset``, with last offsets no more than 2**31 - 1
above it. Only the log's active segment is appended to (under the log's lock), and ``size``
grows only after the bytes are written, so a reader that reads ``size`` first sees whole
batches only. A segment is *sealed* once it stops being active: its index files are then
complete on disk and its in-memory indexes may be dropped and reloaded at will.
"""

from __future__ import annotations

import os
import threading

from odradek.records.batch import (
    BATCH_HEADER_SIZE,
    NO_TIMESTAMP,
    BatchHeader,
    read_header,
)
from odradek.records.errors import CorruptRecordError
from odradek.storage.append_info import LogAppendInfo
from odradek.storage.errors import CorruptIndexError, CorruptSegmentError
from odradek.storage.file_handle_cache import FileHandleCache, SegmentFile
from odradek.storage.file_ops import fsync_path, reserve_space, unlink_quietly
from odradek.storage.file_records import (
    iter_headers,
    iter_valid_batches,
)
from odradek.storage.segment_index import SegmentIndex, SegmentSettings
from odradek.storage.segment_reads import SegmentReads
from odradek.storage.segment_roll import SegmentRoll
from odradek.storage.transaction_index import TXN_INDEX_EXT, TransactionIndex

LOG_EXT = ".log"
INDEX_EXT = ".index"
TIME_INDEX_EXT = ".timeindex"
DELETED_SUFFIX = ".deleted"
CLEANED_SUFFIX = ".cleaned"
SWAP_SUFFIX = ".swap"
# An active segment reserves disk blocks ahead of its appends (``reserve_space``) once it
# holds this much, never more than it holds and at most RESERVE_AHEAD_MAX ahead: quiet
# partitions reserve nothing, and a broker's extra disk use is bounded per active segment.
RESERVE_FROM = 1 << 20
RESERVE_AHEAD_MAX = 16 << 20


def segment_name(base_offset: int) -> str:
    """The 20-digit file name stem of a segment."""
    return f"{base_offset:020d}"


class LogSegment(SegmentReads, SegmentRoll):
    """A segment: the ``.log`` file, its indexes, and the facts the log needs about it;
    reads are in ``SegmentReads``, timestamps and the roll tests in ``SegmentRoll``."""

    def __init__(
        self,
        directory: str,
        base_offset: int,
        cache: FileHandleCache,
        settings: SegmentSettings,
        size: int,
        created_ms: int,
        suffix: str = "",
        roll_jitter_ms: int = 0,
    ) -> None:
        self.directory = directory
        self.base_offset = base_offset
        self.settings = settings
        self.size = size
        self.created_ms = created_ms
        self.suffix = suffix
        # Drawn once per segment (``LogConfig.random_segment_jitter``): the time roll comes
        # this much before ``segment.ms`` (Kafka's ``LogSegment.rollJitterMs``).
        self.roll_jitter_ms = roll_jitter_ms
        self.sealed = True
        self._cache = cache
        self._file: SegmentFile | None = None
        self._index: SegmentIndex | None = None
        self._index_lock = threading.Lock()
        # Index files found on disk were synced before the recovery point passed them.
        self._index_synced = True
        # The largest timestamp, kept when a sealed segment's index is evicted.
        self._max_ts: tuple[int, int] | None = None
        self._first_batch_ts: int | None = None
        self._rebuilt_on_error = False
        # Disk blocks are reserved (``reserve_space``) up to here; past the size only while
        # active: sealing frees the rest.
        self._reserved_to = 0
        self.txn_index = TransactionIndex(self._txn_index_path)

    def __repr__(self) -> str:
        return f"LogSegment({self.log_path!r}, size={self.size}, sealed={self.sealed})"

    # -- creation -------------------------------------------------------------------------

    @classmethod
    def create(
        cls,
        directory: str,
        base_offset: int,
        cache: FileHandleCache,
        settings: SegmentSettings,
        now_ms: int,
        suffix: str = "",
        roll_jitter_ms: int = 0,
    ) -> LogSegment:
        """A new, empty, active segment (any stale files of the same name are replaced)."""
        seg = cls(directory, base_offset, cache, settings, 0, now_ms, suffix, roll_jitter_ms)
        for path in (seg.index_path, seg.time_index_path, seg._txn_index_path()):
            unlink_quietly(path)
        file = SegmentFile(seg.log_path, create=True)
        os.ftruncate(file.fd, 0)
        seg._file = file
        seg._index = SegmentIndex(base_offset, settings)
        seg.sealed = False
        cache.touch(seg)
        return seg

    @classmethod
    def open(
        cls,
        directory: str,
        base_offset: int,
        cache: FileHandleCache,
        settings: SegmentSettings,
        now_ms: int,
        suffix: str = "",
    ) -> LogSegment:
        """An existing segment, sealed; its indexes load (and are checked) on first use."""
        path = os.path.join(directory, segment_name(base_offset) + LOG_EXT + suffix)
        return cls(directory, base_offset, cache, settings, os.stat(path).st_size, now_ms, suffix)

    # -- paths and files --------------------------------------------------------------------

    def _path(self, ext: str) -> str:
        return os.path.join(self.directory, segment_name(self.base_offset) + ext + self.suffix)

    @property
    def log_path(self) -> str:
        return self._path(LOG_EXT)

    @property
    def index_path(self) -> str:
        return self._path(INDEX_EXT)

    @property
    def time_index_path(self) -> str:
        return self._path(TIME_INDEX_EXT)

    def _txn_index_path(self) -> str:
        return self._path(TXN_INDEX_EXT)

    def handle(self) -> SegmentFile:
        """The open ``.log`` file (opened now if the cache had evicted it)."""
        file = self._file
        if file is None:
            file = SegmentFile(self.log_path)
            self._file = file
        self._cache.touch(self)
        return file

    def release_handles(self) -> None:
        """FileHandleCache eviction: drop the descriptor and, if sealed, the indexes."""
        self._file = None
        index = self._index
        if self.sealed and index is not None:
            self._max_ts = index.max_timestamp
            self._index = None

    def change_suffix(self, suffix: str) -> None:
        """Rename the segment's files (those that exist) to carry ``suffix``."""
        old = (self.log_path, self.index_path, self.time_index_path, self._txn_index_path())
        self.suffix = suffix
        new = (self.log_path, self.index_path, self.time_index_path, self._txn_index_path())
        for src, dst in zip(old, new):
            try:
                os.rename(src, dst)
            except FileNotFoundError:
                if src == old[0]:
                    raise

    def delete_files(self) -> None:
        """Erase the segment's files (open descriptors keep working until dropped)."""
        self._cache.discard(self)
        self._file = None
        for path in (self.log_path, self.index_path, self.time_index_path, self._txn_index_path()):
            unlink_quietly(path)

    # -- indexes ----------------------------------------------------------------------------

    def index(self) -> SegmentIndex:
        """The segment's indexes, loaded and sanity-checked on first use."""
        index = self._index
        if index is None:
            with self._index_lock:
                index = self._index
                if index is None:
                    index = self._load_index()
                    self._index = index
        self._cache.touch(self)
        return index

    def _load_index(self) -> SegmentIndex:
        """Load the index files; rebuild them from the log when missing or failing a check:
        the sanity checks of the files, the last offset entry pointing at a batch that can
        hold its offset, and a readable run of batches after the last time index entry."""
        try:
            index = SegmentIndex.from_files(
                self.base_offset, self.settings, self.index_path, self.time_index_path, self.size
            )
            self._check_index_target(index)
            self._fold_timestamps_after_last_entry(index)
        except (OSError, EOFError, CorruptIndexError, CorruptRecordError, CorruptSegmentError):
            return self._rebuild_index()
        return index

    def _check_index_target(self, index: SegmentIndex) -> None:
        if not len(index.offsets):
            return
        offset, position = index.offsets.last_entry()
        header = read_header(self.handle().read_exact(position, BATCH_HEADER_SIZE))
        if header.magic != 2 or not self.base_offset <= header.base_offset <= offset:
            raise CorruptIndexError(f"{self.index_path}: entry ({offset}, {position}) is stale")

    def _fold_timestamps_after_last_entry(self, index: SegmentIndex) -> None:
        """Kafka's ``loadLargestTimestamp``: batches after the time index's last entry may
        hold a larger timestamp (a short or emptied time index cannot hide one)."""
        _, position = index.offsets.lookup(index.max_timestamp[1])
        for _, header in iter_headers(self.handle(), position, self.size):
            if header.max_timestamp > index.max_timestamp[0]:
                index.max_timestamp = (header.max_timestamp, header.last_offset)

    def _rebuild_index(self) -> SegmentIndex:
        """Rebuild both indexes from the valid prefix of the ``.log`` file (no truncation)."""
        index, _ = self._scan_valid(self.handle(), self.size)
        if self.sealed and self.suffix != DELETED_SUFFIX:
            self._try_write_index(index)  # (a retired segment's files must not come back)
        return index

    def _scan_valid(self, file: SegmentFile, size: int) -> tuple[SegmentIndex, int]:
        """Index every valid batch from position 0; return the index and the valid end."""
        index = SegmentIndex(self.base_offset, self.settings)
        end = 0
        self._first_batch_ts = None
        for pos, h in iter_valid_batches(file, 0, size, self.base_offset):
            if self._first_batch_ts is None:
                self._first_batch_ts = h.max_timestamp
            index.track(pos, h.size, h.last_offset, h.max_timestamp, h.last_offset)
            end = pos + h.size
        if self.sealed:
            index.seal()
        return index, end

    def _write_index(self, index: SegmentIndex) -> None:
        """Write both index files; on failure (a full disk) remove them instead, so that no
        torn or stale file is read back: the next load rebuilds them from the log."""
        try:
            index.write(self.index_path, self.time_index_path)
        except OSError:
            for path in (self.index_path, self.time_index_path):
                unlink_quietly(path)
            raise
        self._index_synced = False

    def _try_write_index(self, index: SegmentIndex) -> None:
        """``_write_index`` where the files are only a cache of the in-memory index just
        rebuilt (loading, recovery): a full disk must not stop the log from opening."""
        try:
            self._write_index(index)
        except OSError:
            pass

    # -- facts ------------------------------------------------------------------------------

    def read_next_offset(self) -> int:
        """The offset after the last batch (the base offset when empty); scans from the last
        index entry. Raises CorruptSegmentError if the tail is not whole batches."""
        _, position = self.index().offsets.last_entry()
        last: BatchHeader | None = None
        for _, header in iter_headers(self.handle(), position, self.size):
            last = header
        return last.next_offset if last is not None else self.base_offset

    # -- writes -----------------------------------------------------------------------------

    def append(self, data, info: LogAppendInfo) -> int:
        """Write already-validated batches at the end; return their position. The index
        gets entries by the rule in ``segment_index``."""
        index = self._index
        assert not self.sealed and index is not None, "append to a sealed segment"
        position = self.size
        size = len(data)
        file = self._file
        # The one LRU touch of an append, skipped (as touch itself would) while this segment
        # is the cache's most recent; one pwrite nearly always writes everything.
        if file is None or self._cache.last is not self:
            file = self.handle()
        if position + size > self._reserved_to and position + size >= RESERVE_FROM:
            self._reserve_ahead(file, position, position + size)
        try:
            written = os.pwrite(file.fd, data, position)
            if written != size:
                file.write_at(memoryview(data)[written:], position + written)
        except OSError:
            self.cut_back(file.fd)
            raise
        self.size = position + size
        if self._first_batch_ts is None:
            self._first_batch_ts = info.max_timestamp
        ts_offset = min(max(info.offset_of_max_timestamp, info.first_offset), info.last_offset)
        index.track(position, size, info.last_offset, info.max_timestamp, ts_offset)
        return position

    def cut_back(self, fd: int) -> None:
        """After a failed write (ENOSPC, EIO): cut the file back to ``size``, so no torn
        batch stays past the end for a restart to find or a shorter append to leave behind.
        Shrinking a file needs no free space; if even that fails, recovery truncates the
        torn tail after an unclean restart, and the next append overwrites it meanwhile."""
        try:
            os.ftruncate(fd, self.size)
        except OSError:
            pass
        self._reserved_to = 0

    def _reserve_ahead(self, file: SegmentFile, position: int, end: int) -> None:
        """Reserve the blocks of an append at ``position`` up to ``end``, and as many again
        after it up to ``RESERVE_AHEAD_MAX`` (so a busy segment asks once per 16 MiB, and a
        segment never holds more reserved than written); on failure, stop asking."""
        ahead = min(end, RESERVE_AHEAD_MAX)
        if reserve_space(file.fd, position, end - position + ahead):
            self._reserved_to = end + ahead
        else:
            self._reserved_to = 1 << 62

    def seal(self) -> None:
        """Stop being active: record the largest timestamp in the time index and write both
        index files, trimmed to their entries; free the blocks reserved past the end."""
        if self.sealed:
            return
        if self._reserved_to > self.size:
            os.ftruncate(self.handle().fd, self.size)  # to its own size: frees only the rest
            self._reserved_to = 0
        index = self.index()
        index.seal()
        self._write_index(index)
        self.sealed = True

    def unseal(self) -> None:
        """Become the active segment again (after load or truncation): pin the indexes."""
        if not self.sealed:
            return
        index = self.index()
        self.sealed = False
        self._index = index  # eviction may have dropped it between the two lines above
        index.resume(self.size)

    def recover(self) -> int:
        """Validate every batch (size in file, CRC, offsets), truncate at the first invalid
        byte, rebuild both indexes; return the number of bytes removed."""
        file = self.handle()
        file_size = file.size()
        index, end = self._scan_valid(file, file_size)
        if end < file_size:
            os.ftruncate(file.fd, end)
        self.size = end
        self._index = index
        if self.sealed:
            self._try_write_index(index)
        return file_size - end

    def truncate_to(self, offset: int) -> int | None:
        """Remove every batch holding an offset at or above ``offset``; the segment becomes
        active. Return the new end offset: ``offset``, or the base offset of the first batch
        removed if that batch began below ``offset``. None if nothing was removed."""
        found = self.translate_offset(offset)
        if found is None:
            return None
        position, _, base, _ = found
        new_end = min(offset, base)
        self.unseal()
        file = self.handle()
        os.ftruncate(file.fd, position)  # also frees any blocks reserved past it
        self.size = position
        self._reserved_to = 0
        index = self.index()
        if not index.truncate_to(new_end, position):
            index.max_timestamp = (NO_TIMESTAMP, self.base_offset)
            for _, h in iter_headers(file, 0, position):
                if h.max_timestamp > index.max_timestamp[0]:
                    index.max_timestamp = (h.max_timestamp, h.last_offset)
        if position == 0:
            self._first_batch_ts = None
        self.txn_index.truncate_to(new_end)
        return new_end

    @property
    def needs_index_sync(self) -> bool:
        """True for a sealed segment whose index files were written but not fsynced."""
        return self.sealed and not self._index_synced

    def commit_cleaned(self, retire_old) -> None:
        """Give a cleaned segment (suffix ``.cleaned``, all files fsynced) its final names.

        Order, for crash safety: rename the ``.log`` to ``.swap`` (the commit point: from
        here recovery finishes the swap), call ``retire_old()`` (the replaced segments'
        files become ``.deleted``), then rename the ``.log`` and both index files to their
        final names. A crash before the first rename leaves ``.cleaned`` files that loading
        deletes; after it, loading drops the covered segments and renames the swap file,
        rebuilding its indexes.
        """
        assert self.suffix == CLEANED_SUFFIX
        swap = self._path(LOG_EXT).removesuffix(CLEANED_SUFFIX) + SWAP_SUFFIX
        os.rename(self.log_path, swap)
        retire_old()
        cleaned = (self.index_path, self.time_index_path, self._txn_index_path())
        self.suffix = ""
        os.rename(swap, self.log_path)
        for src, dst in zip(cleaned, (self.index_path, self.time_index_path, self._txn_index_path())):
            if src != cleaned[2] or os.path.exists(src):  # (no .txnindex without aborted transactions)
                os.rename(src, dst)

    def flush(self) -> None:
        """Make the ``.log`` file durable, and a sealed segment's index files once.

        ``fdatasync``: it writes the data and the metadata needed to read it back (the file
        size), skipping timestamps; appends need nothing more."""
        file = self.handle()  # a local reference keeps the descriptor open during the sync
        os.fdatasync(file.fd)
        self.txn_index.flush()
        if self.sealed and not self._index_synced:
            for path in (self.index_path, self.time_index_path):
                fsync_path(path)
            self._index_synced = True

    def close(self) -> None:
        """Clean shutdown: write the indexes out (sealing), drop the descriptor."""
        self.seal()
        self._cache.discard(self)
        self._file = None
