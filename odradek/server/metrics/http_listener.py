"""The broker's HTTP listener (``http.listeners``): Prometheus metrics and health checks.

``http.listeners`` is a comma-separated list like Kafka's ``listeners``, each
``http://host:port`` (an empty host: every interface; port 0: an ephemeral port, logged as
"HTTP listener on http://127.0.0.1:NNNN" and listed in ``HttpListener.urls``). Unset: no
listener. It serves, on the broker's own event loop (aiohttp's low-level server; no thread):

- ``GET /metrics``: the registry's metrics in the Prometheus text format
  (``prometheus_client.exposition.generate_latest``);
- ``GET /v1/status/live``: 200 whenever the listener answers (the event loop runs);
- ``GET /v1/status/ready``: 200 once the broker serves Kafka requests (its start finished:
  logs loaded, listeners bound, registered, coordinators started) and until it stops serving
  them (``Broker.stopping``: after the controlled shutdown moved its leaderships away); 503
  before and after, with the reason in the body.

Anything else: 404 (405 for a method other than GET or HEAD). The listener is bound early in
the broker's start, so liveness answers while a long log recovery runs.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass

from odradek.server.config import ConfigError

log = logging.getLogger("odradek.broker")

READY, LIVE, METRICS = "/v1/status/ready", "/v1/status/live", "/metrics"


@dataclass(frozen=True)
class HttpEndpoint:
    host: str  # "" for every interface
    port: int


def parse_http_listeners(values: list[str]) -> list[HttpEndpoint]:
    """``http.listeners`` entries as endpoints; ConfigError naming the one that is not
    ``http://host:port``."""
    endpoints = []
    for text in values:
        scheme, sep, rest = text.partition("://")
        host, colon, port = rest.rpartition(":")
        if scheme.lower() != "http" or not sep or not colon or not port.isdigit() or int(port) > 65535:
            raise ConfigError(f"http.listeners: cannot parse {text!r} (expected http://host:port)")
        endpoints.append(HttpEndpoint(host.strip("[]"), int(port)))
    return endpoints


class HttpListener:
    """Serves ``registry`` and the health checks; ``ready()`` says whether the broker serves."""

    def __init__(self, registry, ready) -> None:
        self.registry = registry
        self.ready = ready
        self.urls: list[str] = []
        self._runner = None

    async def start(self, endpoints: list[HttpEndpoint]) -> None:
        """Bind every endpoint; ConfigError naming the one that cannot be had (the others are
        closed again)."""
        from aiohttp import web

        self._runner = web.ServerRunner(web.Server(self._handle, access_log=None), handle_signals=False,
                                        shutdown_timeout=1.0)
        await self._runner.setup()
        for endpoint in endpoints:
            try:
                await web.TCPSite(self._runner, endpoint.host or None, endpoint.port, reuse_address=True).start()
            except OSError as e:
                await self.stop()
                reason = os.strerror(e.errno) if e.errno else str(e)
                raise ConfigError(f"http.listeners: cannot listen on {endpoint.host or '0.0.0.0'}:{endpoint.port}: "
                                  f"{reason.lower()}") from None
        self.urls = [_url(address) for address in self._runner.addresses]
        for url in self.urls:
            log.info("HTTP listener on %s", url)

    async def stop(self) -> None:
        runner, self._runner = self._runner, None
        if runner is not None:
            await runner.cleanup()

    async def _handle(self, request):
        from aiohttp import web

        if request.method not in ("GET", "HEAD"):
            return web.Response(status=405, text="only GET and HEAD\n", headers={"Allow": "GET, HEAD"})
        if request.path == METRICS:
            return self._metrics(web)
        if request.path == LIVE:
            return web.Response(text="live\n")
        if request.path == READY:
            reason = self.ready()
            return web.Response(text="ready\n") if reason is None else web.Response(status=503, text=reason + "\n")
        return web.Response(status=404, text=f"odradek serves {METRICS}, {READY} and {LIVE}\n")

    def _metrics(self, web):
        from prometheus_client.exposition import CONTENT_TYPE_LATEST, generate_latest

        try:
            body = generate_latest(self.registry)
        except Exception:  # a bug in a collector: this scrape fails, the broker goes on
            log.exception("collecting metrics failed")
            return web.Response(status=500, text="collecting metrics failed; see the broker's log\n")
        return web.Response(body=body, headers={"Content-Type": CONTENT_TYPE_LATEST})


def _url(address) -> str:
    host, port = address[0], address[1]
    return f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"

