"""The workloads of `bench/ab.py`: each runs its clients against both sides' brokers (a warm-up
run each, then ``--reps`` alternating ones) and returns a `Comparison` of broker CPU per unit
and throughput. `RUNNERS` maps the names ``--workloads`` takes to them.

- ``produce`` / ``produce8``: kcat, 100 B records, acks=1, a new topic per run (1 or 8
  partitions), each run on a dropped page cache (``measure.fresh_page_cache``);
- ``consume``: kcat reads one partition filled once per broker;
- ``bandwidth``: the raw generator's ~1 MiB batches, acks=1, window 8;
- ``fetch``: the raw reader, ~1 MiB batches over 4 partitions with 32 MiB fetches.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from bench.harness import admin
from bench.harness.comparison import Comparison, alternate
from bench.harness.config import preset
from bench.harness.kcat import Kcat, librdkafka_shim, records_file
from bench.harness.measure import fresh_page_cache, measured
from bench.harness.wire import high_watermarks
from bench.harness.workloads.consume import fill_bandwidth_topic, raw_consume_run
from bench.harness.workloads.produce import bandwidth_requests, kcat_produce, raw_bandwidth_run


class Clients:
    """What ``kcat_produce`` needs of a session (``config.producers``, ``records_file``,
    ``kcat``), plus the run's sizes; files live in ``work_dir``."""

    def __init__(self, args: argparse.Namespace, work_dir: Path) -> None:
        self.config = preset(False, reps=args.reps, records=args.records, producers=1,
                             bandwidth_mib=args.bandwidth_mib, work_dir=work_dir)
        self.work_dir = work_dir
        self.shim = librdkafka_shim(work_dir)
        self.kcat = Kcat(self.shim)
        self.current: Comparison | None = None  # the workload running: kept if it is cut short

    def records_file(self, count: int) -> Path:
        return records_file(self.work_dir / f"records-{count}.txt", count)


def warm_then_alternate(clients: Clients, brokers: list, one, comp: Comparison) -> Comparison:
    """One unrecorded run per broker, then ``config.reps`` recorded ones in alternating order."""
    clients.current = comp
    for broker in brokers:
        one(broker, "warm")
    return alternate(brokers, clients.config.reps, one, comp)


def produce(clients: Clients, brokers: list, partitions: int = 1) -> Comparison:
    """kcat, 100 B records, ``partitions`` partitions (kcat spreads records over them), acks=1,
    a new topic every run."""
    n = clients.config.records
    name = "produce" if partitions == 1 else f"produce{partitions}"
    noun = "partition" if partitions == 1 else "partitions"
    comp = Comparison(name, f"produce 100 B, {partitions} {noun}, acks=1", "kcat", "rec/s", "CPU-s/M rec")

    def one(broker, rep):
        topic = f"ab-{name}-{rep}"
        admin.create_topic(broker.bootstrap, topic, partitions)
        target = 0 if partitions == 1 else None
        fresh_page_cache(clients.records_file(n))
        m = measured(broker.pid, lambda: kcat_produce(clients, broker, topic, n, "1", target))
        written = sum(high_watermarks(broker.bootstrap, topic, range(partitions)).values())
        if written != m.value:
            raise RuntimeError(f"{broker.name} {topic}: {written} records, sent {m.value}")
        return {"throughput": written / m.wall_s, "cpu_per_unit": m.broker_cpu_s / written * 1e6,
                "records": written, **m.fields()}

    return warm_then_alternate(clients, brokers, one, comp)


def consume(clients: Clients, brokers: list) -> Comparison:
    """kcat reads one partition of 100 B records, filled once per broker, from the beginning."""
    topic = "ab-consume"
    filled = {}
    for broker in brokers:
        admin.create_topic(broker.bootstrap, topic, 1)
        filled[broker.name] = kcat_produce(clients, broker, topic, clients.config.records, "1", 0)
        written = high_watermarks(broker.bootstrap, topic, [0])[0]
        if written != filled[broker.name]:
            raise RuntimeError(f"{broker.name} {topic}: {written} records, sent {filled[broker.name]}")
    comp = Comparison("consume", "consume 100 B, 1 partition, from the page cache", "kcat",
                      "rec/s", "CPU-s/M rec")

    def one(broker, rep):
        n = filled[broker.name]
        m = measured(broker.pid, lambda: clients.kcat.consume(broker.bootstrap, topic, n))
        return {"throughput": n / m.wall_s, "cpu_per_unit": m.broker_cpu_s / n * 1e6,
                "records": m.value.records, **m.fields()}

    return warm_then_alternate(clients, brokers, one, comp)


def bandwidth(clients: Clients, brokers: list) -> Comparison:
    """The raw generator: ~1 MiB batches of 1,000-byte records, acks=1, window 8, a new
    one-partition topic every run (``workloads.produce.raw_bandwidth_run``)."""
    cfg = clients.config
    requests = bandwidth_requests(cfg.bandwidth_mib)
    comp = Comparison("bandwidth", "produce ~1 MiB batches (bandwidth), acks=1",
                      f"raw, window {cfg.window}", "GB/s", "CPU-s/GB")
    return warm_then_alternate(
        clients, brokers,
        lambda broker, rep: raw_bandwidth_run(broker, f"ab-bandwidth-{rep}", requests, cfg.window), comp)


def fetch(clients: Clients, brokers: list) -> Comparison:
    """The raw reader: ~1 MiB batches of 1,000-byte records over 4 partitions, filled once per
    broker by the raw generator, read from the page cache with pipelined 32 MiB fetches
    (``workloads.consume.fill_bandwidth_topic``, ``raw_consume_run``)."""
    cfg = clients.config
    ends = {broker.name: fill_bandwidth_topic(broker, "ab-fetch", cfg.bandwidth_mib, cfg.window)
            for broker in brokers}
    comp = Comparison("fetch", "consume ~1 MiB batches (bandwidth)",
                      f"raw, fetch {cfg.fetch_max_mib} MiB x{len(ends[brokers[0].name])}", "GB/s", "CPU-s/GB")
    return warm_then_alternate(
        clients, brokers,
        lambda broker, rep: raw_consume_run(broker, "ab-fetch", ends[broker.name], cfg.fetch_max_mib), comp)


RUNNERS = {"produce": produce, "produce8": lambda c, b: produce(c, b, 8), "consume": consume,
           "bandwidth": bandwidth, "fetch": fetch}

