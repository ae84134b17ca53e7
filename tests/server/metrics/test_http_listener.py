"""The HTTP listener alone: endpoints, status codes, bad configuration."""

import asyncio
from types import SimpleNamespace

import aiohttp
import pytest
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import CollectorRegistry

from odradek.server.broker_listeners import BrokerStartError
from odradek.server.config import ConfigError
from odradek.server.metrics.broker_metrics import BrokerMetrics
from odradek.server.metrics.http_listener import HttpEndpoint, HttpListener, parse_http_listeners

from tests.server.metrics.scrape import parse


class _One:
    def collect(self):
        return [GaugeMetricFamily("odradek_test_value", "a value", value=7)]


def test_listeners_are_parsed_like_kafkas_listeners():
    assert parse_http_listeners(["http://127.0.0.1:0", "http://:9100", "http://[::1]:8080"]) == [
        HttpEndpoint("127.0.0.1", 0), HttpEndpoint("", 9100), HttpEndpoint("::1", 8080)]
    for bad in ("https://127.0.0.1:1", "127.0.0.1:80", "http://host", "http://host:99999"):
        with pytest.raises(ConfigError, match="http.listeners"):
            parse_http_listeners([bad])


def test_metrics_health_checks_and_other_paths():
    state = {"reason": "starting"}

    async def scenario():
        registry = CollectorRegistry()
        registry.register(_One())
        listener = HttpListener(registry, lambda: state["reason"])
        await listener.start([HttpEndpoint("127.0.0.1", 0)])
        url = listener.urls[0]
        answers = {}
        async with aiohttp.ClientSession() as session:
            for name, method, path in (("metrics", "GET", "/metrics"), ("live", "GET", "/v1/status/live"),
                                       ("starting", "GET", "/v1/status/ready"), ("other", "GET", "/nope"),
                                       ("post", "POST", "/metrics")):
                async with session.request(method, url + path) as response:
                    answers[name] = (response.status, await response.text(), response.content_type)
            state["reason"] = None
            async with session.get(url + "/v1/status/ready") as response:
                answers["ready"] = (response.status, await response.text(), response.content_type)
        await listener.stop()
        return url, answers

    url, answers = asyncio.run(scenario())
    assert url.startswith("http://127.0.0.1:") and not url.endswith(":0")
    status, text, content_type = answers["metrics"]
    assert (status, content_type) == (200, "text/plain")
    assert parse(text)[("odradek_test_value", frozenset())] == 7
    assert answers["live"][:2] == (200, "live\n")
    assert answers["starting"][:2] == (503, "starting\n")
    assert answers["ready"][:2] == (200, "ready\n")
    assert answers["other"][0] == 404
    assert answers["post"][0] == 405


def test_ready_only_between_the_end_of_start_and_the_beginning_of_stop():
    broker = SimpleNamespace(stopping=False)
    metrics = BrokerMetrics(broker)
    assert metrics.not_ready_reason() == "starting"
    metrics.mark_serving()
    assert metrics.not_ready_reason() is None
    broker.stopping = True
    assert metrics.not_ready_reason() == "stopping"


def test_a_listener_that_cannot_be_had_stops_the_start():
    async def scenario(listeners):
        metrics = BrokerMetrics(SimpleNamespace(config={"http.listeners": listeners}, stopping=False))
        try:
            await metrics.start()
        finally:
            await metrics.stop()

    with pytest.raises(BrokerStartError, match="http.listeners: cannot parse"):
        asyncio.run(scenario(["tcp://127.0.0.1:0"]))
    with pytest.raises(BrokerStartError, match="http.listeners: cannot listen on 192.0.2.1:0: "):
        asyncio.run(scenario(["http://192.0.2.1:0"]))  # TEST-NET-1: not an address of this host
