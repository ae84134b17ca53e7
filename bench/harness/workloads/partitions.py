"""Many partitions on one broker: throughput, memory and restart time at 10 / 1,000 / 10,000.

For each count both brokers start fresh (so memory reflects that count alone), side by side,
and each in turn:

1. creates one topic of ``count`` partitions (``create_s``: until every partition has a leader);
2. takes ``partition_requests`` Produce requests (acks=1) from the raw generator, each carrying
   one batch of 10 records of 100 B for each of 100 partitions (fewer if the topic has fewer),
   cycling so every partition is written: ``throughput`` in rec/s, broker CPU per M records;
3. reports resident memory (``VmRSS``) idle, after creation and after the writes;
4. restarts (odradek only: Tansu's memory engine loses its topics on restart): a clean stop
   (``stop_s``: flush and checkpoints), then a start until it prints ready (``start_s``) and
   until a produce to the last partition is acknowledged (``serve_s``; both counted from the
   launch of the new process, so ``serve_s`` is the restart time the issue's target means).
"""

from __future__ import annotations

import time

from .. import admin
from ..comparison import Comparison, alternate
from ..measure import measured
from ..proc_stats import memory_bytes
from ..raw_produce import build_batch, pipelined_produce
from ..wire import BrokerError, RawConnection, check_produce_response, produce_frame

PER_REQUEST = 100
RECORDS_PER_BATCH = 10


def frames_for(topic: str, count: int, batch: bytes) -> list[bytearray]:
    group = min(count, PER_REQUEST)
    return [produce_frame(topic, {p: batch for p in range(start, min(start + group, count))}, 1)
            for start in range(0, count, group)]


def _first_ack(bootstrap: str, topic: str, partition: int, batch: bytes, deadline: float) -> None:
    frame = produce_frame(topic, {partition: batch}, acks=1)
    while True:
        try:
            with RawConnection(bootstrap) as conn:
                conn.send(frame)
                check_produce_response(conn.recv_frame())
                return
        except (BrokerError, OSError):
            if time.monotonic() > deadline:
                raise
            time.sleep(0.01)


def _restart(broker, topic: str, count: int, batch: bytes) -> dict:
    stop_s = broker.stop()
    begin = time.perf_counter()
    broker.start()
    _first_ack(broker.bootstrap, topic, count - 1, batch, time.monotonic() + 600)
    return {"stop_s": stop_s, "start_s": broker.last_start_seconds,
            "serve_s": time.perf_counter() - begin,
            "rss_mb_restarted": memory_bytes(broker.pid)["rss"] / 1e6}


def partition_scale(session) -> None:
    cfg = session.config
    batch = build_batch(RECORDS_PER_BATCH, 100)
    for count in cfg.partition_counts:
        brokers = [session.fresh_odradek(f"parts-{count}"), session.fresh_tansu(f"parts-{count}")]
        comp = Comparison(f"partitions_{count}", f"{count:,} partitions on one broker",
                          "raw, 100 partitions x 10 rec per request", "rec/s", "CPU-s/M rec",
                          kind="partitions")
        frames = None

        def one(broker, rep, count=count):
            nonlocal frames
            topic = f"parts{count}"
            rss0 = memory_bytes(broker.pid)["rss"]
            create_s = admin.create_topic(broker.bootstrap, topic, count, timeout=900)
            rss1 = memory_bytes(broker.pid)["rss"]
            frames = frames or frames_for(topic, count, batch)
            requests = -(-max(cfg.partition_requests, len(frames)) // len(frames)) * len(frames)
            per_request = min(count, PER_REQUEST) * RECORDS_PER_BATCH
            m = measured(broker.pid, lambda: pipelined_produce(
                broker.bootstrap, frames, requests, cfg.window, 0, per_request))
            out = {"throughput": m.value.records / m.value.seconds,
                   "cpu_per_unit": m.broker_cpu_s / m.value.records * 1e6, "create_s": create_s,
                   "rss_mb_idle": rss0 / 1e6, "rss_mb_created": rss1 / 1e6,
                   "rss_mb_written": memory_bytes(broker.pid)["rss"] / 1e6, **m.fields()}
            if broker.name == "odradek":
                out.update(_restart(broker, topic, count, batch))
            return out

        try:
            session.comparisons.append(alternate(brokers, 1, one, comp))
        finally:
            for b in brokers:
                session.discard(b)
        session.show(comp)
