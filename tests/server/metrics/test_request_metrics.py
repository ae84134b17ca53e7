"""RequestMetrics: requests counted and timed per API, a histogram in ms."""

import asyncio
from types import SimpleNamespace

from odradek.protocol.generated.fetch_request import FetchRequest, ReplicaState
from odradek.server.handlers import fetch
from odradek.server.fetch_session_cache import FetchSessionCache
from odradek.server.metrics.request_metrics import BUCKETS_MS, WINDOW_S, RequestMetrics, bucket_quantile
from odradek.storage.clock import FakeClock

from tests.server.metrics.scrape import expose, value

TIMES = "kafka_network_requestmetrics_totaltimems_histogram"
SUMMARY = "kafka_network_requestmetrics_totaltimems"  # the JMX exporter's quantiles


def _frame(api_key: int) -> bytes:
    return api_key.to_bytes(2, "big") + b"\x00\x09" + b"\x00" * 8  # key, version, the rest


def test_counts_and_buckets_per_api():
    metrics = RequestMetrics()
    for seconds in (0.0001, 0.0004, 0.003, 0.003):
        metrics.observe(0, seconds)  # Produce
    metrics.observe(3, 0.2)  # Metadata
    samples = expose(metrics.collect())
    assert value(samples, "kafka_network_requestmetrics_requests_total", request="Produce") == 4
    assert value(samples, "kafka_network_requestmetrics_requests_total", request="Metadata") == 1
    assert value(samples, TIMES + "_bucket", request="Produce", le="0.25") == 1
    assert value(samples, TIMES + "_bucket", request="Produce", le="0.5") == 2
    assert value(samples, TIMES + "_bucket", request="Produce", le="2.5") == 2
    assert value(samples, TIMES + "_bucket", request="Produce", le="5.0") == 4
    assert value(samples, TIMES + "_bucket", request="Produce", le="+Inf") == 4
    assert value(samples, TIMES + "_count", request="Produce") == 4
    assert abs(value(samples, TIMES + "_sum", request="Produce") - 6.5) < 1e-9  # ms
    assert value(samples, TIMES + "_bucket", request="Metadata", le="100.0") == 0
    assert value(samples, TIMES + "_bucket", request="Metadata", le="250.0") == 1
    assert len([k for k in samples if k[0] == TIMES + "_bucket"]) == 2 * (len(BUCKETS_MS) + 1)
    assert ("kafka_network_requestmetrics_requests_total", frozenset({("request", "Fetch")})) not in samples


def test_a_waiting_request_is_timed_when_its_future_is_done():
    async def scenario():
        metrics = RequestMetrics()
        waiting = asyncio.get_running_loop().create_future()
        metrics.record(_frame(1), 0.0, waiting)  # Fetch, taken "long ago" (perf_counter 0)
        assert metrics.count(1) == 0
        waiting.set_result(None)
        await asyncio.sleep(0)  # done callbacks run on the loop
        return metrics

    metrics = asyncio.run(scenario())
    samples = expose(metrics.collect())
    assert value(samples, TIMES + "_count", request="Fetch") == 1
    assert value(samples, TIMES + "_bucket", request="Fetch", le="30000.0") == 0  # it took "forever"


def test_frames_without_an_api_key_are_not_counted():
    metrics = RequestMetrics()
    metrics.record(b"\x00", 0.0, None)
    metrics.record(b"\x01\x00\x00\x00", 0.0, None)  # key 256: no such API
    metrics.record(_frame(18), 0.0, None)  # ApiVersions
    assert sum(metrics.count(k) for k in range(256)) == 1
    assert metrics.count(18) == 1


