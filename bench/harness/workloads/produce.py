"""Produce workloads: 100-byte records through kcat, and 1 MiB batches through the raw generator.

- ``produce_100b``: ``records`` records of 100 B, 1 and 8 partitions, acks=1 and acks=all,
  kcat with linger 5 ms and 1 MB batches (``kcat.PRODUCER_CONFIG``); every run writes a new
  topic, and afterwards the topic's high watermarks must add up to what was sent.
- ``produce_bandwidth``: ``bandwidth_mib`` of pre-built ~1 MiB batches (1,000-byte records),
  acks=1, one partition, ``window`` requests in flight: the broker's capacity into the page
  cache, against the machine's loopback and page-cache limits measured in the same run.
"""

from __future__ import annotations

import threading

from .. import admin
from ..brokers import TansuBroker
from ..comparison import Comparison, alternate
from ..measure import fresh_page_cache, measured
from ..raw_produce import batch_of_size, pipelined_produce
from ..wire import high_watermarks, produce_frame

MIB = 1 << 20


def kcat_produce(session, broker, topic: str, records: int, acks: str, partition: int | None):
    """``records`` records through ``session.config.producers`` concurrent kcat processes."""
    n = session.config.producers
    share = records // n
    path = session.records_file(share)
    failures: list[BaseException] = []

    def one():
        try:
            session.kcat.produce(broker.bootstrap, topic, path, share, acks, partition)
        except BaseException as e:  # noqa: BLE001 - re-raised below
            failures.append(e)

    threads = [threading.Thread(target=one) for _ in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if failures:
        raise failures[0]
    return share * n


def produce_100b(session) -> None:
    cfg = session.config
    for partitions in (1, 8):
        for acks in ("1", "all"):
            comp = Comparison(f"produce_100b_p{partitions}_acks{acks}",
                              f"produce 100 B, {partitions} partition{'s' * (partitions > 1)}, acks={acks}",
                              f"kcat x{cfg.producers}", "rec/s", "CPU-s/M rec")

            def one(broker, rep, partitions=partitions, acks=acks):
                topic = f"p100-p{partitions}-a{acks}-r{rep}"
                admin.create_topic(broker.bootstrap, topic, partitions)
                fresh_page_cache(session.records_file(cfg.records // cfg.producers))
                m = measured(broker.pid, lambda: kcat_produce(
                    session, broker, topic, cfg.records, acks, 0 if partitions == 1 else None))
                written = sum(high_watermarks(broker.bootstrap, topic, range(partitions)).values())
                if written != m.value:
                    raise RuntimeError(f"{broker.name} {topic}: {written} records, sent {m.value}")
                forget_in_memory_data(broker)
                return {"throughput": m.value / m.wall_s,
                        "cpu_per_unit": m.broker_cpu_s / m.value * 1e6, **m.fields()}

            session.comparisons.append(alternate(session.main_brokers(), cfg.reps, one, comp))
            session.show(comp)


def raw_bandwidth_run(broker, topic: str, requests: int, window: int) -> dict:
    """One raw produce run into a new one-partition topic: ``requests`` pre-built ~1 MiB
    batches of 1,000-byte records, acks=1, ``window`` in flight; afterwards the topic's high
    watermark must equal the records sent. Returns the run's metrics (GB/s, CPU-s per GB)."""
    batch, per_batch = batch_of_size(MIB, 1000)
    admin.create_topic(broker.bootstrap, topic, 1)
    frames = [produce_frame(topic, {0: batch}, acks=1)]
    fresh_page_cache()
    m = measured(broker.pid, lambda: pipelined_produce(
        broker.bootstrap, frames, requests, window, len(batch), per_batch))
    written = high_watermarks(broker.bootstrap, topic, [0])[0]
    if written != m.value.records:
        raise RuntimeError(f"{broker.name} {topic}: {written} records, sent {m.value.records}")
    gb = m.value.bytes / 1e9
    return {"throughput": gb / m.value.seconds, "cpu_per_unit": m.broker_cpu_s / gb,
            "records_per_s": m.value.records / m.value.seconds, **m.fields()}


def bandwidth_requests(bandwidth_mib: int) -> int:
    """How many ~1 MiB batches make ``bandwidth_mib``."""
    return max(1, bandwidth_mib * MIB // len(batch_of_size(MIB, 1000)[0]))


def produce_bandwidth(session) -> None:
    cfg = session.config
    requests = bandwidth_requests(cfg.bandwidth_mib)
    comp = Comparison("produce_1mib_batches", "produce ~1 MiB batches (bandwidth), acks=1",
                      f"raw x1, window {cfg.window}", "GB/s", "CPU-s/GB")

    def one(broker, rep):
        metrics = raw_bandwidth_run(broker, f"pbw-r{rep}", requests, cfg.window)
        forget_in_memory_data(broker)
        return metrics

    session.comparisons.append(alternate(session.main_brokers(), cfg.reps, one, comp))
    session.show(comp)


def forget_in_memory_data(broker) -> None:
    """After a produce run: a broker keeping records in memory (Tansu's memory engine) is
    restarted empty. What it held would otherwise push the machine past the ~4 GB beyond which
    new page-cache pages cost odradek's next runs ~6x (``measure.fresh_page_cache``)."""
    if isinstance(broker, TansuBroker):
        broker.restart()
