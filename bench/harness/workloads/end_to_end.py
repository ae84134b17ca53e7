"""End-to-end latency percentiles (p50, p99, p99.9) at fixed rates of 100-byte records.

For each rate of ``latency_rates`` (records/s), each broker gets a new one-partition topic and
``latency.run`` (open-loop producer, long-polling consumer in a child process) for
``latency_seconds``. The issue's target is judged at half the maximum produce throughput: the
report places each rate against the median kcat produce rate measured in the same run.

Besides the percentiles, each run's JSON keeps the generator's own lateness (``send_lag_p99_ms``,
``send_lag_max_ms``: how late its sends left, already counted in the latencies) and the p99
of the produce acks (``ack_p99_ms``, from the scheduled time): a tail that the acks share
comes from the produce side of the broker (or the machine), one they lack from the fetch side.
"""

from __future__ import annotations

from dataclasses import asdict

from .. import admin, latency
from ..comparison import Comparison, alternate
from ..measure import measured


def end_to_end_latency(session) -> None:
    cfg = session.config
    for rate in cfg.latency_rates:
        comp = Comparison(f"latency_{rate}", f"end-to-end latency at {rate:,} rec/s (100 B)",
                          "raw, 1 ms batches", "rec/s", "CPU-s/M rec", kind="latency")

        def one(broker, rep, rate=rate):
            topic = f"lat-{rate}-r{rep}"
            admin.create_topic(broker.bootstrap, topic, 1)
            m = measured(broker.pid, lambda: latency.run(broker.bootstrap, topic, rate,
                                                         cfg.latency_seconds))
            r = m.value
            records = r.samples * max(1, round(rate * 0.001))
            return {"throughput": r.achieved_records_per_s,
                    "cpu_per_unit": m.broker_cpu_s / records * 1e6, **asdict(r), **m.fields()}

        session.comparisons.append(alternate(session.main_brokers(), 1, one, comp))
        session.show(comp)
