"""A workload measured on both brokers: alternating runs, medians and the ratio odradek/peer.

Runs alternate (odradek, peer, peer, odradek, odradek, ...: the order flips every repetition)
so a slow phase of a noisy machine falls on both brokers alike. Each run starts from the same
state (``measure.settle``: dirty pages written back, both brokers idle; the time it took is
kept as ``settle_s``), so neither the previous run's writeback nor a broker still working off
its backlog disturbs the next. Every run gives a dict of
metrics; the comparison keeps all runs and reports each metric's median per broker and the
ratio of the medians, odradek over peer. Two metrics carry the headline of every workload:

- ``throughput`` in the workload's ``unit`` (records/s or GB/s), higher is better;
- ``cpu_per_unit``: broker CPU seconds per million records or per GB, lower is better.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field
from typing import Callable

from .measure import settle

ODRADEK, PEER = "odradek", "tansu"


@dataclass
class Comparison:
    key: str
    title: str
    client: str
    unit: str  # of throughput: "rec/s" | "GB/s" | "MB/s"
    cost_unit: str  # of cpu_per_unit: "CPU-s/M rec" | "CPU-s/GB"
    runs: dict[str, list[dict]] = field(default_factory=dict)
    notes: str = ""
    kind: str = "throughput"  # "throughput" | "latency" | "partitions" | "log_size": the table

    def add(self, broker: str, metrics: dict) -> None:
        self.runs.setdefault(broker, []).append(metrics)

    def median(self, broker: str, metric: str) -> float | None:
        values = [r[metric] for r in self.runs.get(broker, []) if r.get(metric) is not None]
        return statistics.median(values) if values else None

    def ratio(self, metric: str) -> float | None:
        ours, theirs = self.median(ODRADEK, metric), self.median(PEER, metric)
        if ours is None or not theirs:
            return None
        return ours / theirs

    def metrics(self) -> list[str]:
        names: list[str] = []
        for runs in self.runs.values():
            for r in runs:
                names += [k for k, v in r.items() if k not in names and isinstance(v, (int, float))]
        return names

    def to_json(self) -> dict:
        return {
            "key": self.key, "title": self.title, "client": self.client, "unit": self.unit,
            "cost_unit": self.cost_unit, "notes": self.notes, "kind": self.kind, "runs": self.runs,
            "median": {b: {m: self.median(b, m) for m in self.metrics()} for b in self.runs},
            "ratio": {m: self.ratio(m) for m in self.metrics()},
        }


def alternate(brokers: list, reps: int, run_one: Callable[[object, int], dict | None],
              comparison: Comparison) -> Comparison:
    """Run ``run_one(broker, rep)`` ``reps`` times per broker, flipping the order each time.

    A run that returns None is not recorded (the workload does not apply to that broker).
    """
    for rep in range(reps):
        order = brokers if rep % 2 == 0 else list(reversed(brokers))
        for broker in order:
            settle_s = settle([b.pid for b in brokers])
            metrics = run_one(broker, rep)
            if metrics is not None:
                comparison.add(broker.name, {"rep": rep, **metrics, "settle_s": settle_s})
    return comparison
