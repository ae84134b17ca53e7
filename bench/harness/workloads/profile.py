"""py-spy profiles of odradek's broker under four workloads, to show where its time goes.

Not measured runs: each profile runs its own passes against the main odradek broker, repeated
until at least ``PROFILE_SECONDS`` have passed so there are enough samples:

- ``produce_100b`` / ``consume_100b``: kcat, 100-byte records, one partition, acks=1 (the
  client is usually the bottleneck here, so the broker is partly idle);
- ``produce_1mib`` / ``consume_1mib``: the raw generators with ~1 MiB batches over 4
  partitions (the broker is the bottleneck: these show what stands between it and the
  machine's limits);
- ``produce_1000p``: the raw generator writing 10-record batches to 100 of 1,000 partitions per
  request, as the partitions workload does: the cost per partition of a Produce request.

Per profile, the raw collapsed stacks go to ``bench/results/profile-<name>.txt`` (input for
``flamegraph.pl`` or speedscope) and the top functions (``profiler.summarize``) to
``session.profiles``; ``busy`` is the broker's CPU seconds over the wall time of the passes.
"""

from __future__ import annotations

import time

from .. import admin
from ..measure import measured
from ..profiler import Profiler
from ..raw_fetch import fetch_range
from ..raw_produce import batch_of_size, build_batch, pipelined_produce
from ..wire import produce_frame
from .partitions import frames_for
from .produce import kcat_produce

PROFILE_SECONDS = 8.0
MIB = 1 << 20


def _repeat(fn) -> int:
    begin, total = time.perf_counter(), 0
    while time.perf_counter() - begin < PROFILE_SECONDS:
        total += fn()
    return total


def profiles(session) -> None:
    cfg = session.config
    broker = session.main_odradek()
    topic = "profile-100b"
    admin.create_topic(broker.bootstrap, topic, 1)

    def produce_100b():
        return kcat_produce(session, broker, topic, cfg.records, "1", 0)

    def consume_100b():
        return session.kcat.consume(broker.bootstrap, topic, cfg.records).records

    batch, per_batch = batch_of_size(MIB, 1000)
    big = "profile-1mib"
    admin.create_topic(broker.bootstrap, big, 4)
    frames = [produce_frame(big, {p: batch}, acks=1) for p in range(4)]
    requests = 256  # 64 per partition

    def produce_1mib():
        return pipelined_produce(broker.bootstrap, frames, requests, cfg.window, len(batch),
                                 per_batch).records

    def consume_1mib():
        return fetch_range(broker.bootstrap, big, {p: requests // 4 * per_batch for p in range(4)},
                           cfg.fetch_max_mib * MIB).records

    many = "profile-1000p"
    admin.create_topic(broker.bootstrap, many, 1000)
    small = frames_for(many, 1000, build_batch(10, 100))

    def produce_1000p():
        return pipelined_produce(broker.bootstrap, small, 200, cfg.window, 0, 1000).records

    for name, fn in (("produce_100b", produce_100b), ("consume_100b", consume_100b),
                     ("produce_1mib", produce_1mib), ("consume_1mib", consume_1mib),
                     ("produce_1000p", produce_1000p)):
        session.profiles[name] = _profiled(session, broker, name, fn)


def _profiled(session, broker, name: str, fn) -> dict:
    path = session.results_dir / f"profile-{name}.txt"
    profiler = Profiler(broker.pid, path).start()
    time.sleep(0.5)  # py-spy attaches
    m = measured(broker.pid, lambda: _repeat(fn))
    summary = profiler.stop()
    summary.update({"records": m.value, "wall_s": m.wall_s, "broker_cpu_s": m.broker_cpu_s,
                    "busy": m.broker_cpu_s / m.wall_s, "raw": str(path),
                    "records_per_s": m.value / m.wall_s})
    session.log(f"profile {name}: {summary['samples']} samples, broker busy {summary['busy']:.2f}")
    return summary
