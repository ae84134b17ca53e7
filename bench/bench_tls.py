#!/usr/bin/env python3
"""TLS against plaintext: the same client produces and consumes through a broker's PLAINTEXT
and SSL listeners, side by side.

Run: ``.venv/bin/python bench/bench_tls.py`` (about a minute). One odradek broker in a child
process listens on PLAINTEXT and SSL (a CA and a server certificate made for the run,
``tests/server/tls_certs.py``; EC P-256, TLS 1.3, AES-256-GCM as OpenSSL negotiates). The client
is confluent-kafka (librdkafka, in C: the broker, not the client, is what is measured):
``--records`` records of ``--value-size`` bytes produced with acks=1, linger.ms=5, one
partition, a topic per run; then each topic consumed from offset 0 to its end by a fresh
consumer (assign, no group). Runs alternate plaintext and TLS ``--reps`` times. Reported
(medians): records/s as the client sees it, and the broker's CPU per record (per-thread
``schedstat``, ``harness/proc_stats.py``). Under TLS the broker cannot sendfile: every fetched
region is read with one pread and encrypted by OpenSSL in the event loop's thread.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition  # noqa: E402

from bench.harness.proc_stats import cpu_seconds  # noqa: E402
from odradek.testing.broker import BrokerProcess, free_port  # noqa: E402
from tests.server.tls_certs import make_pki  # noqa: E402


def produce(common: dict, topic: str, records: int, value: bytes) -> None:
    producer = Producer({**common, "acks": "1", "linger.ms": 5, "queue.buffering.max.messages": 1_000_000})
    for i in range(records):
        while True:
            try:
                producer.produce(topic, value)
                break
            except BufferError:
                producer.poll(0.01)
    if producer.flush(120) != 0:
        raise RuntimeError("records left undelivered")


def consume(common: dict, topic: str, records: int) -> None:
    consumer = Consumer({**common, "group.id": f"bench-{uuid.uuid4().hex[:8]}", "enable.auto.commit": False,
                         "fetch.max.bytes": 52428800, "max.partition.fetch.bytes": 10485760})
    consumer.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
    seen = 0
    deadline = time.monotonic() + 120
    while seen < records:
        if time.monotonic() > deadline:
            raise RuntimeError(f"consumed {seen} of {records}")
        for msg in consumer.consume(10000, 1.0):
            if msg.error() is None:
                seen += 1
    consumer.close()


def measure(pid: int, fn, *args) -> tuple[float, float]:
    cpu0, t0 = cpu_seconds(pid), time.perf_counter()
    fn(*args)
    return time.perf_counter() - t0, cpu_seconds(pid) - cpu0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=500_000)
    parser.add_argument("--value-size", type=int, default=100)
    parser.add_argument("--reps", type=int, default=3)
    args = parser.parse_args()
    value = b"x" * args.value_size
    with tempfile.TemporaryDirectory() as tmp:
        pki = make_pki(Path(tmp) / "pki")
        plain_port, ssl_port = free_port(), free_port()
        overrides = {"listeners": f"PLAINTEXT://127.0.0.1:{plain_port},SSL://127.0.0.1:{ssl_port}",
                     "ssl.keystore.location": pki["server"], "ssl.keystore.type": "PEM"}
        with BrokerProcess(Path(tmp) / "data", **overrides) as broker:  # started; SIGTERM at the end
            pid = broker.pid
            clients = {
                "plaintext": {"bootstrap.servers": f"127.0.0.1:{plain_port}"},
                "TLS": {"bootstrap.servers": f"127.0.0.1:{ssl_port}", "security.protocol": "SSL",
                        "ssl.ca.location": pki["ca"]},
            }
            results = {(name, op): [] for name in clients for op in ("produce", "consume")}
            for rep in range(args.reps):
                for name, common in clients.items():
                    topic = f"bench-tls-{name}-{rep}".replace("TLS", "tls")
                    results[(name, "produce")].append(measure(pid, produce, common, topic, args.records, value))
                    results[(name, "consume")].append(measure(pid, consume, common, topic, args.records))
    print(f"{args.records} records of {args.value_size} B, {args.reps} reps, medians")
    print("| | plaintext | TLS | TLS / plaintext |")
    print("|---|---|---|---|")
    for op in ("produce", "consume"):
        row = {}
        for name in clients:
            runs = results[(name, op)]
            rate = statistics.median(args.records / wall for wall, _ in runs)
            cpu_us = statistics.median(cpu / args.records * 1e6 for _, cpu in runs)
            row[name] = (rate, cpu_us)
        (pr, pc), (tr, tc) = row["plaintext"], row["TLS"]
        print(f"| {op} | {pr / 1e3:.0f}k records/s, broker {pc:.2f} µs/record | "
              f"{tr / 1e3:.0f}k records/s, broker {tc:.2f} µs/record | {tr / pr:.2f}x |")


if __name__ == "__main__":
    main()
