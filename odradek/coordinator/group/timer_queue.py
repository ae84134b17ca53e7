"""``TimerQueue``: named deadlines for a coordinator shard, without a clock or an event loop.

The shard schedules work by name (``heartbeat:<group>:<member>``, ``join:<group>``, ...);
scheduling a name again replaces its previous deadline, which is how a heartbeat pushes a
member's session expiry forward. Whoever drives the shard (the asyncio runtime, or a test
moving a fake clock) asks for ``next_deadline()``, waits, then runs ``pop_due(now_ms)``.

Cost: a heap with lazy deletion, so scheduling and cancelling are O(log n); a replaced entry
stays in the heap until it surfaces and is dropped. The heap is compacted when dead entries
outnumber live ones, so heartbeats cannot grow it without bound.
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Callable


class TimerQueue:
    def __init__(self) -> None:
        self._live: dict[str, tuple[int, int, Callable]] = {}  # key -> (deadline, seq, fn)
        self._heap: list[tuple[int, int, str]] = []
        self._seq = itertools.count()

    def __len__(self) -> int:
        return len(self._live)

    def __contains__(self, key: str) -> bool:
        return key in self._live

    def schedule(self, key: str, deadline_ms: int, fn: Callable) -> None:
        """Run ``fn()`` at ``deadline_ms`` (replacing what ``key`` had scheduled)."""
        seq = next(self._seq)
        self._live[key] = (deadline_ms, seq, fn)
        heapq.heappush(self._heap, (deadline_ms, seq, key))
        if len(self._heap) > 64 and len(self._heap) > 2 * len(self._live):
            self._compact()

    def cancel(self, key: str) -> None:
        self._live.pop(key, None)

    def cancel_prefix(self, prefix: str) -> None:
        for key in [k for k in self._live if k.startswith(prefix)]:
            del self._live[key]

    def deadline(self, key: str) -> int | None:
        entry = self._live.get(key)
        return None if entry is None else entry[0]

    def next_deadline(self) -> int | None:
        self._drop_dead()
        return self._heap[0][0] if self._heap else None

    def pop_due(self, now_ms: int) -> list[Callable]:
        """Remove and return the functions due at ``now_ms``, earliest first."""
        due = []
        while True:
            self._drop_dead()
            if not self._heap or self._heap[0][0] > now_ms:
                return due
            _, _, key = heapq.heappop(self._heap)
            due.append(self._live.pop(key)[2])

    def _drop_dead(self) -> None:
        heap = self._heap
        while heap:
            _, seq, key = heap[0]
            entry = self._live.get(key)
            if entry is not None and entry[1] == seq:
                return
            heapq.heappop(heap)

    def _compact(self) -> None:
        self._heap = [(d, s, k) for k, (d, s, _) in self._live.items()]
        heapq.heapify(self._heap)
