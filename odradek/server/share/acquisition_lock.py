"""Acquisition locks of one share partition (Kafka's AcquisitionLockTimerTask).

Every acquisition takes a lock for group.share.record.lock.duration.ms: one lock per
``SharePartition.acquire`` call covering every record it acquired, and a new one for records
whose lock is renewed (AcknowledgeType RENEW, KIP-1222). A record's ``InFlightState.lock_id``
names its lock; the lock keeps the offset runs it was taken for, so expiry visits only those,
and releases only the records that still carry this lock id and are still ACQUIRED.

Deadlines live in an injected ``TimerQueue`` (``odradek/coordinator/group/timer_queue.py``)
under the key ``<prefix><lock id>``; whoever drives the queue calls the popped functions,
which return the ``StateUpdate`` (or None) their expiry made (``share_partition.py``).
A lock stays registered until its deadline passes, even when all its records were
acknowledged meanwhile: expiry then finds nothing to do.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from dataclasses import dataclass, field

from odradek.coordinator.group.timer_queue import TimerQueue

__all__ = ["AcquisitionLock", "AcquisitionLocks"]


@dataclass(slots=True)
class AcquisitionLock:
    lock_id: int
    deadline_ms: int
    runs: list[tuple[int, int]] = field(default_factory=list)


class AcquisitionLocks:
    def __init__(self, timers: TimerQueue, key_prefix: str,
                 on_expiry: Callable[[AcquisitionLock], object]) -> None:
        self._timers = timers
        self._prefix = key_prefix
        self._on_expiry = on_expiry
        self._locks: dict[int, AcquisitionLock] = {}
        self._ids = itertools.count(1)

    def __len__(self) -> int:
        return len(self._locks)

    def new(self, deadline_ms: int) -> AcquisitionLock:
        lock = AcquisitionLock(next(self._ids), deadline_ms)
        self._locks[lock.lock_id] = lock
        self._timers.schedule(self._prefix + str(lock.lock_id), deadline_ms,
                              lambda: self._expire(lock.lock_id))
        return lock

    def forget_if_empty(self, lock: AcquisitionLock) -> None:
        """Drop a lock that was taken for nothing (an acquisition that found no records)."""
        if not lock.runs:
            self._locks.pop(lock.lock_id, None)
            self._timers.cancel(self._prefix + str(lock.lock_id))

    def is_live(self, lock_id: int | None) -> bool:
        return lock_id in self._locks

    def deadline(self, lock_id: int) -> int | None:
        lock = self._locks.get(lock_id)
        return None if lock is None else lock.deadline_ms

    def cancel_all(self) -> None:
        self._timers.cancel_prefix(self._prefix)
        self._locks.clear()

    def _expire(self, lock_id: int) -> object:
        lock = self._locks.pop(lock_id, None)
        return None if lock is None else self._on_expiry(lock)
