"""Time as the storage layer sees it: injected, so tests can move it.

The log needs two readings: wall-clock milliseconds (Kafka's ``time.milliseconds()``: segment
roll by ``segment.ms``, the ``flush.ms`` policy, delete horizons, file deletion delays) and a
monotonic reading in seconds for measuring durations. Nothing in ``odradek.storage`` calls
``time`` directly; the broker passes a ``SystemClock`` and tests pass a ``FakeClock``.
"""

from __future__ import annotations

import threading
import time
from typing import Protocol


class Clock(Protocol):
    """A source of time."""

    def milliseconds(self) -> int:
        """Wall-clock time in milliseconds since the epoch."""

    def monotonic(self) -> float:
        """Seconds from an arbitrary origin, never going backwards."""


class SystemClock:
    """The real clock."""

    def milliseconds(self) -> int:
        return time.time_ns() // 1_000_000

    def monotonic(self) -> float:
        return time.monotonic()


class FakeClock:
    """A clock that moves only when told to; safe to share between threads."""

    def __init__(self, now_ms: int = 1_700_000_000_000) -> None:
        self._now_ms = now_ms
        self._lock = threading.Lock()

    def milliseconds(self) -> int:
        return self._now_ms

    def monotonic(self) -> float:
        return self._now_ms / 1000.0

    def advance(self, ms: int) -> None:
        """Move time forward by ``ms`` milliseconds (never backwards)."""
        if ms < 0:
            raise ValueError("a FakeClock never goes backwards")
        with self._lock:
            self._now_ms += ms

    def set(self, now_ms: int) -> None:
        """Jump to ``now_ms``, which must not be earlier than the current time."""
        with self._lock:
            if now_ms < self._now_ms:
                raise ValueError("a FakeClock never goes backwards")
            self._now_ms = now_ms
