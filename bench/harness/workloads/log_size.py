"""Does cost grow with the size of the log? Append and random-read cost at each log size.

For each size of ``log_sizes_mib`` a fresh broker gets one partition filled with 64 KiB batches
(~640 records of 100 B; raw generator, acks=1) up to that size, unmeasured. Then, measured:

- append: ``log_append_mib`` more of the same batches at the end (GB/s, broker CPU per GB);
- random read: ``random_reads`` single Fetch requests at uniformly random offsets, one at a
  time, ``max_bytes`` 1 (so each returns the one whole batch holding the offset): p50 and p99
  latency in ms and broker CPU per read.
A log that appends in O(1) and looks up in O(log segments) shows the same figures at every
size. Tansu keeps its log in memory, so it runs only sizes up to ``peer_log_cap_mib``.
"""

from __future__ import annotations

import statistics

from .. import admin
from ..comparison import Comparison, alternate
from ..measure import measured
from ..raw_fetch import random_reads
from ..raw_produce import batch_of_size, pipelined_produce
from ..wire import produce_frame

MIB = 1 << 20
BATCH_BYTES = 64 * 1024


def log_size(session) -> None:
    cfg = session.config
    batch, per_batch = batch_of_size(BATCH_BYTES, 100)
    window = max(cfg.window, 32)  # small requests: keep the pipe full
    for size in cfg.log_sizes_mib:
        brokers = [session.fresh_odradek(f"logsize-{size}")]
        if size <= cfg.peer_log_cap_mib:
            brokers.append(session.fresh_tansu(f"logsize-{size}"))
        label = f"{size / 1024:g} GiB" if size >= 1024 else f"{size} MiB"
        comp = Comparison(f"log_size_{size}", f"log of {label}: append, random read",
                          "raw, 64 KiB batches", "GB/s", "CPU-s/GB", kind="log_size")

        def one(broker, rep, size=size):
            topic = "logsize"
            admin.create_topic(broker.bootstrap, topic, 1)
            frames = [produce_frame(topic, {0: batch}, acks=1)]
            fill = max(1, size * MIB // len(batch))
            filled = measured(broker.pid, lambda: pipelined_produce(
                broker.bootstrap, frames, fill, window, len(batch), per_batch))
            more = max(1, cfg.log_append_mib * MIB // len(batch))
            m = measured(broker.pid, lambda: pipelined_produce(
                broker.bootstrap, frames, more, window, len(batch), per_batch))
            end = (fill + more) * per_batch
            reads = measured(broker.pid, lambda: random_reads(broker.bootstrap, topic, end,
                                                              cfg.random_reads, 1))
            lat = sorted(reads.value)
            gb = m.value.bytes / 1e9
            return {"throughput": gb / m.value.seconds, "cpu_per_unit": m.broker_cpu_s / gb,
                    "fill_gbps": filled.value.bytes / 1e9 / filled.value.seconds,
                    "read_p50_ms": statistics.median(lat), "read_p99_ms": lat[int(len(lat) * 0.99)],
                    "read_cpu_ms": reads.broker_cpu_s / len(lat) * 1e3, "log_mib": size,
                    **m.fields()}

        try:
            session.comparisons.append(alternate(brokers, 1, one, comp))
        finally:
            for b in brokers:
                session.discard(b)
        session.show(comp)
