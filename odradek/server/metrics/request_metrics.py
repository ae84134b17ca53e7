"""Kafka's ``RequestMetrics`` per API: how many requests, and how long each took.

Exposed as (``collect``):

- ``kafka_network_requestmetrics_requests_total{request="Produce"}``: Kafka's
  ``RequestsPerSec`` count, as the JMX exporter names it (Kafka adds a ``version`` label;
  odradek counts per API only);
- ``kafka_network_requestmetrics_totaltimems{request="Produce",quantile="0.99"}``, ``_count``
  and ``_sum``: Kafka's ``TotalTimeMs`` in milliseconds as the JMX exporter's usual rules
  expose it (``(\\d+)thPercentile`` -> ``quantile: "0.$N"``: quantiles ``0.50``, ``0.75``,
  ``0.95``, ``0.98``, ``0.99``, ``0.999``; ``Count`` -> ``_count``), a Prometheus summary, so
  dashboards made for the JMX exporter fill as they are;
- ``kafka_network_requestmetrics_totaltimems_histogram{request}`` (``_bucket``, ``_sum``,
  ``_count``): the same times as a Prometheus histogram, for ``histogram_quantile`` over any
  window and across brokers.

The quantiles are computed at scrape time from the histogram's buckets, never per request,
interpolating linearly inside a bucket as ``histogram_quantile`` does (a quantile in the +Inf
bucket is the highest finite bound). They describe about the last ``WINDOW_S`` seconds, as
Kafka's Yammer histograms are biased to the last five minutes: each scrape keeps a copy of
the bucket counts (at most one per ``SNAPSHOT_S``) and a scrape's quantiles are over the
counts added since the oldest copy younger than ``WINDOW_S``; an API without a request in
that window keeps its quantiles over every request since the start (as a Yammer reservoir
keeps its last samples when nothing new comes).

The time of a request runs from the moment the connection takes its complete frame to the
moment its response is computed: at once for most requests; for those that wait (a long-poll
Fetch, an acks=all Produce, a group join) when their handler's future is done, so a consumer's
idle Fetch takes about ``fetch.max.wait.ms``, as in Kafka. Writing the response is not
included (Kafka's ``ResponseSendTimeMs`` part).

A Fetch is counted twice, as in Kafka's ``RequestChannel``: under ``Fetch`` and under either
``FetchFollower`` (a replica's fetch: ``replica_id >= 0``, or ``replica_state`` from v15) or
``FetchConsumer`` (any other). The connection's hook reads only the API key, so the Fetch
handler, which has decoded the request, marks its own task as a follower's
(``mark_follower_fetch``); a Fetch that never reached its handler counts as a consumer's.

Cost per request (``record``, called by ``server/connection.py``): one ``perf_counter`` pair,
a ``bisect`` into ``BUCKETS_MS`` and two list updates; a request that waits adds one done
callback to the future it already has; a Fetch adds a second histogram update and a set lookup.
"""

from __future__ import annotations

import asyncio
from bisect import bisect_left
from collections import deque
from time import monotonic, perf_counter
from weakref import WeakSet

from prometheus_client.core import CounterMetricFamily, HistogramMetricFamily, Metric

from odradek.protocol.api_keys import SUPPORTED
from odradek.protocol.generated import APIS

# Upper bounds of the histogram's buckets, in ms (Prometheus' ``le``), then +Inf: from
# sub-millisecond produce appends to the long polls of fetches and group joins.
BUCKETS_MS = (0.25, 0.5, 1, 2.5, 5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10000, 30000)
_BOUNDS_S = tuple(b / 1000 for b in BUCKETS_MS)
_API_KEYS = 256  # an API key's low byte indexes the counters; the high byte is 0 for every API
_FETCH = 1
# Kafka's two extra Fetch series (RequestMetrics' consumer and follower fetch names), kept in
# the slots after the API keys'.
_CONSUMER_FETCH, _FOLLOWER_FETCH = _API_KEYS, _API_KEYS + 1
_SPLIT_NAMES = ((_CONSUMER_FETCH, "FetchConsumer"), (_FOLLOWER_FETCH, "FetchFollower"))
# Yammer's percentiles as the JMX exporter labels them ("0.$N" of NthPercentile).
QUANTILES = (("0.50", 0.5), ("0.75", 0.75), ("0.95", 0.95), ("0.98", 0.98), ("0.99", 0.99), ("0.999", 0.999))
WINDOW_S = 300.0  # Yammer's ExponentiallyDecayingReservoir (alpha 0.015) weighs about the last 5 minutes
SNAPSHOT_S = 10.0  # at most 30 copies of the counts in a window: a scrape every 15 s keeps 20


