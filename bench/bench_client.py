"""Throughput of odradek's client against a broker in another process.

    .venv/bin/python bench/bench_client.py [--records 1000000] [--size 100] [--partitions 1]
        [--linger-ms 5] [--compression none] [--keys 0] [--uvloop] [--profile produce|consume|sync-produce]

The broker runs as ``odradek broker`` in a child process (``BrokerProcess``) so it does not
share this process's GIL. Measured, each as records/s and as client CPU seconds per million
records (from ``os.times``, this process only):

- produce (asyncio): ``AsyncProducer.send`` of ``--records`` records of ``--size``
  bytes with ``linger_ms``, yielding to the loop every ``--yield-every`` sends (1000), then ``flush``;
- produce (sync): the same through ``Producer.send`` (concurrent futures, loop thread);
- consume (asyncio): ``AsyncConsumer.poll`` from the beginning until every record is read,
  touching each record's value;
- consume (sync): the same through ``Consumer.poll``.

``--profile`` runs one of them under cProfile and prints the top functions by own time;
``--breakdown`` measures the client's per-record CPU steps without any network (see
``breakdown``), a view that stays readable on a busy machine.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import os
import pstats
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from odradek.client import (
    AdminClient,
    AsyncConsumer,
    AsyncProducer,
    BufferFullError,
    Consumer,
    NewTopic,
    Producer,
    TopicPartition,
)
from odradek.testing.broker import BrokerProcess


def cpu() -> float:
    t = os.times()
    return t.user + t.system


class Timer:
    def __enter__(self):
        self.wall, self.cpu = time.perf_counter(), cpu()
        return self

    def __exit__(self, *exc):
        self.wall = time.perf_counter() - self.wall
        self.cpu = cpu() - self.cpu


def report(name: str, n: int, t: Timer) -> None:
    print(f"{name:<22} {n / t.wall:>11,.0f} records/s   {t.wall:6.2f} s wall   "
          f"{t.cpu / n * 1e6:6.2f} µs CPU/record ({t.cpu / t.wall * 100:.0f}% of one core)")


async def produce_async(bootstrap: str, topic: str, args) -> Timer:
    value = b"x" * args.size
    async with AsyncProducer(bootstrap, linger_ms=args.linger_ms, compression_type=args.compression,
                             batch_size=args.batch_size) as producer:
        producer.send(topic, value)
        await producer.flush()
        send = producer.send
        keys = [b"key-%08d" % i for i in range(args.keys)] or [None]
        with Timer() as t:
            for i in range(args.records):
                key = keys[i % len(keys)]
                try:
                    send(topic, value, key)
                except BufferFullError:
                    await producer.wait_for_buffer()
                    send(topic, value, key)
                if i % args.yield_every == 0:
                    await asyncio.sleep(0)
            await producer.flush()
    return t


def produce_sync(bootstrap: str, topic: str, args) -> Timer:
    value = b"x" * args.size
    with Producer(bootstrap, linger_ms=args.linger_ms, compression_type=args.compression,
                  batch_size=args.batch_size) as producer:
        producer.send(topic, value).result()
        send = producer.send
        with Timer() as t:
            for _ in range(args.records):
                send(topic, value)
            producer.flush()
    return t


async def consume_async(bootstrap: str, topic: str, total: int, args) -> Timer:
    async with AsyncConsumer(bootstrap, auto_offset_reset="earliest", max_poll_records=args.poll_records) as consumer:
        consumer.assign([TopicPartition(topic, p) for p in range(args.partitions)])
        n = 0
        size = 0
        with Timer() as t:
            while n < total:
                for records in (await consumer.poll(1000)).values():
                    n += len(records)
                    for r in records:
                        size += len(r.value)
    return t


def consume_sync(bootstrap: str, topic: str, total: int, args) -> Timer:
    with Consumer(bootstrap, auto_offset_reset="earliest", max_poll_records=args.poll_records) as consumer:
        consumer.assign([TopicPartition(topic, p) for p in range(args.partitions)])
        n = 0
        size = 0
        with Timer() as t:
            while n < total:
                for records in consumer.poll(1000).values():
                    n += len(records)
                    for r in records:
                        size += len(r.value)
    return t


def breakdown(args) -> None:
    """CPU per record of the client's own steps, without network or broker: ``send`` into
    open batches, sealing, completing the futures, and decoding (``Fetcher.collect``); and a
    calibration loop, to compare runs on a machine whose speed varies."""
    from collections import deque

    from odradek.client.fetcher import CompletedFetch, Fetcher
    from odradek.client.subscription_state import SubscriptionState
    from odradek.records.batch import iter_batch_positions, read_header, set_base_offset

    n = args.records
    value = b"x" * args.size

    def per_record(seconds: float) -> str:
        return f"{seconds / n * 1e6:.2f} µs"

    async def produce_steps():
        producer = AsyncProducer("127.0.0.1:1", linger_ms=1e9, batch_size=args.batch_size, buffer_memory=1 << 50)
        producer._loop = asyncio.get_running_loop()  # not started: no broker, no sender
        producer._sender.wake = producer._sender.wake_by = lambda *a: None
        producer._acc.topic("t").resize(1, [0])
        send = producer.send
        t = cpu()
        for _ in range(n):
            send("t", value)
        sending = cpu() - t
        batches = list(producer._acc.incomplete)
        t = cpu()
        data = b"".join(b.seal() for b in batches)
        sealing = cpu() - t
        t = cpu()
        for b in batches:
            b.complete(0)
        completing = cpu() - t
        return sending, sealing, completing, data

    sending, sealing, completing, data = asyncio.run(produce_steps())
    buf = bytearray(data)
    offset = 0
    for at, _ in list(iter_batch_positions(buf)):
        set_base_offset(buf, at, offset)
        offset += read_header(buf, at).records_count
    subs = SubscriptionState("earliest")
    tp = TopicPartition("t", 0)
    subs.assign([tp])
    subs.seek(tp, 0)
    fetcher = Fetcher.__new__(Fetcher)  # only collect() is used: no cluster needed
    fetcher.subs = subs
    fetcher.completed = deque([CompletedFetch(tp, 0, memoryview(buf), None)])
    t = cpu()
    got = 0
    while fetcher.completed:
        got += sum(len(r) for r in fetcher.collect(args.poll_records).values())
    decoding = cpu() - t
    t = cpu()
    for _ in range(n // 1000):
        for i in range(1000):
            i * 2
    loop_ns = (cpu() - t) / (n // 1000 * 1000) * 1e9
    print(f"send {per_record(sending)}, seal {per_record(sealing)}, complete {per_record(completing)}, "
          f"collect (decode) {per_record(decoding)} for {got:,} records; "
          f"calibration: {loop_ns:.0f} ns per 'for i in range: i * 2' step")


def profiled(fn):
    profile = cProfile.Profile()
    profile.enable()
    try:
        return fn()
    finally:
        profile.disable()
        pstats.Stats(profile).sort_stats("tottime").print_stats(25)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--size", type=int, default=100)
    parser.add_argument("--partitions", type=int, default=1)
    parser.add_argument("--linger-ms", type=float, default=5)
    parser.add_argument("--batch-size", type=int, default=16384)
    parser.add_argument("--poll-records", type=int, default=500)
    parser.add_argument("--yield-every", type=int, default=1000, help="async sends between yields to the loop")
    parser.add_argument("--compression", default="none")
    parser.add_argument("--keys", type=int, default=0, help="async produce: cycle through this many 12-byte keys (0: unkeyed)")
    parser.add_argument("--uvloop", action="store_true")
    parser.add_argument("--profile", choices=["produce", "consume", "sync-produce", "sync-consume"])
    parser.add_argument("--skip-sync", action="store_true")
    parser.add_argument("--breakdown", action="store_true", help="only the no-network CPU breakdown")
    args = parser.parse_args()
    if args.breakdown:
        breakdown(args)
        return
    run = asyncio.run
    if args.uvloop:
        import uvloop

        run = uvloop.run
    with tempfile.TemporaryDirectory() as data, BrokerProcess(Path(data) / "data") as broker:
        bootstrap = broker.bootstrap
        with AdminClient(bootstrap) as admin:
            admin.create_topics([NewTopic("bench-async", args.partitions, 1), NewTopic("bench-sync", args.partitions, 1)])
        print(f"{args.records:,} records of {args.size} bytes, {args.partitions} partition(s), "
              f"linger_ms={args.linger_ms}, batch_size={args.batch_size}, compression={args.compression}, "
              f"{args.keys} keys (async produce), {'uvloop' if args.uvloop else 'asyncio'} loop")
        jobs = {
            "produce": lambda: run(produce_async(bootstrap, "bench-async", args)),
            "consume": lambda: run(consume_async(bootstrap, "bench-async", args.records + 1, args)),
            "sync-produce": lambda: produce_sync(bootstrap, "bench-sync", args),
            "sync-consume": lambda: consume_sync(bootstrap, "bench-sync", args.records + 1, args),
        }
        for name, job in jobs.items():
            if args.skip_sync and name.startswith("sync"):
                continue
            if args.profile == name:
                profiled(job)
            elif args.profile is None or name == args.profile.replace("consume", "produce"):
                report(name, args.records, job())


if __name__ == "__main__":
    main()
