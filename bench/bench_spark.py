"""Throughput of the ``odradek`` Spark data source: a batch scan of 100-byte records.

    .venv/bin/python bench/bench_spark.py [--records 2000000] [--size 100] [--partitions 4]
        [--repeat 3] [--parquet]

A broker runs as ``odradek broker`` in a child process (its own CPU, not this process's
GIL). The topic is filled with raw Produce requests of pre-built ~1 MiB batches (keys of 8
bytes, values of ``--size`` bytes), so loading takes seconds. Then:

1. decode, no Spark: one Fetch answer (8 MiB) decoded by the client's per-record decoder
   (``RecordBatch.records()``, what ``Consumer.poll`` does) and by the source's
   vectorised decoder (``record_columns``), in µs of CPU per record: why executors do not
   go through ``Consumer.poll``;
2. one partition read end to end by ``range_reader`` in this process (fetch + decode +
   Arrow), rows/s;
3. Spark, ``local[2]``: ``count()`` of the whole topic ``--repeat`` times (and with
   ``--parquet`` a ``write.parquet``), rows/s, and where the CPU went during the scan:
   the JVM, the Python workers (fetch, decode, Arrow), the broker, everything else.

The target (issue 7) is 500k rows/s for the scan in ``local[2]``. On a shared machine the
neighbours' CPU shows up as "other" and slows the scan; ``nice -n -10`` measures the source
rather than them, and the line "two cores of its own would give" converts the scan's own CPU
time into a rate.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from odradek.client import AdminClient, NewTopic  # noqa: E402
from odradek.client.cluster import ClusterClient  # noqa: E402
from odradek.demo.embedded_broker import EmbeddedBroker  # noqa: E402
from odradek.protocol.generated import ApiKey  # noqa: E402
from odradek.protocol.generated.produce_request import (  # noqa: E402
    PartitionProduceData, ProduceRequest, TopicProduceData,
)
from odradek.records.builder import BatchBuilder, BatchSpec  # noqa: E402

TOPIC = "bench-scan"
_TICK = os.sysconf("SC_CLK_TCK")


def build_batch(target_bytes: int, size: int) -> tuple[bytes, int]:
    builder = BatchBuilder(BatchSpec())
    value = os.urandom(size)
    ts = int(time.time() * 1000)
    while builder.uncompressed_size < target_bytes:
        builder.append(ts, b"m%07d" % (len(builder) % 10_000_000), value)
    return builder.build(), len(builder)


async def fill(bootstrap: str, records: int, size: int, partitions: int) -> None:
    """About ``records`` records spread evenly over the partitions, 8 requests in flight."""
    batch, per_batch = build_batch(1_000_000, size)  # under message.max.bytes (1048588)
    cluster = ClusterClient(bootstrap)
    await cluster.start()
    await cluster.refresh([TOPIC])
    requests = max(1, records // per_batch)
    pending: set = set()
    for i in range(requests):
        p = i % partitions
        leader = cluster.metadata.leader(TOPIC, p)
        request = ProduceRequest(acks=-1, timeout_ms=30_000, topic_data=[
            TopicProduceData(TOPIC, [PartitionProduceData(p, batch)])])
        pending.add(asyncio.ensure_future(cluster.send(leader, ApiKey.PRODUCE, request)))
        if len(pending) >= 8:
            done, pending = await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
            for d in done:
                _check(d.result())
    for response in await asyncio.gather(*pending):
        _check(response)
    await cluster.close()
    print(f"loaded {requests * per_batch:,} records of {size} B ({requests} batches of {per_batch})")


def _check(response) -> None:
    for topic in response.responses:
        for p in topic.partition_responses:
            if p.error_code:
                raise RuntimeError(f"produce to {topic.name}-{p.index} failed: error {p.error_code} {p.error_message}")


def decode_costs(bootstrap: str) -> None:
    from odradek.records.reader import iter_batches
    from odradek.spark.record_columns import decode_fetched
    from odradek.spark.range_reader import FetchConfig, _RangeReader
    from odradek.spark.offset_range import OffsetRange

    reader = _RangeReader(FetchConfig(bootstrap), OffsetRange(TOPIC, 0, 0, 1 << 62))
    code, records, high_watermark, _ = reader._send(0).result()
    records = bytes(records)
    print(f"fetch: error {code}, {len(records)} bytes, high watermark {high_watermark}")
    batches = list(iter_batches(records))
    count = sum(b.header.records_count for b in batches)

    def cpu(fn, reps=3) -> float:
        best = float("inf")
        for _ in range(reps):
            t = time.process_time()
            fn()
            best = min(best, time.process_time() - t)
        return best / count * 1e6

    slow = cpu(lambda: [b.records() for b in batches])
    fast = cpu(lambda: decode_fetched(records, 0, 1 << 62))
    print(f"decode one 8 MiB fetch ({count:,} records): client per-record decoder {slow:.2f} µs/record, "
          f"vectorised {fast:.2f} µs/record ({slow / fast:.1f}x)")


def one_partition(bootstrap: str, end: int) -> None:
    from odradek.spark.offset_range import OffsetRange
    from odradek.spark.range_reader import FetchConfig, read_range

    t, c = time.perf_counter(), time.process_time()
    rows = sum(b.num_rows for b in read_range(FetchConfig(bootstrap), OffsetRange(TOPIC, 0, 0, end)))
    wall, cpu = time.perf_counter() - t, time.process_time() - c
    print(f"range_reader, one partition in this process: {rows / wall:,.0f} rows/s, "
          f"{cpu / rows * 1e6:.2f} µs CPU/row")


def cpu_by_process(broker_pid: int) -> dict[str, float]:
    """CPU seconds so far of the JVM, the PySpark workers, the broker and the machine."""
    out = {"jvm": 0.0, "python workers": 0.0, "broker": 0.0}
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            cmd = Path(f"/proc/{pid}/cmdline").read_bytes()
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        seconds = (int(fields[11]) + int(fields[12])) / _TICK
        if int(pid) == broker_pid:
            out["broker"] += seconds
        elif b"java" in cmd and b"spark" in cmd:
            out["jvm"] += seconds
        elif b"pyspark" in cmd:
            out["python workers"] += seconds
    total = Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]
    out["machine"] = (sum(map(int, total)) - int(total[3]) - int(total[4])) / _TICK
    return out


def spark_scan(bootstrap: str, total: int, repeat: int, parquet: bool, broker_pid: int) -> None:
    from odradek.spark.session import local_session

    spark = local_session("odradek-bench", fast_start=False)
    df = spark.read.format("odradek").option("kafka.bootstrap.servers", bootstrap).option("subscribe", TOPIC).load()
    df.count()  # starts the Python workers
    rates, spent = [], []
    for _ in range(repeat):
        before, t = cpu_by_process(broker_pid), time.perf_counter()
        n = df.count()
        wall = time.perf_counter() - t
        after = cpu_by_process(broker_pid)
        rates.append(n / wall)
        used = {k: after[k] - before[k] for k in after}
        other = used["machine"] - used["jvm"] - used["python workers"] - used["broker"]
        spent.append(used["jvm"] + used["python workers"] + used["broker"])
        print(f"  count(): {n:,} rows in {wall:.2f} s = {n / wall:,.0f} rows/s; CPU s: "
              + ", ".join(f"{k} {used[k]:.2f}" for k in ("jvm", "python workers", "broker")) + f", other {other:.2f}"
              + f" ({used['python workers'] / n * 1e6:.2f} µs/row in Python workers)")
    print(f"Spark local[2] count(): median {statistics.median(rates):,.0f} rows/s, best {max(rates):,.0f} "
          f"(target 500,000)")
    own = sum(spent)
    print(f"  CPU of the scan (JVM + Python workers + broker): {own / (total * repeat) * 1e6:.2f} µs/row, "
          f"so two cores of its own would give about {2 * total * repeat / own:,.0f} rows/s")
    if parquet:
        with tempfile.TemporaryDirectory(prefix="odradek-bench-parquet-") as out:
            t = time.perf_counter()
            df.write.mode("overwrite").parquet(out)
            wall = time.perf_counter() - t
        print(f"Spark local[2] write.parquet: {total / wall:,.0f} rows/s")
    spark.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=2_000_000)
    parser.add_argument("--size", type=int, default=100)
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--parquet", action="store_true")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="odradek-bench-spark-") as data, EmbeddedBroker(Path(data)) as broker:
        with AdminClient(broker.bootstrap) as admin:
            admin.create_topics([NewTopic(TOPIC, args.partitions, 1)])
        asyncio.run(fill(broker.bootstrap, args.records, args.size, args.partitions))
        with AdminClient(broker.bootstrap) as admin:
            ends = admin.list_offsets({(TOPIC, p): -1 for p in range(args.partitions)})
        total = sum(o.offset for o in ends.values())
        decode_costs(broker.bootstrap)
        one_partition(broker.bootstrap, ends[(TOPIC, 0)].offset)
        spark_scan(broker.bootstrap, total, args.repeat, args.parquet, broker.proc.pid)
    print(f"machine load average now: {os.getloadavg()[0]:.1f} (2 cores; other work skews the numbers)")


if __name__ == "__main__":
    main()
