"""A connection muted while its client is throttled: Kafka's ``ThrottledChannel`` and the
``Selector.mute`` / ``unmute`` around it (KIP-219).

A client over a quota (``server/client_quota_manager.py``, ``server/client_request_quota.py``)
is told its throttle time in the response, which goes out at once; the broker then reads and
handles nothing more from that connection until the time has passed, so a client that ignores
the time gains nothing. Responses already queued are still written.

One request can earn two throttles (Produce: its bytes and its handling time; Fetch: the same),
found one after the other here; Kafka mutes once for the larger. So ``throttle`` while muted
moves the end later when the new time ends later, and never earlier.
"""

from __future__ import annotations

import asyncio


class ThrottledChannel:
    """The mute of one connection, which must offer ``mute(muted: bool)``: called with True
    when a throttle starts, with False when the last end has passed."""

    __slots__ = ("_connection", "_loop", "_end", "_timer")

    def __init__(self, connection, loop: asyncio.AbstractEventLoop) -> None:
        self._connection = connection
        self._loop = loop
        self._end = 0.0  # loop time the mute ends at
        self._timer: asyncio.TimerHandle | None = None

    @property
    def active(self) -> bool:
        return self._timer is not None

    def throttle(self, ms: int) -> None:
        """Mute for ``ms`` ms from now, or until a later end already set."""
        if ms <= 0:
            return
        end = self._loop.time() + ms / 1000
        if self._timer is not None:
            if end <= self._end:
                return
            self._timer.cancel()
        else:
            self._connection.mute(True)
        self._end = end
        self._timer = self._loop.call_at(end, self.end)

    def end(self) -> None:
        """The throttle time has passed: unmute (tests call it early)."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self._connection.mute(False)
