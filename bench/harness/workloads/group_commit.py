"""acks=all with ``log.flush.interval.messages=1``: every append is flushed before it is
acknowledged, so throughput depends on folding many appends into one fdatasync (group commit).

A dedicated odradek broker runs with that setting; Tansu (memory engine, nothing to flush)
runs as it is, so its figure is what acks=all costs without a disk. Two shapes from the raw
generator, acks=-1: ~1 MiB batches with ``window`` in flight, and 64 KiB batches with 64 in
flight (more, smaller appends per flush). Throughput in MB/s, broker CPU per GB, and the
broker's own fsync + fdatasync calls during the run (``broker_syncs``, counted by
``syscall_counter`` through perf): with a flush before each acknowledgement and group commit,
at least ``requests / window`` of them (no more than ``window`` requests are in flight, so no
flush can cover more); fewer means batches were acknowledged before they were durable.
"""

from __future__ import annotations

from .. import admin
from ..comparison import Comparison, alternate
from .. import syscall_counter
from ..measure import measured
from ..raw_produce import batch_of_size, pipelined_produce
from ..wire import produce_frame

MIB = 1 << 20
SHAPES = ((MIB, None), (64 * 1024, 64))  # (batch bytes, window; None = config.window)


def group_commit(session) -> None:
    cfg = session.config
    counting = syscall_counter.available()
    if not counting:
        session.log("perf is not available: the broker's fsync count is not measured")
    brokers = [session.fresh_odradek("group-commit", log_flush_interval_messages="1"),
               session.main_tansu()]
    try:
        for batch_bytes, window in SHAPES:
            window = window or cfg.window
            batch, per_batch = batch_of_size(batch_bytes, 100 if batch_bytes < MIB else 1000)
            requests = max(1, cfg.group_commit_mib * MIB // len(batch))
            label = "1 MiB" if batch_bytes == MIB else f"{batch_bytes // 1024} KiB"
            comp = Comparison(f"group_commit_{batch_bytes // 1024}k",
                              f"acks=all, flush every message, {label} batches",
                              f"raw, window {window}", "MB/s", "CPU-s/GB")

            def one(broker, rep, batch=batch, per_batch=per_batch, requests=requests,
                    window=window, key=comp.key):
                topic = f"{key}-r{rep}"
                admin.create_topic(broker.bootstrap, topic, 1)
                frames = [produce_frame(topic, {0: batch}, acks=-1)]
                counter = syscall_counter.SyscallCounter(session.work_dir / "perf.data").start() \
                    if counting else None
                m = measured(broker.pid, lambda: pipelined_produce(
                    broker.bootstrap, frames, requests, window, len(batch), per_batch))
                syncs = counter.stop()[broker.pid] if counter else None
                gb = m.value.bytes / 1e9
                return {"throughput": gb * 1e3 / m.value.seconds, "cpu_per_unit": m.broker_cpu_s / gb,
                        "broker_syncs": syncs, "requests": requests, **m.fields()}

            session.comparisons.append(alternate(brokers, cfg.reps, one, comp))
            session.show(comp)
    finally:
        session.discard(brokers[0])
