"""What the console remembers between page loads: a ring buffer of recent samples per topic
and per consumer group, filled by one background task.

Every ``interval`` seconds the ``Sampler`` asks the cluster for each topic's end offsets
(ListOffsets latest, summed over the topic's partitions) and each consumer group's total lag
(OffsetFetch and ListOffsets), and appends one point to that topic's or group's buffer:

    topic "orders": SampleBuffer [(t0, 1200), (t0+5, 1450), ...]   t in seconds (Unix time),
                                                                   value: the summed end offset
    group "billing": SampleBuffer [(t0, 35), (t0+5, 12), ...]      value: the summed lag

A topic's messages per second between two samples is the rise of its summed end offset over
the time between them (``rates``); records deleted by retention do not lower an end offset,
so the rate is never negative unless a topic is deleted and re-created (then it counts 0).
The cluster's throughput is the sum of every topic's rate at each sample, from the first
sample at which some topic has a rate: charts start where data starts, never with made-up
zeros before it.

Buffers hold ``capacity`` points (by default 120: ten minutes at one sample per 5 s); a
topic or group that disappears has its buffer dropped at the next sample.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import deque
from dataclasses import dataclass, field

log = logging.getLogger(__name__)

DEFAULT_INTERVAL = 5.0
DEFAULT_CAPACITY = 120


class SampleBuffer:
    """The last ``capacity`` (time, value) points, oldest first."""

    def __init__(self, capacity: int = DEFAULT_CAPACITY) -> None:
        self._points: deque[tuple[float, float]] = deque(maxlen=capacity)

    def add(self, at: float, value: float) -> None:
        self._points.append((at, value))

    def points(self) -> list[tuple[float, float]]:
        return list(self._points)

    def latest(self) -> float | None:
        return self._points[-1][1] if self._points else None

    def rates(self) -> list[tuple[float, float]]:
        """Per second rise between consecutive points, at the later point's time; a fall
        (a topic deleted and re-created) counts as 0."""
        pts = self._points
        return [(t1, max(v1 - v0, 0) / (t1 - t0)) for (t0, v0), (t1, v1) in zip(pts, list(pts)[1:]) if t1 > t0]


@dataclass
class Samples:
    """The buffers, by topic and by group; ``throughput`` holds the cluster's total rate."""

    capacity: int = DEFAULT_CAPACITY
    topics: dict[str, SampleBuffer] = field(default_factory=dict)
    groups: dict[str, SampleBuffer] = field(default_factory=dict)
    throughput: SampleBuffer | None = None

    def __post_init__(self) -> None:
        if self.throughput is None:
            self.throughput = SampleBuffer(self.capacity)

    def record(self, at: float, topic_ends: dict[str, int], group_lags: dict[str, int]) -> None:
        """One round of samples: summed end offsets by topic and total lag by group."""
        rate, known = 0.0, False
        for name, end in topic_ends.items():
            buffer = self.topics.setdefault(name, SampleBuffer(self.capacity))
            buffer.add(at, end)
            rates = buffer.rates()
            if rates:
                rate += rates[-1][1]
                known = True
        if known:  # no rate before a topic's second sample: the chart starts at the first real one
            self.throughput.add(at, rate)
        for name, lag in group_lags.items():
            self.groups.setdefault(name, SampleBuffer(self.capacity)).add(at, lag)
        for gone in set(self.topics) - set(topic_ends):
            del self.topics[gone]
        for gone in set(self.groups) - set(group_lags):
            del self.groups[gone]

    def topic_rate(self, name: str) -> float | None:
        """Messages per second at the last sample, None before two samples."""
        buffer = self.topics.get(name)
        rates = buffer.rates() if buffer else []
        return rates[-1][1] if rates else None


class Sampler:
    """Samples the cluster every ``interval`` seconds through ``read_round`` (an async callable
    returning ``(topic_ends, group_lags)``, see ``cluster_view.sample_round``) into ``samples``.
    A failed round is logged and skipped: the cluster may be briefly away."""

    def __init__(self, read_round, samples: Samples, interval: float = DEFAULT_INTERVAL) -> None:
        self._read_round = read_round
        self.samples = samples
        self._interval = interval
        self._task: asyncio.Task | None = None
        self.rounds = 0

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run(), name="console-sampler")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            try:
                await self._task
            except asyncio.CancelledError:
                pass
            self._task = None

    async def sample_once(self) -> None:
        topic_ends, group_lags = await self._read_round()
        self.samples.record(time.time(), topic_ends, group_lags)
        self.rounds += 1

    async def _run(self) -> None:
        while True:
            try:
                await self.sample_once()
            except asyncio.CancelledError:
                raise
            except Exception as e:  # noqa: BLE001 - the next round tries again
                log.warning("console: sampling the cluster failed: %s", e)
            await asyncio.sleep(self._interval)


def with_now(points: list, value: int) -> list:
    """A sampled history ending with the value the page's card shows, at this moment: the
    chart's last point and the card agree (same number, same time). Nothing is added before
    the first sample."""
    if not points:
        return points
    now = time.time()
    return points + [(now, value)] if now > points[-1][0] else points
