"""Write rate of the ``odradek`` streaming sink in each of its modes, side by side.

    .venv/bin/python bench/bench_spark_sink.py [--records 500000] [--size 100] [--partitions 4]
        [--per-batch 100000] [--repeat 2] [--modes noop,false,staged,transactional]

A broker runs as ``odradek broker`` in a child process. A source topic is filled with raw
Produce requests (``bench_spark.fill``: ~1 MiB batches of ``--size``-byte values and 8-byte
keys). Then, per mode, one Structured Streaming query reads the whole topic
(``startingOffsets=earliest``, ``maxOffsetsPerTrigger=--per-batch``, Trigger.AvailableNow, so
every mode writes the same micro-batches) and writes key and value to a fresh target topic
with the same partition count:

- ``noop``: Spark's ``noop`` sink, nothing written: the cost of reading, the floor;
- ``false``: ``exactlyOnce=false``, tasks send straight to the target (at least once);
- ``staged``: ``exactlyOnce=staged``, tasks write a staging topic and the driver re-sends
  every record to the target, tagged (the exactly-once sink before transactions);
- ``transactional``: ``exactlyOnce=transactional`` (the default), each task writes its rows
  in a Kafka transaction that the driver commits with the batch.

The rate is input records over the query's wall time (start to end, the JVM and the Python
workers already warm: every mode first runs once over a small topic of 2,000 records; the
first write of a mode otherwise pays seconds of worker start-up). Modes alternate across ``--repeat`` rounds and
the median is reported, with the ratios transactional/staged (issue goal: >= 3) and
transactional/false. Every target is read back at read_committed and must hold every record
exactly once (by count). Shared 2-core machine: expect noise; compare rows of one run.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import bench_spark  # noqa: E402

from odradek.client import AdminClient, Consumer, NewTopic, Producer, TopicPartition  # noqa: E402
from odradek.demo.embedded_broker import EmbeddedBroker  # noqa: E402

MODES = ("noop", "false", "staged", "transactional")


def run_query(spark, bootstrap: str, mode: str, partitions: int, per_batch: int, work: Path,
              source: str = bench_spark.TOPIC) -> tuple[str, float]:
    """One AvailableNow query over the whole ``source`` in ``mode``; (target topic, seconds)."""
    target = f"bench-sink-{mode}-{uuid.uuid4().hex[:6]}"
    if mode != "noop":
        with AdminClient(bootstrap) as admin:
            admin.create_topics([NewTopic(target, partitions, 1)])
    df = (spark.readStream.format("odradek").option("kafka.bootstrap.servers", bootstrap)
          .option("subscribe", source).option("startingOffsets", "earliest")
          .option("maxOffsetsPerTrigger", str(per_batch)).load().select("key", "value"))
    checkpoint = str(work / f"checkpoint-{target}")
    if mode == "noop":
        writer = df.writeStream.format("noop")
    else:
        writer = (df.writeStream.format("odradek").option("kafka.bootstrap.servers", bootstrap)
                  .option("topic", target).option("exactlyOnce", mode))
    t = time.perf_counter()
    query = writer.option("checkpointLocation", checkpoint).trigger(availableNow=True).start()
    query.awaitTermination()
    seconds = time.perf_counter() - t
    if query.exception() is not None:
        raise RuntimeError(f"{mode}: {query.exception()}")
    return target, seconds


def committed_count(bootstrap: str, topic: str, partitions: int) -> int:
    """Records of ``topic`` at read_committed (markers and aborted records not counted)."""
    tps = [TopicPartition(topic, p) for p in range(partitions)]
    count = 0
    with Consumer(bootstrap, isolation_level="read_committed", max_poll_records=100_000) as consumer:
        consumer.assign(tps)
        ends = consumer.end_offsets(tps)
        consumer.seek_to_beginning(*tps)
        deadline = time.monotonic() + 120
        while any(consumer.position(tp) < ends[tp] for tp in tps) and time.monotonic() < deadline:
            count += sum(len(records) for records in consumer.poll(1000).values())
    return count


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=500_000)
    parser.add_argument("--size", type=int, default=100)
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--per-batch", type=int, default=100_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--modes", default=",".join(MODES))
    args = parser.parse_args()
    modes = [m.strip() for m in args.modes.split(",") if m.strip()]
    from odradek.spark.session import local_session

    with tempfile.TemporaryDirectory(prefix="odradek-bench-sink-") as data, EmbeddedBroker(Path(data)) as broker:
        bootstrap = broker.bootstrap
        with AdminClient(bootstrap) as admin:
            admin.create_topics([NewTopic(bench_spark.TOPIC, args.partitions, 1)])
        asyncio.run(bench_spark.fill(bootstrap, args.records, args.size, args.partitions))
        with AdminClient(bootstrap) as admin:
            ends = admin.list_offsets({(bench_spark.TOPIC, p): -1 for p in range(args.partitions)})
        total = sum(o.offset for o in ends.values())
        spark = local_session("odradek-bench-sink", fast_start=False)
        work = Path(data) / "spark"
        with AdminClient(bootstrap) as admin:
            admin.create_topics([NewTopic("bench-warm-up", args.partitions, 1)])
        with Producer(bootstrap) as producer:
            for i in range(2000):
                producer.send("bench-warm-up", b"x" * args.size, key=b"m%07d" % i)
        for mode in modes:
            run_query(spark, bootstrap, mode, args.partitions, args.per_batch, work, "bench-warm-up")
        seconds: dict[str, list[float]] = {m: [] for m in modes}
        for round_ in range(args.repeat):
            for mode in (modes if round_ % 2 == 0 else list(reversed(modes))):
                target, wall = run_query(spark, bootstrap, mode, args.partitions, args.per_batch, work)
                if mode != "noop":
                    landed = committed_count(bootstrap, target, args.partitions)
                    if landed != total:
                        raise RuntimeError(f"{mode}: {landed:,} records at read_committed, expected {total:,}")
                seconds[mode].append(wall)
                print(f"  round {round_ + 1} {mode:>13}: {total:,} records in {wall:6.2f} s = {total / wall:>9,.0f}/s",
                      flush=True)
        spark.stop()
    rate = {m: total / statistics.median(s) for m, s in seconds.items()}
    print(f"\nstreaming sink, {total:,} records of {args.size} B in micro-batches of {args.per_batch:,}, "
          f"{args.partitions} partitions, local[2], median of {args.repeat}:")
    print("| mode | records/s | vs staged |")
    print("|---|---|---|")
    for m in modes:
        versus = f"{rate[m] / rate['staged']:.2f}x" if "staged" in rate else "-"
        print(f"| {m} | {rate[m]:,.0f} | {versus} |")
    if "transactional" in rate and "staged" in rate:
        print(f"transactional / staged = {rate['transactional'] / rate['staged']:.2f} (goal >= 3)")
    if "transactional" in rate and "false" in rate:
        print(f"transactional / plain (exactlyOnce=false) = {rate['transactional'] / rate['false']:.2f}")
    print(f"machine load average now: {os.getloadavg()[0]:.1f} (2 cores; other work skews the numbers)")


if __name__ == "__main__":
    main()
