"""``LogFlush``: making a ``Log`` durable (a mixin of ``Log``, kept apart because it is one
concept: Kafka's flush policy, ``UnifiedLog.flush`` and the recovery point it moves).

The policy (``flush.messages``, ``flush.ms``) says when (``flush_due``); ``flush`` fsyncs the
segments holding unflushed offsets (and those whose indexes need a sync, and the directory
once its files changed), then raises the recovery point, below which recovery after a crash
trusts the log. The fsync, slow, runs outside the log's lock: appends go on meanwhile, and a
truncation that raced it (``_truncations``) leaves the recovery point where it was.

It uses the log's locks, offsets, view and clock; see ``log`` for the concurrency rules.
"""

from __future__ import annotations

from odradek.storage.file_ops import fsync_directory
from odradek.storage.log_dir_failure_channel import SyncFailed, is_log_dir_failure


class LogFlush:
    """Flush policy and flushing for ``Log`` (a mixin: its state is the log's)."""

    def flush_due(self, now_ms: int) -> int | None:
        """The offset to flush up to now, or None: all unflushed data once
        ``flush.messages`` offsets or ``flush.ms`` milliseconds have accumulated, else the
        segments rolled since the last flush (as Kafka flushes a segment when it rolls)."""
        unflushed = self._leo - self._recovery_point
        if unflushed <= 0:
            return None
        config = self.config
        if unflushed >= config.flush_messages or now_ms - self._last_flush_ms >= config.flush_ms:
            return self._leo
        active_base = self._view.segments[-1].base_offset
        if self._recovery_point < active_base:
            return active_base
        return None

    def flush(self, up_to_offset: int | None = None) -> None:
        """Make every batch below ``up_to_offset`` (default: all) durable, then move the
        recovery point there. Safe to run in another thread while appends continue. An
        OSError is told to ``io_failed`` (as ``SyncFailed``: whatever its errno, the data it
        was to make durable may be lost, so the directory fails) and raised as it came.

        Once a sync failed so (its directory failed), every later flush raises that error
        without syncing: the kernel may have dropped the unwritten pages and reported it only
        once, so a later sync would succeed and vouch for data that is not on disk."""
        failure = self._sync_failure
        if failure is not None:
            raise SyncFailed(*failure.args)  # (a new one: no traceback piling up)
        try:
            self._flush(up_to_offset)
        except OSError as e:
            lost = SyncFailed(e.errno, e.strerror) if e.errno is not None else SyncFailed(str(e))
            if is_log_dir_failure(lost):
                self._sync_failure = lost
            self.io_failed(f"flushing {self.topic}-{self.partition}", lost)
            raise

    def _flush(self, up_to_offset: int | None) -> None:
        with self._flush_lock:
            with self._lock:
                target = self._leo if up_to_offset is None else min(up_to_offset, self._leo)
                point = self._recovery_point
                view = self._view
                chosen = [
                    s
                    for s, nxt in zip(view.segments, view.next_bases())
                    if s.needs_index_sync
                    or (target > point and s.base_offset < target and (nxt is None or nxt > point))
                ]
                sync_dir, self._dir_dirty = self._dir_dirty, False
                truncations = self._truncations
            for segment in chosen:
                try:
                    segment.flush()
                except FileNotFoundError:
                    pass  # deleted meanwhile
            if sync_dir:
                fsync_directory(self.directory)
            with self._lock:
                if truncations == self._truncations:
                    self._recovery_point = max(self._recovery_point, min(target, self._leo))
                else:
                    self._dir_dirty = True  # a truncation raced us: flush again later
                self._last_flush_ms = self._clock.milliseconds()
