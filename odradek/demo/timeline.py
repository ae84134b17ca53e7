"""What the demo's charts draw: the run's timeline, sampled while it runs.

- ``Sample``: every ``interval`` seconds, the end offsets (high watermarks, from ListOffsets)
  of the activity topics, and the position of each streaming query in ``page_views``: the
  offsets of the last micro-batch its checkpoint has committed;
- ``MicroBatch``: one micro-batch of one streaming query, from its progress report.

A query's position comes from its checkpoint on disk (``<dir>/checkpoints/<query>``), the
only place Spark keeps it (the odradek source joins no consumer group). Spark writes, per
micro-batch N, ``offsets/N`` (line 1 the version ``v1``, line 2 the batch's metadata, then
one line per source: ``{"page_views": {"0": 1034, "1": 891}}``, the next offset to read per
partition) and, once the batch's output is committed, ``commits/N``. The position is the
offsets of the largest N found in ``commits/``. Reading two small files per query and one
ListOffsets per sample keeps sampling cheap enough to run every half second beside Spark.

The lag of a query is the end offsets of ``page_views`` less its position, summed over the
partitions: the page views it has not processed yet (including any open transaction's
records and markers, which the end offsets count; the lag falls to 0 once it catches up).
"""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

__all__ = ["Sample", "MicroBatch", "LagSampler", "checkpoint_position", "micro_batch"]


@dataclass(frozen=True)
class Sample:
    """The state at wall-clock ``time`` (epoch seconds)."""

    time: float
    ends: dict[str, int]  # topic -> sum of its partitions' end offsets
    positions: dict[str, int] = field(default_factory=dict)  # query -> sum of its positions in page_views

    def position(self, query: str) -> int:
        """The query's position; 0 before its first commit (it reads from the earliest offsets)."""
        return self.positions.get(query, 0)

    def lag(self, query: str, topic: str) -> int:
        """Records of ``topic`` the query has not processed."""
        return max(self.ends.get(topic, 0) - self.position(query), 0)


@dataclass(frozen=True)
class MicroBatch:
    """One micro-batch of streaming query ``query``, started at ``time`` (epoch seconds)."""

    query: str
    time: float
    rows: int
    duration_ms: int


def micro_batch(progress) -> MicroBatch:
    """A ``MicroBatch`` from a ``StreamingQueryProgress`` (or its dict, as in
    ``query.recentProgress``): name, timestamp (ISO 8601, UTC), numInputRows and
    durationMs["triggerExecution"]."""
    def get(name):
        return progress[name] if isinstance(progress, dict) else getattr(progress, name)

    started = datetime.fromisoformat(get("timestamp").replace("Z", "+00:00")).timestamp()
    durations = get("durationMs") or {}
    return MicroBatch(get("name") or "", started, int(get("numInputRows")), int(durations.get("triggerExecution", 0)))


def checkpoint_position(checkpoint: Path, topic: str) -> int | None:
    """The sum over ``topic``'s partitions of the offsets the query's last committed
    micro-batch ended at; None when nothing is committed yet (or a file is being written)."""
    try:
        committed = [int(p.name) for p in (checkpoint / "commits").iterdir() if p.name.isdigit()]
        if not committed:
            return None
        lines = (checkpoint / "offsets" / str(max(committed))).read_text().splitlines()
        for line in lines[2:]:
            offsets = json.loads(line).get(topic) if line.startswith("{") else None
            if offsets is not None:
                return sum(int(o) for o in offsets.values())
    except (OSError, ValueError):
        return None
    return None


class LagSampler:
    """Samples the end offsets of ``topics`` (``partitions`` each) and the positions of the
    queries whose checkpoints are under ``checkpoints`` in ``topic``, every ``interval``
    seconds on a daemon thread, from ``start()`` to ``stop()``. A failed look-up (the broker
    busy or going away) skips that sample."""

    def __init__(self, bootstrap: str, topics: list[str], partitions: int, checkpoints: Path, topic: str,
                 interval: float = 0.5) -> None:
        self.bootstrap, self.topics, self.partitions = bootstrap, topics, partitions
        self.checkpoints, self.topic, self.interval = checkpoints, topic, interval
        self.samples: list[Sample] = []
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> LagSampler:
        self._thread = threading.Thread(target=self._run, name="demo-lag-sampler", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None

    def _run(self) -> None:
        from odradek.client import AdminClient, KafkaError, TopicPartition

        specs = {TopicPartition(t, p): -1 for t in self.topics for p in range(self.partitions)}
        with AdminClient(self.bootstrap, client_id="odradek-demo-sampler") as admin:
            while not self._stop.is_set():
                try:
                    found = admin.list_offsets(specs, timeout_ms=5000)
                except (KafkaError, OSError):  # a missed sample is a gap in a chart, not an error
                    found = None
                if found is not None:
                    self.samples.append(self._sample(found))
                self._stop.wait(self.interval)

    def _sample(self, found: dict) -> Sample:
        ends: dict[str, int] = {}
        for tp, o in found.items():
            ends[tp.topic] = ends.get(tp.topic, 0) + (o.offset if o is not None else 0)
        positions = {}
        if self.checkpoints.is_dir():
            for query in sorted(self.checkpoints.iterdir()):
                position = checkpoint_position(query, self.topic)
                if position is not None:
                    positions[query.name] = position
        return Sample(time.time(), ends, positions)
