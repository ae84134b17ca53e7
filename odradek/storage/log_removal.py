"""Removing data from a ``Log``: retention, DeleteRecords, truncation (``LogRemoval``).

A mixin of ``Log`` (``log``), kept apart because it is one concept: every way bytes leave a
partition log. All of it runs under the log's lock and follows the copy-on-write rule of
``log``: a new, shorter ``SegmentList`` is published in one assignment, after the log start
offset was raised, so lock-free readers see either the old list or the new one. A segment
that leaves the list is *retired*: its files are renamed ``.deleted`` and erased
``file.delete.delay.ms`` later (``remove_deleted_files``), so a reader holding its descriptor
keeps working meanwhile.
"""

from __future__ import annotations

import logging

from odradek.storage.errors import OffsetOutOfRangeError
from odradek.storage.retention import deletable_prefix
from odradek.storage.segment import DELETED_SUFFIX, LogSegment

logger = logging.getLogger("odradek.storage.log")


class LogRemoval:
    """Retention, DeleteRecords and truncation for ``Log`` (uses its lock, view, offsets)."""

    # -- deletion ---------------------------------------------------------------------------

    def delete_old_segments(self, now_ms: int, high_watermark: int | None = None) -> int:
        """Retention: delete whole non-active segments from the oldest while any rule
        applies; return how many. Rules: the segment is wholly below the log start offset
        (any policy); with ``delete`` in cleanup.policy, its largest timestamp is more than
        ``retention.ms`` old, or the log exceeds ``retention.bytes`` by at least its size.
        The last two delete only segments wholly below ``high_watermark`` (the partition's;
        None: unbounded, for logs outside replication)."""
        with self._lock:
            if self._closed:
                return 0
            count = deletable_prefix(self._view, self._log_start, self.config, now_ms, high_watermark)
            if count:
                self._remove_prefix(count, now_ms)
            return count

    def delete_records(self, offset: int) -> int:
        """DeleteRecords: raise the log start offset to ``offset`` and drop the segments
        wholly below it; return the new log start offset. OffsetOutOfRangeError above the
        log end offset."""
        with self._lock:
            self._check_open()
            if offset > self._leo or offset < 0:
                raise OffsetOutOfRangeError(offset, self._log_start, self._leo)
            if offset > self._log_start:
                self._log_start = offset
                count = self._view.wholly_below(offset)
                if count:
                    self._remove_prefix(count, self._clock.milliseconds())
                else:
                    self.leader_epoch_cache.truncate_from_start(offset)
            return self._log_start

    def _remove_prefix(self, count: int, now_ms: int) -> None:
        segments = self._view.segments
        self._log_start = max(self._log_start, segments[count].base_offset)
        self._set_view(segments[count:])
        for segment in segments[:count]:
            self._retire(segment, now_ms)
        self.leader_epoch_cache.truncate_from_start(self._log_start)

    def _retire(self, segment: LogSegment, now_ms: int) -> None:
        """Take a segment out of service: rename its files ``.deleted``, erase them after
        ``file.delete.delay.ms`` (readers holding its descriptor keep working meanwhile)."""
        try:
            segment.change_suffix(DELETED_SUFFIX)
        except OSError as exc:
            logger.warning("could not rename %s for deletion: %s", segment.log_path, exc)
        self._pending_deletes.append((now_ms + self.config.file_delete_delay_ms, segment))
        self._dir_dirty = True

    def remove_deleted_files(self, now_ms: int) -> int:
        """Erase the files of retired segments whose delay has passed; return how many."""
        with self._lock:
            due = [s for t, s in self._pending_deletes if t <= now_ms]
            self._pending_deletes = [(t, s) for t, s in self._pending_deletes if t > now_ms]
        for segment in due:
            segment.delete_files()
        return len(due)

    # -- truncation -------------------------------------------------------------------------

    def truncate_to(self, offset: int) -> bool:
        """Remove every batch holding an offset at or above ``offset`` (replication). A batch
        that straddles ``offset`` goes whole, and the log end offset becomes its base offset
        (never below the log start offset); the leader epoch cache loses the epochs that
        began at or after the new end (also when nothing else is removed). Return whether anything changed. The caller must
        checkpoint the recovery point before appending again (LogManager.truncate_to does).

        Example, with batches [0..9] [10..19] [20..29]: ``truncate_to(25)`` and
        ``truncate_to(20)`` both leave [0..9] [10..19] and an end offset of 20;
        ``truncate_to(10)`` leaves [0..9]; ``truncate_to(0)`` empties the log.

        When ``offset`` falls in a gap after the last remaining batch of a non-empty
        segment (offsets a compaction removed), the end offset is ``offset`` until a
        restart, which reads it back from the data as the offset after the last batch.
        """
        if offset < 0:
            raise ValueError(f"cannot truncate to negative offset {offset}")
        with self._lock:
            self._check_open()
            if offset >= self._leo:
                # Nothing to remove, but an epoch this broker began as leader at the log end
                # and never wrote in must go all the same (as Kafka's truncateTo does), or a
                # follower keeps asking the new leader about it.
                self.leader_epoch_cache.truncate_from_end(self._leo)
                return False
            view = self._view
            if offset < self._log_start or offset <= view.bases[0]:
                self._truncate_fully(offset)
                return True
            now = self._clock.milliseconds()
            i = view.floor(offset)
            for segment in view.segments[i + 1 :]:
                self._retire(segment, now)
            self._set_view(view.segments[: i + 1])
            segment = view.segments[i]
            new_end = segment.truncate_to(offset)
            segment.unseal()
            self._leo = max(offset if new_end is None else new_end, self._log_start)
            if segment.size == 0 and segment.base_offset < self._leo:
                # An empty active segment named at the new end keeps that end across a
                # restart (the end offset of a log is read back from its data).
                self._roll(self._leo, now)
            self._recovery_point = min(self._recovery_point, self._leo)
            self._truncations += 1
            self._dir_dirty = True
            self.leader_epoch_cache.truncate_from_end(self._leo)
            return True

    def truncate_fully(self, new_start_offset: int) -> None:
        """Delete all data; the log restarts empty at ``new_start_offset`` (start = end)."""
        if new_start_offset < 0:
            raise ValueError(f"negative offset {new_start_offset}")
        with self._lock:
            self._check_open()
            self._truncate_fully(new_start_offset)

    def _truncate_fully(self, new_start: int) -> None:
        now = self._clock.milliseconds()
        for segment in self._view.segments:
            self._retire(segment, now)
        segment = self._new_segment(new_start, now)
        self._set_view((segment,))
        self._log_start = self._leo = self._recovery_point = new_start
        self._truncations += 1
        self._dir_dirty = True
        self.leader_epoch_cache.clear()
