"""Appends written off the event loop, and the log's lock that waits for them.

The produce fast path (``server/produce_fast_path.py``) hands a large append's ``pwrite`` to
the segment writer's thread (``storage/_segment_writer.c``), so that writing one request into
the page cache overlaps receiving and validating the next. Such an append is *pending* from
``begin`` until it is *settled*: applied (written; the segment's size and indexes and the log
end offset then move as ``Log.append`` moves them) or failed.

Contract (Kafka has no counterpart: its request handler threads write synchronously):

- **Visibility.** Until an append is applied, nothing a reader sees moved: the log end
  offset (the end fetches read to), the segment's size and indexes, the high watermark
  (which its caller moves after settling). A fetch can never see bytes not yet written.
- **Order.** Appends of one log are applied in the order begun, each at the end of the one
  before (``plan_write`` places it after the pending bytes; the writer writes in submission
  order). ``next_offset`` is where the next append's offsets begin; ``Log.log_end_offset``
  stays the applied end.
- **Everything else waits.** Any other change to the log (``Log.append``, a roll,
  truncation, retention, close) takes the log's lock, and taking it settles every pending
  append first, waiting for their writes (``PendingAppends.acquire``): those never see a
  pending append, so they need no change. Only ``begin`` and ``settle(block=False)`` take the
  lock without waiting.
- **Errors.** A failed write (ENOSPC, EIO) fails that append and every one pending behind it
  in the log (their offsets followed its): their writes are waited for, the file is cut back
  to the failed append's position (``LogSegment.cut_back``) and each gets the OSError as its
  ``error``, so the caller answers its producer KAFKA_STORAGE_ERROR; the log is as it was
  before the failed append, and the next append tries again.
- **Crash recovery** is unchanged: bytes past the applied end are a torn tail that
  ``log_loader`` truncates, as a crash during a synchronous write leaves.

A ``PendingAppend``'s ``state``: PENDING, then APPLIED or an OSError.
"""

from __future__ import annotations

import collections
import os
import threading

from odradek.storage._fast_append import apply_write, plan_write
from odradek.storage._segment_writer import submit

PENDING = None
APPLIED = 0


class PendingAppend:
    """One append queued on the segment writer: ``size`` bytes at ``position`` of
    ``segment``, offsets and timestamps ``info`` (first, last, max timestamp, its offset)."""

    __slots__ = ("segment", "file", "position", "size", "info", "job", "state")

    def __init__(self, segment, file, position: int, size: int, info: tuple, job) -> None:
        self.segment = segment
        self.file = file  # the SegmentFile written to
        self.position = position
        self.size = size
        self.info = info
        self.job = job  # a _segment_writer.WriteJob: holds the bytes and the file until written
        self.state: int | OSError | None = PENDING

    @property
    def done(self) -> bool:
        """The write finished: ``settle`` can apply (or fail) it without waiting."""
        return self.job.done


class PendingAppends:
    """One log's pending appends, and the log's lock (``Log._lock``: an RLock that settles
    them when taken; see the module docstring). ``raw`` is the RLock itself."""

    __slots__ = ("raw", "_log", "queue", "next_offset", "bytes")

    def __init__(self, log) -> None:
        self.raw = threading.RLock()
        self._log = log
        self.queue: collections.deque[PendingAppend] = collections.deque()
        self.next_offset = 0  # the last pending append's last offset + 1 (while any)
        self.bytes = 0  # bytes pending, all in the active segment

    # --- the lock ---------------------------------------------------------------------------
    def acquire(self, blocking: bool = True, timeout: float = -1) -> bool:
        got = self.raw.acquire(blocking, timeout)
        if got and self.queue:
            try:
                self._settle(True)
            except BaseException:
                self.raw.release()
                raise
        return got

    def release(self) -> None:
        self.raw.release()

    def __enter__(self) -> PendingAppends:
        self.acquire()
        return self

    def __exit__(self, *exc) -> None:
        self.raw.release()

    # --- appends ----------------------------------------------------------------------------
    def begin(self, data, info: tuple) -> PendingAppend | None:
        """Queue the append of ``data`` (whole validated batches, offsets assigned from
        ``next_offset``) with ``info``; None, with nothing changed, where ``Log.append`` must
        do it (a roll due, the log closed: ``_fast_append.plan_write``'s refusals). ``data``
        must not change until the append is settled."""
        size = len(data)
        with self.raw:
            queue = self.queue
            if queue:
                planned = plan_write(self._log, size, info, self.next_offset, self.bytes, len(queue))
            else:
                planned = plan_write(self._log, size, info, self._log._leo, 0, 0)
            if planned is None:
                return None
            segment, file, position, reserve_due = planned
            if reserve_due:
                segment._reserve_ahead(file, position, position + size)
            pending = PendingAppend(segment, file, position, size, info, submit(file, data, position))
            queue.append(pending)
            self.next_offset = info[1] + 1
            self.bytes += size
            return pending

    def settle(self, block: bool = True) -> None:
        """Apply, in order, the pending appends whose writes are done; with ``block``, wait
        for all of them."""
        with self.raw:
            if self.queue:
                self._settle(block)

    def _settle(self, block: bool) -> None:
        queue = self.queue
        log = self._log
        while queue:
            pending = queue[0]
            job = pending.job
            if not job.done:
                if not block:
                    return
                job.wait()
            if job.error:
                self._fail_all()
                return
            apply_write(log, pending.segment, pending.size, pending.info, pending.position)
            queue.popleft()
            self.bytes -= pending.size
            pending.state = APPLIED

    def _fail_all(self) -> None:
        """The head's write failed: fail it and everything behind it (module docstring)."""
        queue = self.queue
        head = queue[0]
        for pending in queue:
            pending.job.wait()  # none may land after the cut
        error = OSError(head.job.error, os.strerror(head.job.error))
        head.segment.cut_back(head.file.fd)
        for pending in queue:
            pending.state = error
        queue.clear()
        self.bytes = 0
