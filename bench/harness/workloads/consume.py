"""Consume workloads, reading what is already in the page cache (or, for Tansu, in memory).

- ``consume_100b``: kcat reads ``records`` 100-byte records of one partition from the
  beginning to the end (``kcat.CONSUMER_CONFIG``); the topic is filled once per broker, with
  kcat, before the measured runs, so every run reads the same log.
- ``consume_bandwidth``: the raw generator reads ``bandwidth_mib`` of ~1 MiB batches, spread
  over 4 partitions, with Fetch requests of ``fetch_max_mib``, one in flight per partition
  (so four pipelined on the connection); filled once per broker with the raw producer.
"""

from __future__ import annotations

from .. import admin
from ..comparison import Comparison, alternate
from ..measure import measured
from ..raw_fetch import fetch_range
from ..raw_produce import batch_of_size, pipelined_produce
from ..wire import produce_frame
from .produce import kcat_produce

MIB = 1 << 20
PARTITIONS = 4  # one Fetch in flight per partition: four pipelined fetches


def consume_100b(session) -> None:
    cfg = session.config
    topic = "c100"
    filled = {}
    for broker in session.main_brokers():
        admin.create_topic(broker.bootstrap, topic, 1)
        filled[broker.name] = kcat_produce(session, broker, topic, cfg.records, "1", 0)
    comp = Comparison("consume_100b", "consume 100 B, 1 partition, from the page cache",
                      "kcat", "rec/s", "CPU-s/M rec")

    def one(broker, rep):
        n = filled[broker.name]
        m = measured(broker.pid, lambda: session.kcat.consume(broker.bootstrap, topic, n))
        return {"throughput": n / m.wall_s, "cpu_per_unit": m.broker_cpu_s / n * 1e6, **m.fields()}

    session.comparisons.append(alternate(session.main_brokers(), cfg.reps, one, comp))
    session.show(comp)


def fill_bandwidth_topic(broker, topic: str, bandwidth_mib: int, window: int) -> dict[int, int]:
    """Create ``topic`` with `PARTITIONS` partitions and write ``bandwidth_mib`` of ~1 MiB
    batches (1,000-byte records) over them with the raw producer; returns each partition's
    end offset."""
    batch, per_batch = batch_of_size(MIB, 1000)
    per_partition = max(1, bandwidth_mib * MIB // len(batch) // PARTITIONS)
    admin.create_topic(broker.bootstrap, topic, PARTITIONS)
    frames = [produce_frame(topic, {p: batch}, acks=1) for p in range(PARTITIONS)]
    pipelined_produce(broker.bootstrap, frames, per_partition * PARTITIONS, window, len(batch), per_batch)
    return {p: per_partition * per_batch for p in range(PARTITIONS)}


def raw_consume_run(broker, topic: str, ends: dict[int, int], fetch_max_mib: int) -> dict:
    """One raw read of ``topic`` from offset 0 to ``ends``, one Fetch of ``fetch_max_mib`` in
    flight per partition; every record must come back. Returns the run's metrics."""
    m = measured(broker.pid, lambda: fetch_range(broker.bootstrap, topic, ends, fetch_max_mib * MIB))
    if m.value.records != sum(ends.values()):
        raise RuntimeError(f"{broker.name}: read {m.value.records} of {sum(ends.values())}")
    gb = m.value.bytes / 1e9
    return {"throughput": gb / m.value.seconds, "cpu_per_unit": m.broker_cpu_s / gb,
            "fetches": m.value.requests, **m.fields()}


def consume_bandwidth(session) -> None:
    cfg = session.config
    topic = "cbw"
    ends = {broker.name: fill_bandwidth_topic(broker, topic, cfg.bandwidth_mib, cfg.window)
            for broker in session.main_brokers()}
    comp = Comparison("consume_1mib_batches", "consume ~1 MiB batches (bandwidth)",
                      f"raw, fetch {cfg.fetch_max_mib} MiB x{PARTITIONS}", "GB/s", "CPU-s/GB")
    session.comparisons.append(alternate(
        session.main_brokers(), cfg.reps,
        lambda broker, rep: raw_consume_run(broker, topic, ends[broker.name], cfg.fetch_max_mib), comp))
    session.show(comp)