def test_fetches_are_counted_as_fetch_and_as_a_follower_or_consumer_fetch():
    """As Kafka's RequestChannel: every Fetch under ``Fetch``, and under ``FetchFollower`` when
    the Fetch handler saw a replica's id (v14- ``replica_id``, v15+ ``replica_state``), else
    ``FetchConsumer``. The handlers here stop at once (an unknown fetch session)."""
    metrics = RequestMetrics()
    ctx = SimpleNamespace(api_version=12, broker=SimpleNamespace(metrics=SimpleNamespace(requests=metrics),
                                                                 fetch_sessions=FetchSessionCache(),
                                                                 clock=FakeClock()))

    async def scenario():
        unknown = {"session_id": 7, "session_epoch": 1}  # an incremental fetch of no session
        requests = (FetchRequest(replica_id=2, **unknown), FetchRequest(**unknown),
                    FetchRequest(replica_state=ReplicaState(replica_id=3), **unknown),
                    FetchRequest(**unknown))
        for request in requests:
            task = asyncio.ensure_future(fetch.handle(ctx, request))
            metrics.record(_frame(1), 0.0, task)
            await task
        await asyncio.sleep(0)  # done callbacks run on the loop

    asyncio.run(scenario())
    metrics.record(_frame(1), 0.0, None)  # a Fetch that never reached its handler
    samples = expose(metrics.collect())
    requests = "kafka_network_requestmetrics_requests_total"
    assert value(samples, requests, request="Fetch") == 5
    assert value(samples, requests, request="FetchFollower") == 2
    assert value(samples, requests, request="FetchConsumer") == 3
    assert value(samples, TIMES + "_count", request="FetchFollower") == 2
    assert value(samples, TIMES + "_count", request="FetchConsumer") == 3
    assert not metrics._follower_fetches  # nothing kept once the tasks are gone


def test_no_fetch_kind_is_exposed_before_a_fetch():
    metrics = RequestMetrics()
    metrics.observe(3, 0.001)  # Metadata
    names = {dict(labels).get("request") for _, labels in expose(metrics.collect())}
    assert names == {"Metadata"}


def test_quantiles_as_the_jmx_exporter_names_them_from_the_buckets():
    """``{request, quantile="0.99"}`` with ``_count`` and ``_sum`` (a summary), interpolated
    inside the bucket as ``histogram_quantile`` does."""
    metrics = RequestMetrics()
    for _ in range(90):
        metrics.observe(0, 0.0008)  # Produce: 90 in (0.5, 1] ms
    for _ in range(10):
        metrics.observe(0, 0.04)  # 10 in (25, 50] ms
    samples = expose(metrics.collect(now=0.0))
    assert value(samples, SUMMARY, request="Produce", quantile="0.50") == 0.5 + 0.5 * 50 / 90
    assert value(samples, SUMMARY, request="Produce", quantile="0.99") == 25 + 25 * 9 / 10
    assert {dict(k[1])["quantile"] for k in samples if k[0] == SUMMARY} == {
        "0.50", "0.75", "0.95", "0.98", "0.99", "0.999"}
    assert value(samples, SUMMARY + "_count", request="Produce") == 100
    assert value(samples, SUMMARY + "_sum", request="Produce") == value(samples, TIMES + "_sum", request="Produce")
    assert bucket_quantile(0.5, [0] * len(BUCKETS_MS) + [3]) == BUCKETS_MS[-1]  # all beyond the last bound
    assert bucket_quantile(0.99, [0] * (len(BUCKETS_MS) + 1)) == 0.0


def test_quantiles_follow_the_last_minutes_not_the_whole_life():
    metrics = RequestMetrics()
    for _ in range(100):
        metrics.observe(3, 0.2)  # Metadata: slow, long ago
    metrics.collect(now=0.0)
    metrics.collect(now=60.0)
    for _ in range(10):
        metrics.observe(3, 0.0002)  # fast since then
    samples = expose(metrics.collect(now=120.0))
    assert value(samples, SUMMARY, request="Metadata", quantile="0.99") < 0.25  # the window: the fast ones
    assert value(samples, SUMMARY + "_count", request="Metadata") == 110  # counts stay since the start
    samples = expose(metrics.collect(now=120.0 + 2 * WINDOW_S))  # nothing in the window: every request since the start
    assert value(samples, SUMMARY, request="Metadata", quantile="0.50") > 100
