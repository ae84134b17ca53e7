"""``odradek perf produce|consume``: throughput and latency, like Kafka's
``kafka-producer-perf-test.sh`` and ``kafka-consumer-perf-test.sh``.

    odradek perf produce --topic T --num-records 1000000 --record-size 100 --throughput -1 \\
                         --producer-props linger.ms=5 compression.type=lz4
    odradek perf consume --topic T --messages 1000000

produce: sends ``--num-records`` records of ``--record-size`` bytes (one random payload of
uppercase letters, as Kafka's tool does, or lines of ``--payload-file`` picked at random),
at most ``--throughput`` records per second (-1: as fast as possible). Latency is the time
from ``send`` to the acknowledgement, measured on a sample of records (every one up to
50,000 records, evenly spread beyond). Every ``--reporting-interval`` ms it prints the
window's numbers; at the end the totals with latency percentiles (50th, 95th, 99th, 99.9th).
With ``--transaction-duration-ms MS`` (or ``--transactional-id``, then 3000 ms) the records go
in transactions, each committed once it is MS old, as Kafka's tool does.

consume: reads ``--messages`` records from the start of every partition of the topic (from
the end with ``--from-latest``; from the committed offsets with ``--group``), stopping early
after ``--timeout`` ms without a record. Reports records/s, MB/s and the latency of the
polls that returned records.

A live progress bar of the records sent (or read) of the total is drawn on standard error when
it is a terminal (``--no-progress``: none; see ``odradek.cli.progress``). ``--output json``
prints the totals as one JSON object instead of the text lines.
"""

from __future__ import annotations

import argparse
import random
import sys
import time

from odradek.cli.common import (
    CommandError,
    add_bootstrap,
    bootstrap_from,
    check_reachable,
    client_config,
    parse_pairs,
    print_json,
    read_properties,
    run_command,
)
from odradek.cli.progress import add_no_progress, count_bar

_MB = 1024 * 1024
_LATENCY_SAMPLES = 50_000  # records whose latency is kept: enough for a 99.9th percentile, cheap to keep
_PROGRESS_EVERY = 1024  # records between progress/report checks in the send loop
PERCENTILES = (0.5, 0.95, 0.99, 0.999)


def add_parser(sub) -> None:
    p = sub.add_parser("perf", help="measure produce or consume throughput and latency",
                       description=__doc__.replace("``", ""), formatter_class=argparse.RawDescriptionHelpFormatter)
    tests = p.add_subparsers(dest="perf_command", metavar="produce|consume", required=True)
    prod = tests.add_parser("produce", help="producer throughput and latency",
                            description="Send records as fast as allowed; report throughput and latency.")
    add_bootstrap(prod, "--producer.config", "producer")
    prod.add_argument("--topic", required=True, help="the topic to produce to")
    prod.add_argument("--num-records", type=int, required=True, metavar="N", help="records to send")
    size = prod.add_mutually_exclusive_group(required=True)
    size.add_argument("--record-size", type=int, metavar="BYTES", help="bytes of each record's value")
    size.add_argument("--payload-file", metavar="FILE", help="values: the lines of this file, picked at random")
    prod.add_argument("--throughput", type=float, required=True, metavar="N", help="records/s limit, -1 for none")
    prod.add_argument("--producer-props", nargs="+", default=[], metavar="K=V", help="producer settings")
    prod.add_argument("--reporting-interval", type=int, default=5000, metavar="MS",
                      help="print a progress line this often (default 5000)")
    prod.add_argument("--output", choices=("text", "json"), default="text", help="the report's form (default text)")
    add_no_progress(prod)
    prod.add_argument("--transactional-id", metavar="ID",
                      help="send in transactions of this id (default performance-producer-default-transactional-id)")
    prod.add_argument("--transaction-duration-ms", type=int, default=0, metavar="MS",
                      help="commit each transaction once it is MS old (> 0 turns transactions on)")
    cons = tests.add_parser("consume", help="consumer throughput",
                            description="Read records as fast as possible; report throughput.")
    add_bootstrap(cons, "--consumer.config", "consumer")
    cons.add_argument("--topic", required=True, help="the topic to read")
    cons.add_argument("--messages", type=int, required=True, metavar="N", help="records to read")
    cons.add_argument("--group", help="read as this group (from its committed offsets, committing at the end)")
    cons.add_argument("--from-latest", action="store_true", help="start at the end instead of the beginning")
    cons.add_argument("--timeout", type=int, default=10_000, metavar="MS",
                      help="stop after this long without a record (default 10000)")
    cons.add_argument("--fetch-size", type=int, metavar="BYTES", help="max bytes per partition per fetch")
    cons.add_argument("--consumer-props", nargs="+", default=[], metavar="K=V", help="consumer settings")
    cons.add_argument("--output", choices=("text", "json"), default="text", help="the report's form (default text)")
    add_no_progress(cons)


