"""How late the broker's event loop runs what it is due to run: a task sleeps ``INTERVAL_S``
again and again and measures how much later than asked it woke. Every request, timer and
replica fetch of the broker waits for the same loop, so this lag is what a callback due now
waits before it runs (a long synchronous step, a busy CPU, the GIL held by a worker thread).

``lag_seconds`` is the last measurement (``odradek_eventloop_lag_seconds``); a stall shows in
it for the next ``INTERVAL_S``, and as the latency of every request it held up in
``kafka_network_requestmetrics_totaltimems``.
"""

from __future__ import annotations

import asyncio

INTERVAL_S = 0.5  # two wakeups a second: nothing measurable, and a stall shows within 0.5 s


class EventLoopLag:
    def __init__(self, interval_s: float = INTERVAL_S) -> None:
        self.interval_s = interval_s
        self.lag_seconds = 0.0

    async def run(self) -> None:
        """Measure until cancelled."""
        loop = asyncio.get_running_loop()
        while True:
            asked = loop.time() + self.interval_s
            await asyncio.sleep(self.interval_s)
            self.lag_seconds = max(loop.time() - asked, 0.0)
