"""Waiting on the event loop for appends written off it (``storage/pending_appends.py``).

The produce fast path (``server/produce_fast_path.py``) answers a request whose appends are
pending only once their writes are done: it registers them here with a callback that settles
them (log end offset, high watermark) and sends the response. The segment writer's thread
(``storage/_segment_writer.c``) signals completions on one eventfd; the loop watches it
while anything waits, and calls the callbacks in the order registered as soon as all of a
request's appends are written. The writer writes in submission order, so that order is the
order the requests were handled: responses, high watermarks and the log end offsets move in
request order, and a request is never answered before an earlier one's appends.

One ``WrittenAppends`` per event loop, watching from its first request on (several brokers
may share a loop in tests, and tests may run loops in threads); the loop that consumes the
eventfd's readiness pokes the others, so none misses a completion; a closed loop is
forgotten the first time poking it fails.
"""

from __future__ import annotations

import collections
import logging
import threading

from odradek.storage._segment_writer import collect, fileno

log = logging.getLogger("odradek.server")

_BY_LOOP: dict = {}  # event loop -> its WrittenAppends
_BY_LOOP_LOCK = threading.Lock()


def when_written(loop, pendings: list, callback) -> None:
    """Call ``callback()`` on ``loop`` once every one of ``pendings`` (``PendingAppend``s,
    begun on this loop) is written, after the callbacks registered before it."""
    with _BY_LOOP_LOCK:
        waiting = _BY_LOOP.get(loop)
        if waiting is None:
            waiting = _BY_LOOP[loop] = WrittenAppends(loop)
    waiting.add(pendings, callback)


class WrittenAppends:
    """The requests waiting for their writes on one loop, in order."""

    def __init__(self, loop) -> None:
        self._loop = loop
        self._queue: collections.deque = collections.deque()  # (pendings, callback)
        self._fd = fileno()
        loop.add_reader(self._fd, self.check)

    def add(self, pendings: list, callback) -> None:
        self._queue.append((pendings, callback))

    def check(self) -> None:
        """Run the callbacks whose appends are all written, in order (the eventfd's reader)."""
        collected = collect()  # first: a completion after it leaves the eventfd readable again
        queue = self._queue
        while queue:
            pendings, callback = queue[0]
            for pending in pendings:
                if not pending.done:
                    break
            else:
                queue.popleft()
                try:
                    callback()
                except Exception:
                    log.exception("answering a produce written off the loop failed")
                continue
            break
        # (The loop keeps watching while it lives: a request at a time would otherwise add and
        # remove the reader each time, two epoll_ctl calls.)
        with _BY_LOOP_LOCK:
            others = [w for w in _BY_LOOP.values() if w is not self] if collected else ()
        for other in others:  # this loop may have consumed their wakeup
            try:
                other._loop.call_soon_threadsafe(other.check)
            except RuntimeError:  # that loop is closed: what waited there never will
                with _BY_LOOP_LOCK:
                    if _BY_LOOP.get(other._loop) is other:
                        del _BY_LOOP[other._loop]