def run(args) -> int:
    body = _produce if args.perf_command == "produce" else _consume
    return run_command(f"perf {args.perf_command}", body, args)


# --- statistics --------------------------------------------------------------------------
def percentiles(samples: list[float], points=PERCENTILES) -> list[float]:
    """Nearest-rank percentiles of ``samples`` (0.0 for none)."""
    if not samples:
        return [0.0 for _ in points]
    ordered = sorted(samples)
    last = len(ordered) - 1
    return [ordered[min(last, int(p * len(ordered)))] for p in points]


class ProduceStats:
    """Counts, sampled latencies and the current reporting window of a produce test."""

    def __init__(self, num_records: int) -> None:
        self.sampling = max(1, num_records // _LATENCY_SAMPLES)
        self.latencies: list[float] = []  # ms, sampled
        self.acked = 0
        self.errors = 0
        self.first_error: BaseException | None = None
        # The reporting window: start time, records and bytes sent before it, and the
        # sampled latencies in it (count, sum, max).
        self.window = [time.perf_counter(), 0, 0, 0, 0.0, 0.0]

    def completed(self, metadata, error) -> None:
        """The delivery callback of unsampled records (on the producer's loop thread)."""
        if error is not None:
            self.errors += 1
            self.first_error = self.first_error or error
        else:
            self.acked += 1

    def sampled(self, sent_at: float):
        """The delivery callback of a sampled record sent at ``sent_at``."""
        def done(metadata, error) -> None:
            self.completed(metadata, error)
            if error is None:
                latency = (time.perf_counter() - sent_at) * 1000
                self.latencies.append(latency)
                w = self.window
                w[3] += 1
                w[4] += latency
                w[5] = max(w[5], latency)
        return done

    def window_line(self, sent: int, sent_bytes: int) -> str:
        """Kafka's periodic line for the window just ended; starts the next window."""
        start, sent_before, bytes_before, count, total, largest = self.window
        now = time.perf_counter()
        elapsed = max(now - start, 1e-9)
        self.window = [now, sent, sent_bytes, 0, 0.0, 0.0]
        records = sent - sent_before
        return (f"{records} records sent, {records / elapsed:.1f} records/sec "
                f"({(sent_bytes - bytes_before) / elapsed / _MB:.2f} MB/sec), "
                f"{total / count if count else 0:.1f} ms avg latency, {largest:.1f} ms max latency.")


# --- produce -----------------------------------------------------------------------------
def _payloads(args) -> list[bytes]:
    if args.payload_file:
        try:
            with open(args.payload_file, "rb") as f:
                lines = [line.rstrip(b"\r\n") for line in f]
        except OSError as e:
            raise CommandError(f"cannot read {args.payload_file}: {e.strerror or e}") from None
        lines = [line for line in lines if line]
        if not lines:
            raise CommandError(f"{args.payload_file} has no non-empty line")
        return lines
    if args.record_size <= 0:
        raise CommandError("--record-size must be positive")
    return [bytes(random.choices(range(65, 91), k=args.record_size))]


def _produce(args) -> int:
    from odradek.client import AsyncProducer, Producer

    if args.num_records <= 0:
        raise CommandError("--num-records must be positive")
    payloads = _payloads(args)
    props = read_properties(args.command_config)
    props.update(parse_pairs(args.producer_props, "--producer-props"))  # bootstrap.servers among them, as in Kafka's tool
    bootstrap = bootstrap_from(args, props)
    props.setdefault("client.id", "odradek-perf-producer")
    if args.transactional_id and args.transaction_duration_ms <= 0:
        args.transaction_duration_ms = 3000  # Kafka's tool: an id alone turns transactions on
    if args.transaction_duration_ms > 0:
        props["transactional.id"] = args.transactional_id or "performance-producer-default-transactional-id"
    config = client_config(AsyncProducer, props, "producer")
    check_reachable(bootstrap)
    stats = ProduceStats(args.num_records)
    producer = Producer(bootstrap, **config)
    try:
        if args.transaction_duration_ms > 0:
            producer.init_transactions()
            producer = _Transactional(producer, args.transaction_duration_ms / 1000)
        start, sent_bytes = _send_all(producer, args, payloads, stats)
        producer.flush()
    finally:
        producer.close()
    elapsed = time.perf_counter() - start
    _report_produce(args, stats, elapsed, sent_bytes)
    if stats.errors:
        raise CommandError(f"{stats.errors} records failed, the first with: {stats.first_error}")
    return 0


class _Transactional:
    """A transactional producer whose ``send`` opens a transaction when none is open and
    commits it once it is ``duration`` seconds old; ``flush`` commits the last one."""

    def __init__(self, producer, duration: float) -> None:
        self.producer, self.duration, self.began = producer, duration, None
        self.transactions = 0

    def send(self, topic, value, callback=None):
        now = time.perf_counter()
        if self.began is not None and now - self.began >= self.duration:
            self.producer.commit_transaction()
            self.began = None
        if self.began is None:
            self.producer.begin_transaction()
            self.began, self.transactions = now, self.transactions + 1
        return self.producer.send(topic, value, callback=callback)

    def flush(self) -> None:
        if self.began is not None:
            self.producer.commit_transaction()
            self.began = None
        self.producer.flush()

    def close(self) -> None:
        self.producer.close()


def _send_all(producer, args, payloads: list[bytes], stats: ProduceStats) -> tuple[float, int]:
    topic, total = args.topic, args.num_records
    period = 1 / args.throughput if args.throughput > 0 else 0.0
    send, sampling, completed = producer.send, stats.sampling, stats.completed
    choose = random.choice if len(payloads) > 1 else (lambda items: items[0])
    interval = args.reporting_interval / 1000
    sent_bytes = 0
    clock = time.perf_counter
    start = next_report = clock()
    next_report += interval
    with count_bar("producing", "records sent", enabled=not args.no_progress) as progress:
        task = progress.add_task("produce", total=total, note="")
        for i in range(total):
            value = choose(payloads)
            sent_bytes += len(value)
            if i % sampling == 0:
                send(topic, value, callback=stats.sampled(clock()))
            else:
                send(topic, value, callback=completed)
            if period and (i + 1) * period > clock() - start:
                time.sleep(max(0.0, (i + 1) * period - (clock() - start)))
            if i % _PROGRESS_EVERY == 0:
                now = clock()
                progress.update(task, completed=i + 1, note=f"{(i + 1) / max(now - start, 1e-9):,.0f} records/s")
                if now >= next_report:
                    next_report = now + interval
                    line = stats.window_line(i + 1, sent_bytes)
                    if args.output == "text":
                        print(line)  # on a terminal, above the progress bar
        progress.update(task, completed=total)
    return start, sent_bytes


def _report_produce(args, stats: ProduceStats, elapsed: float, sent_bytes: int) -> None:
    n = args.num_records
    lat = stats.latencies
    p50, p95, p99, p999 = percentiles(lat)
    summary = {
        "records": n, "elapsed_s": round(elapsed, 3), "records_per_sec": round(n / elapsed, 1),
        "mb_per_sec": round(sent_bytes / elapsed / _MB, 2), "avg_latency_ms": round(sum(lat) / len(lat), 2) if lat else 0.0,
        "max_latency_ms": round(max(lat), 2) if lat else 0.0, "p50_ms": round(p50, 2), "p95_ms": round(p95, 2),
        "p99_ms": round(p99, 2), "p999_ms": round(p999, 2), "latency_samples": len(lat), "errors": stats.errors,
    }
    if args.output == "json":
        print_json(summary)
        return
    print(f"{n} records sent, {summary['records_per_sec']:.1f} records/sec ({summary['mb_per_sec']:.2f} MB/sec), "
          f"{summary['avg_latency_ms']:.2f} ms avg latency, {summary['max_latency_ms']:.2f} ms max latency, "
          f"{p50:.0f} ms 50th, {p95:.0f} ms 95th, {p99:.0f} ms 99th, {p999:.0f} ms 99.9th.")


# --- consume -----------------------------------------------------------------------------
def _consume(args) -> int:
    from odradek.client import AsyncConsumer, Consumer, TopicPartition

    if args.messages <= 0:
        raise CommandError("--messages must be positive")
    props = read_properties(args.command_config)
    props.update(parse_pairs(args.consumer_props, "--consumer-props"))  # bootstrap.servers among them, as in Kafka's tool
    bootstrap = bootstrap_from(args, props)
    props.setdefault("client.id", "odradek-perf-consumer")
    props["auto.offset.reset"] = "latest" if args.from_latest else "earliest"
    if args.group:
        props["group.id"] = args.group
    if args.fetch_size:
        props["max.partition.fetch.bytes"] = str(args.fetch_size)
    config = client_config(AsyncConsumer, props, "consumer")
    check_reachable(bootstrap)
    consumer = Consumer(bootstrap, **config)
    try:
        if args.topic not in consumer.topics():
            raise CommandError(f"Topic '{args.topic}' does not exist")
        partitions = [TopicPartition(args.topic, p) for p in consumer.partitions_for_topic(args.topic)]
        consumer.assign(partitions)
        if not args.group:
            (consumer.seek_to_end if args.from_latest else consumer.seek_to_beginning)(*partitions)
        result = _read_all(consumer, args)
        if args.group:
            consumer.commit()
    finally:
        consumer.close()
    _report_consume(args, *result)
    return 0


def _read_all(consumer, args) -> tuple[int, int, float, list[float], bool]:
    """Poll until ``--messages`` records or ``--timeout``: (records, bytes, seconds, poll
    latencies in ms, whether it timed out)."""
    clock = time.perf_counter
    count = size = 0
    polls: list[float] = []
    start = last = clock()
    timed_out = False
    with count_bar("consuming", "records read", enabled=not args.no_progress) as progress:
        task = progress.add_task("consume", total=args.messages, note="")
        while count < args.messages:
            before = clock()
            batch = consumer.poll(200, args.messages - count)
            now = clock()
            if not batch:
                if (now - last) * 1000 >= args.timeout:
                    timed_out = True
                    break
                continue
            polls.append((now - before) * 1000)
            last = now
            for records in batch.values():
                count += len(records)
                size += sum(len(r.value) for r in records if r.value is not None)
                size += sum(len(r.key) for r in records if r.key is not None)
            progress.update(task, completed=count, note=f"{count / max(now - start, 1e-9):,.0f} records/s")
    return count, size, (last if timed_out else clock()) - start, polls, timed_out


def _report_consume(args, count: int, size: int, elapsed: float, polls: list[float], timed_out: bool) -> None:
    elapsed = max(elapsed, 1e-9)
    p50, p95, p99, p999 = percentiles(polls)
    summary = {
        "records": count, "bytes": size, "elapsed_s": round(elapsed, 3), "records_per_sec": round(count / elapsed, 1),
        "mb_per_sec": round(size / elapsed / _MB, 2), "polls": len(polls),
        "poll_p50_ms": round(p50, 2), "poll_p95_ms": round(p95, 2), "poll_p99_ms": round(p99, 2),
        "poll_p999_ms": round(p999, 2), "poll_max_ms": round(max(polls), 2) if polls else 0.0, "timed_out": timed_out,
    }
    if timed_out:
        print(f"WARNING: stopped after {count} of {args.messages} records: no record for {args.timeout} ms.",
              file=sys.stderr)
    if args.output == "json":
        print_json(summary)
        return
    print(f"{count} records consumed ({size / _MB:.2f} MB) in {elapsed:.2f} s, {summary['records_per_sec']:.1f} "
          f"records/sec ({summary['mb_per_sec']:.2f} MB/sec); poll latency {p50:.1f} ms 50th, {p95:.1f} ms 95th, "
          f"{p99:.1f} ms 99th, {p999:.1f} ms 99.9th, {summary['poll_max_ms']:.1f} ms max.")
