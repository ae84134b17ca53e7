"""``Log``: one partition's log, a list of segments in one directory.

The directory is ``<topic>-<partition>``; the segments' files are described in ``segment``,
the ``leader-epoch-checkpoint`` beside them in ``leader_epoch_checkpoint`` (the log keeps its
``LeaderEpochFileCache`` in step with its batches: ``leader_epoch_cache``).
The log end offset (LEO) is the offset the next batch gets; the log start offset is the
first offset a reader may ask for; the recovery point is the offset below which everything
is known to be on disk (flushed), so recovery after a crash starts there.

Concurrency (the copy-on-write segment list of Kafka's documentation, 'Log', on deletes):

- Appends, rolls, truncation, retention, DeleteRecords and the cleaner's swap take the log's
  lock, briefly. Each change to the segment list builds a new immutable ``SegmentList``
  and replaces the old one in one assignment.
- Reads take no lock: they read the offsets, then the current view, and binary-search that
  static snapshot while deletes proceed. A segment removed from the list has its files
  renamed ``.deleted`` and erased ``file.delete.delay.ms`` later; a reader that already
  holds a ``FileRegion`` keeps its descriptor (an unlinked file stays readable on Linux),
  and a read that finds the file gone retries on a fresh view.
- ``flush`` (``log_flush``; an fsync, slow) holds the lock only to pick the segments and
  to move the recovery point: appends go on while older data is being synced.

Time comes from the injected clock (``segment.ms`` rolls, ``flush.ms``); passes that act on
time (``delete_old_segments``, ``flush_due``) take ``now_ms`` from the caller.

Rolling by time (Kafka's ``UnifiedLog.maybeRoll``) happens only on an append: the active
segment goes once its roll clock reaches ``LogConfig.max_segment_ms`` (``segment.ms``, or for a
compacted log at most ``max.compaction.lag.ms``, so that a record in it can be compacted in
time) less the segment's ``roll_jitter_ms``. Each segment draws that jitter once, when it is
created or loaded, from the injected random source (``segment.jitter.ms``; seed it in tests).
"""

from __future__ import annotations

import logging
import os
import random
import threading
from collections.abc import Iterator

from odradek.records.batch import BatchHeader
from odradek.storage.append_info import AppendResult, LogAppendInfo
from odradek.storage.clock import Clock
from odradek.storage.config import LogConfig, RandomSource
from odradek.storage.errors import (
    InvalidAppendOffsetError,
    LogClosedError,
    OffsetOutOfRangeError,
    RecordBatchTooLargeError,
    StorageError,
)
from odradek.storage.file_handle_cache import FileHandleCache
from odradek.storage.file_region import EMPTY_REGION, FileRegion
from odradek.storage.leader_epoch_cache import open_leader_epoch_cache
from odradek.storage.log_flush import LogFlush
from odradek.storage.log_loader import LoadedLog, load_log
from odradek.storage.log_removal import LogRemoval
from odradek.storage.segment import LogSegment
from odradek.storage.segment_index import SegmentSettings
from odradek.storage.segment_list import SegmentList
from odradek.storage.timestamp_lookup import TimestampLookup

logger = logging.getLogger(__name__)

INT32_MAX = 2**31 - 1
# A read that finds its segment deleted under it retries on a fresh view this many times.
_READ_ATTEMPTS = 4
# Where segment jitter comes from unless the log is given its own source.
_JITTER_RANDOM = random.Random()


def settings_of(config: LogConfig) -> SegmentSettings:
    return SegmentSettings(config.index_interval_bytes, config.segment_index_bytes)


