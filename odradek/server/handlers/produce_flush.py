"""Group commit for ``flush.messages``: one fsync in flight per log, shared by every waiter.

A produce to a log whose unflushed offsets reached ``flush.messages`` must not be answered
before its batches are durable (Kafka flushes inside the append). An fsync takes 0.1-10 ms
(LIMITS.md), far longer than an append, so each log has one ``LogFlusher``:

- a produce that needs a flush registers ``(offset, future)``: the log end offset after its
  append, and a future resolved once the recovery point reaches it;
- while no flush of that log runs, one starts in a worker thread (``Log.flush()``: everything
  appended so far, not just this request's batches);
- when it finishes, every waiter below the new recovery point is resolved; if waiters
  remain (their batches arrived during that fsync) exactly one more flush starts, and it
  covers all of them.

So N produces arriving during one fsync cost one more fsync, not N, and no worker thread sits
blocked behind another's flush. A failed fsync fails every waiter of that flush with the
OSError (the produce answers KAFKA_STORAGE_ERROR) and the next waiter starts a new attempt,
which fails at once if that error failed the log's directory (``LogFlush.flush``: no sync is
trusted after one failed), so no produce waiting on it is answered NONE.
A truncation under a waiter (the log end fell below its offset) resolves it once the log is
flushed to its new end: there is nothing more of it to make durable.
"""

from __future__ import annotations

import asyncio
import weakref


class LogFlusher:
    """The single flush in flight of one log and the produces waiting on it."""

    def __init__(self, log) -> None:
        self.log = log
        self.flushes = 0  # flushes started (for tests and metrics)
        self._waiters: list[tuple[int, asyncio.Future]] = []
        self._running = False

    def flush_through(self, offset: int) -> asyncio.Future:
        """A future resolved once every offset below ``offset`` is durable."""
        loop = asyncio.get_running_loop()
        fut = loop.create_future()
        if self._is_durable(offset):
            fut.set_result(None)
            return fut
        self._waiters.append((offset, fut))
        if not self._running:
            self._start(loop)
        return fut

    def _is_durable(self, offset: int) -> bool:
        log = self.log
        return log.recovery_point >= min(offset, log.log_end_offset)

    def _start(self, loop) -> None:
        self._running = True
        self.flushes += 1
        loop.run_in_executor(None, self.log.flush).add_done_callback(self._done)

    def _done(self, flush: asyncio.Future) -> None:
        self._running = False
        error = None
        if flush.cancelled():
            error = asyncio.CancelledError()
        elif flush.exception() is not None:
            error = flush.exception()
        remaining = []
        for offset, fut in self._waiters:
            if fut.done():
                continue  # the producer gave up (its connection closed)
            if error is not None:
                fut.set_exception(error)
            elif self._is_durable(offset):
                fut.set_result(None)
            else:
                remaining.append((offset, fut))
        self._waiters = remaining
        if remaining:
            self._start(asyncio.get_running_loop())


_flushers: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def flusher_of(log) -> LogFlusher:
    flusher = _flushers.get(log)
    if flusher is None:
        flusher = _flushers[log] = LogFlusher(log)
    return flusher


async def flush_all(flushes) -> list[BaseException | None]:
    """Wait until each ``(log, up_to_offset)`` is durable; per entry, None or the error."""
    futures = [flusher_of(log).flush_through(up_to) for log, up_to in flushes]
    return await asyncio.gather(*futures, return_exceptions=True)