class RequestMetrics:
    """Per API key, then per kind of Fetch (``_SPLIT_NAMES``): request counts per latency
    bucket (the last is +Inf) and total seconds."""

    def __init__(self) -> None:
        self.buckets = [[0] * (len(BUCKETS_MS) + 1) for _ in range(_API_KEYS + 2)]
        self.seconds = [0.0] * (_API_KEYS + 2)
        # Tasks of Fetch handlers answering a follower; weak, so that a handler run outside a
        # connection (which never times it) leaves nothing behind.
        self._follower_fetches: WeakSet = WeakSet()
        # (monotonic time, {slot: counts}) copies taken at scrapes, oldest first: the
        # quantiles' window.
        self._snapshots: deque[tuple[float, dict[int, tuple[int, ...]]]] = deque()

    def record(self, frame, started: float, waiting) -> None:
        """The request in ``frame`` (its header first: INT16 api key) was taken at
        ``started`` (``perf_counter``) and handled; ``waiting``: its handler's future when it
        waits (timed when done), else None. Frames too short for an API key are not counted."""
        if len(frame) < 2 or frame[0]:
            return
        api_key = frame[1]
        if waiting is None:  # (observe, inlined: this runs for every request)
            seconds = perf_counter() - started
            self.buckets[api_key][bisect_left(_BOUNDS_S, seconds)] += 1
            self.seconds[api_key] += seconds
            if api_key == _FETCH:  # it never reached the Fetch handler, which always waits
                self.observe(_CONSUMER_FETCH, seconds)
        elif api_key == _FETCH:
            waiting.add_done_callback(lambda task: self._observe_fetch(task, perf_counter() - started))
        else:
            waiting.add_done_callback(lambda _: self.observe(api_key, perf_counter() - started))

    def observe(self, api_key: int, seconds: float) -> None:
        """One request of ``api_key`` (or of a ``_SPLIT_NAMES`` slot) took ``seconds``."""
        self.buckets[api_key][bisect_left(_BOUNDS_S, seconds)] += 1
        self.seconds[api_key] += seconds

    def mark_follower_fetch(self) -> None:
        """Called by the Fetch handler, in its own task, when a follower sent the request."""
        self._follower_fetches.add(asyncio.current_task())

    def _observe_fetch(self, task, seconds: float) -> None:
        self.observe(_FETCH, seconds)
        self.observe(_FOLLOWER_FETCH if task in self._follower_fetches else _CONSUMER_FETCH, seconds)

    def count(self, api_key: int) -> int:
        return sum(self.buckets[api_key])

    def collect(self, now: float | None = None):
        """The three families above, for the APIs odradek serves that were requested, then
        for the kinds of Fetch; ``now``: the scrape's ``monotonic`` time (tests give it)."""
        now = monotonic() if now is None else now
        requests = CounterMetricFamily("kafka_network_requestmetrics_requests",
                                       "Requests received, per API (Kafka's RequestsPerSec)", labels=["request"])
        summary = Metric("kafka_network_requestmetrics_totaltimems",
                         "Time from receiving a request to its response, in ms (Kafka's TotalTimeMs), "
                         "quantiles over about the last 5 minutes", "summary")
        times = HistogramMetricFamily("kafka_network_requestmetrics_totaltimems_histogram",
                                      "Time from receiving a request to its response, in ms (Kafka's TotalTimeMs)",
                                      labels=["request"])
        base = self._window_base(now)
        named = [(api_key, APIS[api_key][0]) for api_key in sorted(SUPPORTED)]
        used = {}
        for slot, name in named + list(_SPLIT_NAMES):
            counts = self.buckets[slot]
            total = sum(counts)
            if not total:
                continue
            used[slot] = tuple(counts)
            millis = self.seconds[slot] * 1000
            requests.add_metric([name], total)
            times.add_metric([name], cumulative_buckets(counts), millis)
            recent = [n - b for n, b in zip(counts, base.get(slot, ()))] if slot in base else list(counts)
            for label, q in QUANTILES:
                summary.add_sample(summary.name, {"request": name, "quantile": label},
                                   bucket_quantile(q, recent if any(recent) else counts))
            summary.add_sample(summary.name + "_count", {"request": name}, total)
            summary.add_sample(summary.name + "_sum", {"request": name}, millis)
        if not self._snapshots or now - self._snapshots[-1][0] >= SNAPSHOT_S:
            self._snapshots.append((now, used))
        return [requests, summary, times]

    def _window_base(self, now: float) -> dict[int, tuple[int, ...]]:
        """The counts at the oldest copy younger than ``WINDOW_S`` ({} when there is none:
        the window is then every request since the start)."""
        while self._snapshots and now - self._snapshots[0][0] > WINDOW_S:
            self._snapshots.popleft()
        return self._snapshots[0][1] if self._snapshots else {}


def cumulative_buckets(counts: list[int]) -> list[tuple[str, int]]:
    """``(le, count at or below it)`` for a histogram family, from the counts per
    `BUCKETS_MS` bound then +Inf."""
    out, running = [], 0
    for bound, n in zip((*BUCKETS_MS, float("inf")), counts):
        running += n
        out.append((_le(bound), running))
    return out


def bucket_quantile(q: float, counts) -> float:
    """The ``q`` quantile (0 < q < 1) of requests counted per `BUCKETS_MS` bucket then +Inf,
    in ms, interpolated linearly inside its bucket from the bucket's lower bound (0 for the
    first) as Prometheus' ``histogram_quantile`` does; the highest finite bound when it falls
    in +Inf; 0.0 without requests."""
    total = sum(counts)
    if not total:
        return 0.0
    rank, below = q * total, 0
    for i, n in enumerate(counts):
        if n and below + n >= rank:
            if i == len(BUCKETS_MS):
                return float(BUCKETS_MS[-1])
            lower = BUCKETS_MS[i - 1] if i else 0.0
            return lower + (BUCKETS_MS[i] - lower) * (rank - below) / n
        below += n
    return float(BUCKETS_MS[-1])


def _le(bound: float) -> str:
    """Prometheus' spelling of a bucket bound: ``1.0``, ``0.25``, ``+Inf``."""
    return "+Inf" if bound == float("inf") else repr(float(bound))


# For connections of brokers without metrics (tests' stand-ins): counts that nobody reads.
UNREAD = RequestMetrics()


def request_metrics_of(broker) -> RequestMetrics:
    metrics = getattr(broker, "metrics", None)
    return metrics.requests if metrics is not None else UNREAD
