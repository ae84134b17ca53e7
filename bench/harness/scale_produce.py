"""The producer side of ``bench/bench_scale.py``: records of 100 B, acks=all, spread over every
partition of a set of topics (record i to partition i mod count), at full speed or paced, with
each record's time from ``produce()`` to its acknowledgement (confluent-kafka's
``Message.latency()``).

Figures (`Acks.figures`): ``rps`` acknowledged records per second, ``p50_ms``/``p99_ms``,
``failed`` (errors plus records still queued when ``flush`` gave up), ``first_failures``.
"""

from __future__ import annotations

import time

from confluent_kafka import Producer

from . import scale_report as report


class Acks:
    """Each acknowledged record's time from ``produce()`` to its acknowledgement, and failures."""

    def __init__(self) -> None:
        self.latencies: list[float] = []
        self.failed: list[str] = []

    def __call__(self, err, msg) -> None:
        if err is None:
            self.latencies.append(msg.latency())
        else:
            self.failed.append(str(err))

    def figures(self, seconds: float, left: int) -> dict:
        return {"rps": len(self.latencies) / seconds, "p50_ms": _ms(report.percentile(self.latencies, 50)),
                "p99_ms": _ms(report.percentile(self.latencies, 99)), "failed": len(self.failed) + left,
                "first_failures": self.failed[:3]}


def warm_producer(bootstrap: str, layout, window: int) -> Producer:
    """acks=all, linger.ms=5; every topic's metadata and connections made outside the clock."""
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5,
                         "queue.buffering.max.messages": window, "message.timeout.ms": 300000})
    for topic, _ in layout:
        producer.produce(topic, b"warm-up", partition=0)
    producer.flush(120)
    return producer


def _send(producer: Producer, target: tuple[str, int], acks: Acks) -> None:
    while True:
        try:
            producer.produce(target[0], b"v" * 100, partition=target[1], on_delivery=acks)
            return
        except BufferError:  # --window records queued: wait for acknowledgements
            producer.poll(0.005)


def produce(bootstrap: str, layout, records: int, window: int) -> dict:
    """Full speed: ``records`` records, record i to partition i mod count."""
    producer, acks, order = warm_producer(bootstrap, layout, window), Acks(), report.targets(layout)
    begin = time.monotonic()
    for i in range(records):
        _send(producer, order[i % len(order)], acks)
        if i % 1000 == 0:
            producer.poll(0)
    left = producer.flush(300)
    seconds = time.monotonic() - begin
    return {"records": records, "seconds": seconds, **acks.figures(seconds, left), "started_at": begin}


def produce_paced(bootstrap: str, layout, rate: float, seconds: float) -> dict:
    """``rate`` records/s for ``seconds``, sent every 10 ms on schedule (a late tick catches up):
    the latency of acks=all when the cluster keeps up, without the producer's queue in it."""
    producer, acks, order = warm_producer(bootstrap, layout, 100_000), Acks(), report.targets(layout)
    begin, sent = time.monotonic(), 0
    while (now := time.monotonic()) < begin + seconds:
        due = int((now - begin) * rate)
        for i in range(sent, due):
            _send(producer, order[i % len(order)], acks)
        sent = max(sent, due)
        producer.poll(0)
        time.sleep(max(0.0, 0.01 - (time.monotonic() - now)))
    left = producer.flush(300)
    out = acks.figures(time.monotonic() - begin, left)
    return {"rate": rate, "records": sent, "p50_ms": out["p50_ms"], "p99_ms": out["p99_ms"], "failed": out["failed"]}



def _ms(seconds: float | None) -> float | None:
    return None if seconds is None else seconds * 1000

