"""``LogRateLimiter``: repeated log lines of one kind, at most one per interval.

Bad input and damaged data repeat: a consumer stuck on a corrupt batch fetches it several
times a second, a fuzzer sends thousands of malformed frames. One line per occurrence would
bury everything else in the log (and cost the broker more than answering). The limiter logs
the first occurrence of a *key*, then at most one line per ``interval`` seconds for that key;
the line that ends a quiet spell says how many were left out::

    closing connection from 127.0.0.1:50312: malformed FETCH v12: ...
    closing connection from 127.0.0.1:50377: malformed FETCH v12: ... (41 similar messages suppressed)

A key names the kind of event, not its details: the caller chooses it, and ``message_key``
makes one from a message by dropping its numbers (offsets, sizes, ports, versions), so
"unsupported API 9999 v0" and "unsupported API 12 v77" count as one kind.

Memory is bounded: at most ``max_keys`` kinds are tracked; when the table is full, kinds
whose interval has passed with nothing suppressed are forgotten, and if that frees nothing
the newcomer shares one overflow key (so a flood of ever-new kinds is limited as one kind).
The clock is a callable returning seconds (``time.monotonic`` by default), so tests drive it.
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Callable, Hashable

# One line per kind every 10 s: a stuck consumer (several fetches a second) or a fuzzer (tens
# of thousands of frames a minute) then costs six lines a minute per kind of event.
DEFAULT_INTERVAL_S = 10.0
# Kinds tracked at once. Keys are short tuples or strings (~200 bytes each with their slot):
# the table stays under ~200 KiB however varied the events.
DEFAULT_MAX_KEYS = 1024
OVERFLOW_KEY = ("log_limiter", "overflow")

_NUMBERS = re.compile(r"\d+")


def message_key(text: str) -> str:
    """The kind of a message: its text with every run of digits replaced by ``#``."""
    return _NUMBERS.sub("#", text)


class LogRateLimiter:
    """Logs the first event of each key, then at most one per ``interval`` seconds."""

    __slots__ = ("interval", "max_keys", "_clock", "_keys", "_next_purge")

    def __init__(
        self,
        interval: float = DEFAULT_INTERVAL_S,
        max_keys: int = DEFAULT_MAX_KEYS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.interval = interval
        self.max_keys = max_keys
        self._clock = clock
        # key -> [time before which lines are suppressed, lines suppressed since the last one]
        self._keys: dict[Hashable, list] = {}
        self._next_purge = 0.0  # a full table is scanned for idle kinds at most once an interval

    def log(self, logger: logging.Logger, level: int, key: Hashable, msg: str, *args,
            exc_info=None) -> bool:
        """Log ``msg % args`` on ``logger`` unless a line of ``key`` was logged less than
        ``interval`` seconds ago; return whether it was logged."""
        if not logger.isEnabledFor(level):
            return False
        now = self._clock()
        entry = self._keys.get(key)
        if entry is None:
            key = self._admit(key, now)
            entry = self._keys.setdefault(key, [now, 0])
        if now < entry[0]:
            entry[1] += 1
            return False
        suppressed = entry[1]
        entry[0], entry[1] = now + self.interval, 0
        if suppressed:
            msg += " (%d similar messages suppressed)"
            args = (*args, suppressed)
        logger.log(level, msg, *args, exc_info=exc_info)
        return True

    def warning(self, logger: logging.Logger, key: Hashable, msg: str, *args) -> bool:
        return self.log(logger, logging.WARNING, key, msg, *args)

    def error(self, logger: logging.Logger, key: Hashable, msg: str, *args, exc_info=None) -> bool:
        return self.log(logger, logging.ERROR, key, msg, *args, exc_info=exc_info)

    def _admit(self, key: Hashable, now: float) -> Hashable:
        """``key`` if the table has room for it (after forgetting idle kinds), else the
        overflow key."""
        keys = self._keys
        if len(keys) < self.max_keys:
            return key
        if now >= self._next_purge:
            idle = [k for k, (until, suppressed) in keys.items() if until <= now and not suppressed]
            for k in idle:
                del keys[k]
            self._next_purge = now + self.interval
        return key if len(keys) < self.max_keys else OVERFLOW_KEY
