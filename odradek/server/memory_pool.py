"""The broker-wide bound on the bytes of requests being received or waiting to be handled
(``queued.max.request.bytes``; Kafka's ``MemoryPool`` / ``SimpleMemoryPool``).

A connection reserves a request's bytes (4 + the size its prefix declares) and releases them
once the request is handled (its response computed, or its handler's future done). A request
whose prefix is read while the pool is under its limit is admitted: reserved at once, and its
connection reads on to its end whatever the pool does (stopping it could leave every reader
waiting on the others' half-received requests). One whose prefix is read while the pool is at
or over its limit waits: its connection stops reading (``pause_reading``), holding only the
bytes already received (at most one read), and is admitted at the first ``release`` that takes
the pool back under the limit. Connections between requests stop reading too while the pool
is at its limit. Requests already complete in a read are reserved whatever the limit (they are
in memory, and handled next). So, as with Kafka's non-strict pool, the reserved total exceeds
the limit by at most the one request admitted last (at most ``socket.request.max.bytes``) and
the complete requests of reads not handled yet, and a request larger than the whole limit is
still received once the pool is under it.

Reserving the declared size, not the bytes received, is what bounds memory: the frame parser
allocates only as bytes arrive (``protocol/framing.py``), and a peer that declares 100 MB and
stops holds 100 MB of the budget, never of memory, until ``connections.max.idle.ms`` closes
its connection and releases it.

``limit`` <= 0 (Kafka's default, -1) means unbounded: nothing ever waits, and ``used`` is
still kept (a test and a metric read it).
"""

from __future__ import annotations


class MemoryPool:
    """Reserved request bytes against ``limit``; connections wait in ``_waiting``.

    Invariant: ``used`` is the sum of what every live connection reserved and did not release.
    """

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.used = 0
        self._waiting: set = set()  # connections paused for memory: each has resume_for_memory()
        self.waits = 0  # times a connection began to wait (a metric of memory pressure)

    @property
    def exhausted(self) -> bool:
        """At or over the limit: connections between requests should wait."""
        return 0 < self.limit <= self.used

    def reserve(self, nbytes: int) -> None:
        self.used += nbytes

    def release(self, nbytes: int) -> None:
        self.used -= nbytes
        if self._waiting and not self.exhausted:
            waiting, self._waiting = self._waiting, set()
            for conn in waiting:
                conn.resume_for_memory()

    def wait(self, conn) -> None:
        """``conn`` stopped reading for memory: resume it at the next release under the limit."""
        if conn not in self._waiting:
            self._waiting.add(conn)
            self.waits += 1

    def forget(self, conn) -> None:
        self._waiting.discard(conn)
