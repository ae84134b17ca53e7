"""``BrokerMetrics``: one broker's counters, and its HTTP listener over the broker's lifecycle.

The counters exist whether or not ``http.listeners`` is set (counting costs the same either
way, and nothing on a request path asks whether anyone reads them): ``topics``
(``BrokerTopicStats``, for the produce and fetch paths) and ``requests`` (``RequestMetrics``,
for the connections). With ``http.listeners`` set, ``start`` (early in the broker's start)
makes the broker's own ``CollectorRegistry`` with a ``BrokerCollector`` and
prometheus_client's ``ProcessCollector`` (``process_*``), binds the listener and
starts the event-loop lag task; ``stop`` (at the end of the broker's stop) undoes them.
``mark_serving`` (the end of the broker's start) makes ``/v1/status/ready`` answer 200.
"""

from __future__ import annotations

import asyncio

from odradek.server.metrics.broker_topic_metrics import BrokerTopicStats
from odradek.server.metrics.event_loop_lag import EventLoopLag
from odradek.server.metrics.request_metrics import RequestMetrics


class BrokerMetrics:
    def __init__(self, broker) -> None:
        self.broker = broker
        self.topics = BrokerTopicStats()
        self.requests = RequestMetrics()
        self.loop_lag = EventLoopLag()
        self.registry = None  # a CollectorRegistry, with http.listeners
        self.http = None  # HttpListener
        self.serving = False
        self._lag_task: asyncio.Task | None = None

    @property
    def http_urls(self) -> list[str]:
        """The bound HTTP listeners, ``http://host:port`` (empty without ``http.listeners``)."""
        return self.http.urls if self.http is not None else []

    async def start(self) -> None:
        """Bind ``http.listeners``, if set. Raises BrokerStartError for a malformed entry or
        an address that cannot be bound."""
        from odradek.server.broker_listeners import BrokerStartError
        from odradek.server.config import ConfigError
        from odradek.server.metrics.http_listener import parse_http_listeners

        try:
            endpoints = parse_http_listeners(self.broker.config["http.listeners"])
            if endpoints:
                await self._listen(endpoints)
        except ConfigError as e:
            raise BrokerStartError(str(e)) from None

    async def _listen(self, endpoints) -> None:
        from prometheus_client.process_collector import ProcessCollector
        from prometheus_client.registry import CollectorRegistry

        from odradek.server.metrics.collector import BrokerCollector
        from odradek.server.metrics.http_listener import HttpListener

        self.registry = CollectorRegistry()
        self.registry.register(BrokerCollector(self.broker, self))
        # process_cpu_seconds_total, process_resident_memory_bytes, process_open_fds, ...: the
        # broker's process, read from /proc at scrape time (several brokers in one process,
        # as in tests, each report the same process).
        ProcessCollector(registry=self.registry)
        self.http = HttpListener(self.registry, self.not_ready_reason)
        await self.http.start(endpoints)
        self._lag_task = asyncio.get_running_loop().create_task(self.loop_lag.run())

    def mark_serving(self) -> None:
        self.serving = True

    def not_ready_reason(self) -> str | None:
        """None when the broker serves requests, else why not (``/v1/status/ready``)."""
        if self.broker.stopping:
            return "stopping"
        return None if self.serving else "starting"

    async def stop(self) -> None:
        if self._lag_task is not None:
            self._lag_task.cancel()
            await asyncio.gather(self._lag_task, return_exceptions=True)
            self._lag_task = None
        if self.http is not None:
            await self.http.stop()