class Log(LogRemoval, LogFlush, TimestampLookup):
    """A partition log. Construct with ``Log.open``; data leaves it through ``LogRemoval``,
    is made durable through ``LogFlush``, and is found by time through ``TimestampLookup``."""

    def __init__(
        self,
        directory: str,
        topic: str,
        partition: int,
        config: LogConfig,
        clock: Clock,
        cache: FileHandleCache,
        loaded: LoadedLog,
        rng: RandomSource | None = None,
    ) -> None:
        self.directory = directory
        self.topic = topic
        self.partition = partition
        self.config = config
        self._rng = rng if rng is not None else _JITTER_RANDOM
        self._clock = clock
        self._cache = cache
        self._view = SegmentList.of(loaded.segments)
        self._log_start = loaded.log_start_offset
        self._leo = loaded.log_end_offset
        self._recovery_point = loaded.recovery_point
        self._lock = threading.RLock()
        self._flush_lock = threading.Lock()
        self._last_flush_ms = clock.milliseconds()
        self._dir_dirty = False
        self._sync_failure = None  # the SyncFailed that failed this log's directory (LogFlush)
        self._truncations = 0
        self._pending_deletes: list[tuple[int, LogSegment]] = []
        self._closed = False
        # Set by the partition: () -> the offset the cleaner stays below (its LSO); None: none.
        self.cleanable_limit = None
        # Set by the log manager: (what, OSError) -> None, told of this log's I/O errors
        # (its ``LogDirFailureChannel``, which may take the directory offline).
        self.io_error_handler = None
        for segment in loaded.segments:  # Kafka draws a jitter for each segment it loads
            segment.roll_jitter_ms = config.random_segment_jitter(self._rng)
        # Which leader epoch wrote which offsets (``leader_epoch_cache``): appends assign it,
        # truncation and a rising log start offset cut it (``LogRemoval``).
        self.leader_epoch_cache = open_leader_epoch_cache(
            directory, f"{topic}-{partition}", self._log_start, self._leo, self.batch_headers,
            loaded.recovery_point)

    @classmethod
    def open(
        cls,
        directory: str,
        topic: str,
        partition: int,
        config: LogConfig,
        clock: Clock,
        cache: FileHandleCache,
        *,
        recovery_point: int = 0,
        log_start_offset: int = 0,
        clean_shutdown: bool = False,
        rng: RandomSource | None = None,
    ) -> Log:
        """Open (creating if needed) the log in ``directory``, recovering it if the last
        stop was unclean (see ``log_loader``). ``rng`` draws the segments' roll jitter
        (default: a module-wide ``random.Random``)."""
        os.makedirs(directory, exist_ok=True)
        loaded = load_log(
            directory,
            settings_of(config),
            cache,
            clock.milliseconds(),
            recovery_point=recovery_point,
            log_start_offset=log_start_offset,
            clean_shutdown=clean_shutdown,
        )
        return cls(directory, topic, partition, config, clock, cache, loaded, rng)

    def __repr__(self) -> str:
        return (
            f"Log({self.topic}-{self.partition}, start={self._log_start}, end={self._leo}, "
            f"segments={len(self._view.segments)})"
        )

    # -- state --------------------------------------------------------------------------------

    @property
    def log_start_offset(self) -> int:
        return self._log_start

    @property
    def log_end_offset(self) -> int:
        return self._leo

    @property
    def recovery_point(self) -> int:
        return self._recovery_point

    @property
    def segments(self) -> tuple[LogSegment, ...]:
        """The current segment list (an immutable snapshot; the last one is active)."""
        return self._view.segments

    @property
    def active_segment(self) -> LogSegment:
        return self._view.segments[-1]

    @property
    def size(self) -> int:
        """Bytes in all segments."""
        return sum(s.size for s in self._view.segments)

    @property
    def file_cache(self) -> FileHandleCache:
        return self._cache

    @property
    def closed(self) -> bool:
        return self._closed

    def update_config(self, config: LogConfig) -> None:
        """Apply new settings (index sizes and roll jitter apply to segments created from
        now on)."""
        with self._lock:
            self.config = config

    def _check_open(self) -> None:
        if self._closed:
            raise LogClosedError(f"log {self.topic}-{self.partition} is closed")

    def _set_view(self, segments) -> None:
        self._view = SegmentList.of(segments)

    # -- append -----------------------------------------------------------------------------

    def append(self, data, info: LogAppendInfo) -> AppendResult:
        """Append the bytes of one or more validated batches whose offsets the caller
        assigned, summarized by ``info``; roll first when the active segment is full, too
        old, or its index is full.

        Raises InvalidAppendOffsetError if ``info.first_offset`` is below the log end
        offset, RecordBatchTooLargeError if the bytes cannot fit in one segment, OSError
        when the disk refuses (ENOSPC, EIO): then nothing readable changed (log end offset,
        indexes, the file cut back to its size; at most an empty active segment was
        added), and the next append tries again.

        A batch whose leader epoch is not the latest one of ``leader_epoch_cache`` is
        assigned there first (its checkpoint written before the bytes, as Kafka does): a
        leader's batches carry the epoch it assigned when it became leader
        (``assign_leader_epoch``), so this costs a comparison per batch.
        """
        size = len(data)
        if size == 0:
            raise ValueError("nothing to append")
        with self._lock:
            if self._closed:
                self._check_open()  # raises
            if info.first_offset < self._leo:
                raise InvalidAppendOffsetError(
                    f"append at {info.first_offset} below log end offset {self._leo}"
                )
            refused = self.append_refusal(size, info.first_offset, info.last_offset)
            if refused is not None:
                raise refused
            self.leader_epoch_cache.assign_appended(data)
            try:
                segment = self._maybe_roll(size, info)
                segment.append(data, info)
            except OSError:
                self._resume_active()
                raise
            self._leo = info.last_offset + 1
            return AppendResult(info.first_offset, info.last_offset, self._log_start, self._leo)

    def assign_leader_epoch(self, epoch: int) -> bool:
        """Begin leader epoch ``epoch`` at the log end offset (Kafka's
        ``maybeAssignEpochStartOffset``, when a broker becomes leader); whether the cache
        changed."""
        with self._lock:
            self._check_open()
            return self.leader_epoch_cache.assign(epoch, self._leo)

    def end_offset_for_epoch(self, epoch: int) -> tuple[int, int]:
        """``LeaderEpochFileCache.end_offset_for`` at this log's end offset: the answer to
        OffsetForLeaderEpoch."""
        return self.leader_epoch_cache.end_offset_for(epoch, self._leo)

    def append_refusal(self, size: int, first_offset: int, last_offset: int) -> StorageError | None:
        """What ``append`` refuses of ``size`` bytes at these offsets whatever the log holds
        (so a caller can check before a request appends anything): more bytes than one
        segment takes, or offsets beyond a segment's 32-bit relative offsets."""
        if size > self.config.segment_bytes:
            return RecordBatchTooLargeError(f"{size} bytes exceed segment.bytes {self.config.segment_bytes}")
        if last_offset - first_offset > INT32_MAX:
            return InvalidAppendOffsetError("offsets of one append span more than 2**31")
        return None

    def _maybe_roll(self, size: int, info: LogAppendInfo) -> LogSegment:
        segment = self._view.segments[-1]
        config = self.config
        now = self._clock.milliseconds()
        if segment.should_roll(size, info, config.segment_bytes, config.max_segment_ms, now):
            return self._roll(info.first_offset, now)
        return segment

    def _resume_active(self) -> None:
        """After a failed roll (the old segment's index files or the new segment's file
        could not be written): the last segment stays, or becomes again, the active one."""
        active = self._view.segments[-1]
        if active.sealed:
            active.unseal()
        else:
            index = active.index()
            index.resume(active.size)

    def roll(self) -> LogSegment:
        """Start a new active segment at the log end offset (no-op on an empty one)."""
        with self._lock:
            self._check_open()
            return self._roll(self._leo, self._clock.milliseconds())

    def _roll(self, base_offset: int, now_ms: int) -> LogSegment:
        view = self._view
        active = view.segments[-1]
        if active.size == 0 and active.base_offset == base_offset:
            return active
        if active.size:
            active.seal()
        # Created before the old one is retired: if it cannot be, the old one stays active.
        segment = self._new_segment(base_offset, now_ms)
        if active.size:
            kept = view.segments
        else:
            kept = view.segments[:-1]
            self._retire(active, now_ms)
        self._set_view(kept + (segment,))
        self._dir_dirty = True
        return segment

    def _new_segment(self, base_offset: int, now_ms: int) -> LogSegment:
        config = self.config
        return LogSegment.create(
            self.directory, base_offset, self._cache, settings_of(config), now_ms,
            roll_jitter_ms=config.random_segment_jitter(self._rng),
        )

    # -- reads ------------------------------------------------------------------------------

    def read(
        self,
        offset: int,
        max_bytes: int,
        max_offset: int | None = None,
        min_one: bool = True,
    ) -> FileRegion:
        """Whole batches from the one holding ``offset``, at most ``max_bytes`` of them but
        at least one whole batch when ``min_one`` (Kafka's ``minOneMessage``), none holding
        an offset at or above ``max_offset`` (the high watermark, for consumers).

        Raises OffsetOutOfRangeError outside [log start offset, log end offset]; returns an
        empty region at the log end offset or at/above ``max_offset``.
        """
        for _ in range(_READ_ATTEMPTS):
            # This order, with writers raising the log start before publishing a shorter
            # list, guarantees the view holds every batch in [start, end).
            end = self._leo
            view = self._view
            start = self._log_start
            if offset < start or offset > end:
                raise OffsetOutOfRangeError(offset, start, end)
            if offset == end or (max_offset is not None and offset >= max_offset):
                return EMPTY_REGION
            try:
                for segment in view.segments[view.floor(offset) :]:
                    region = segment.read(offset, max_bytes, max_offset, min_one)
                    if region is not None:
                        return region
                return EMPTY_REGION
            except FileNotFoundError:
                continue  # the segment was deleted under us: take a fresh view
        raise OffsetOutOfRangeError(offset, self._log_start, self._leo)

    def batch_headers(self, start_offset: int = 0) -> Iterator[BatchHeader]:
        """Headers of the batches holding offsets from ``start_offset`` on, in offset order.

        For rebuilding state kept beside the log (producer state after a restart); only
        headers are read, no record is decoded. Segments wholly below ``start_offset`` are
        skipped, and the one holding it is read from the batch holding it (its offset index
        says where), so a replay from a producer snapshot reads only what lies past it.
        """
        segments = self.segments
        for i, segment in enumerate(segments):
            if i + 1 < len(segments) and segments[i + 1].base_offset <= start_offset:
                continue
            position = 0
            if segment.base_offset < start_offset:
                found = segment.translate_offset(start_offset)
                if found is None:
                    continue
                position = found[0]
            for _, header in segment.iter_batches(position):
                if header.last_offset >= start_offset:
                    yield header

    # -- I/O errors -------------------------------------------------------------------------

    def io_failed(self, what: str, error: OSError) -> None:
        """Tell the log manager of an I/O ``error`` met doing ``what`` (the caller still
        raises or answers it)."""
        handler = self.io_error_handler
        if handler is not None:
            handler(what, error)

    # -- the cleaner's swap -----------------------------------------------------------------

    def replace_segments(
        self, old: tuple[LogSegment, ...], sizes: tuple[int, ...], new: LogSegment
    ) -> bool:
        """Swap the cleaned segment ``new`` (files suffixed ``.cleaned``) in for the run
        ``old`` if that run is still in the log unchanged: the same objects with the same
        sizes, none of them active. Return whether the swap happened.

        The swap is crash-safe (see ``LogSegment.commit_cleaned``): the rename of the
        cleaned ``.log`` to ``.swap`` is the commit point that recovery completes.
        """
        with self._lock:
            if self._closed:
                return False
            segments = self._view.segments
            try:
                i = segments.index(old[0])
            except ValueError:
                return False
            run = segments[i : i + len(old)]
            if (
                run != old
                or i + len(old) >= len(segments)
                or tuple(s.size for s in run) != sizes
            ):
                return False
            now = self._clock.milliseconds()
            new.commit_cleaned(lambda: [self._retire(s, now) for s in old])
            self._set_view(segments[:i] + (new,) + segments[i + len(old) :])
            self._dir_dirty = True
            return True

    # -- shutdown ---------------------------------------------------------------------------

    def close(self) -> None:
        """Clean close: write the active segment's indexes, make everything durable, drop
        descriptors and erase retired segments' files.

        Always closes; then raises the first OSError met, if any (a full disk refusing the
        index files: the caller must not mark the directory cleanly shut down, so that the
        next start-up recovers this log and rebuilds them; a failed sync of the data)."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            active = self._view.segments[-1]
        errors: list[OSError] = []
        _attempt(errors, active.seal)
        _attempt(errors, self.flush)
        _attempt(errors, active.flush)  # its index files, written by seal()
        for segment in self._view.segments:
            if not _attempt(errors, segment.close):
                segment.release_handles()
                self._cache.discard(segment)
        for _, segment in self._pending_deletes:
            segment.delete_files()
        self._pending_deletes = []
        if errors:
            raise errors[0]

    def abandon(self) -> None:
        """Close without flushing (the directory is being deleted)."""
        with self._lock:
            self._closed = True
            segments = self._view.segments + tuple(s for _, s in self._pending_deletes)
            self._pending_deletes = []
        for segment in segments:
            segment.release_handles()
            self._cache.discard(segment)


def _attempt(errors: list[OSError], step) -> bool:
    """Run ``step``; on OSError, note it and go on (a close finishes whatever fails)."""
    try:
        step()
        return True
    except OSError as exc:
        errors.append(exc)
        return False
