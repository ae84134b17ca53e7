"""Transactional produce against plain idempotent produce: same client, same broker, side by side.

    .venv/bin/python bench/bench_transactions.py [--records 200000] [--size 100] [--partitions 1]
        [--linger-ms 5] [--rounds 7] [--async] [--profile txn-1000]

The broker runs as ``odradek broker`` in a child process (``BrokerProcess``, a
``__transaction_state`` of 4 partitions). Each round runs, one after the other on fresh topics:

- ``idempotent``: ``Producer.send`` of ``--records`` records of ``--size`` bytes
  (``enable_idempotence`` on, acks=all: Kafka 3's default), then ``flush``;
- ``txn-1000``: the same records from a transactional producer, one transaction per 1,000
  records (``begin_transaction`` ... ``commit_transaction``);
- ``txn-100ms``: the same, committing once 100 ms have passed since the transaction began.

The three take turns, the order rotating from round to round, so that a machine whose speed
drifts (other work on it) slows each about as much. Printed: records/s of each run, each
transactional mode's throughput as a fraction of the idempotent run of the same round, then
the median of each mode over the rounds and the ratios of the medians (the goal of issue 19:
>= 0.8). ``--async`` uses ``AsyncProducer`` instead of the synchronous ``Producer``, yielding to the
loop every ``--yield-every`` sends (1000); ``--client confluent`` runs the same three modes with
confluent-kafka's producer (librdkafka) instead.
``--profile MODE`` runs that mode once under cProfile and prints the top functions by own time.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import pstats
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from odradek.client import AdminClient, AsyncProducer, BufferFullError, NewTopic, Producer
from odradek.testing.broker import BrokerProcess

MODES = ("idempotent", "txn-1000", "txn-100ms")
GOAL = 0.8


def commit_rule(mode: str):
    """``due(count, began) -> bool``: whether the open transaction commits now."""
    if mode == "txn-1000":
        return lambda count, began: count >= 1000
    if mode == "txn-100ms":
        return lambda count, began: time.perf_counter() - began >= 0.1
    return None


def run_sync(bootstrap: str, topic: str, mode: str, args) -> float:
    """Seconds to produce ``args.records`` records in ``mode`` with the sync producer."""
    value = b"x" * args.size
    due = commit_rule(mode)
    config = {"linger_ms": args.linger_ms, "batch_size": args.batch_size}
    if due is not None:
        config["transactional_id"] = f"bench-{topic}"
    with Producer(bootstrap, **config) as producer:
        if due is not None:
            producer.init_transactions()
            producer.begin_transaction()
        # warm-up outside the clock, every mode alike: connections, the topic's metadata, producer id
        producer.send(topic, value)
        producer.commit_transaction() if due is not None else producer.flush()
        send = producer.send
        start = time.perf_counter()
        if due is None:
            for _ in range(args.records):
                send(topic, value)
            producer.flush()
            return time.perf_counter() - start
        producer.begin_transaction()
        count, began = 0, start
        for _ in range(args.records):
            send(topic, value)
            count += 1
            if due(count, began):
                producer.commit_transaction()
                producer.begin_transaction()
                count, began = 0, time.perf_counter()
        producer.commit_transaction()
        return time.perf_counter() - start


async def run_async(bootstrap: str, topic: str, mode: str, args) -> float:
    value = b"x" * args.size
    due = commit_rule(mode)
    config = {"linger_ms": args.linger_ms, "batch_size": args.batch_size}
    if due is not None:
        config["transactional_id"] = f"bench-{topic}"
    async with AsyncProducer(bootstrap, **config) as producer:
        if due is not None:
            await producer.init_transactions()
            producer.begin_transaction()
        send = producer.send
        count, start = 0, time.perf_counter()
        began = start
        for i in range(args.records):
            try:
                send(topic, value)
            except BufferFullError:
                await producer.wait_for_buffer()
                send(topic, value)
            count += 1
            if due is not None and due(count, began):
                await producer.commit_transaction()
                producer.begin_transaction()
                count, began = 0, time.perf_counter()
            elif i % args.yield_every == 0:
                await asyncio.sleep(0)
        if due is None:
            await producer.flush()
        else:
            await producer.commit_transaction()
        return time.perf_counter() - start


def run_confluent(bootstrap: str, topic: str, mode: str, args) -> float:
    """The same runs with confluent-kafka (librdkafka) as the client: what a transaction costs
    on odradek, measured with Kafka's most used client rather than odradek's own."""
    from confluent_kafka import Producer as ConfluentProducer

    value = b"x" * args.size
    due = commit_rule(mode)
    config = {"bootstrap.servers": bootstrap, "linger.ms": args.linger_ms, "enable.idempotence": True,
              "batch.size": args.batch_size,
              # room for a whole run: a full queue would add poll()'s millisecond waits to one mode
              "queue.buffering.max.messages": 2 * args.records, "queue.buffering.max.kbytes": 2 * 1024 * 1024}
    if due is not None:
        config["transactional.id"] = f"bench-{topic}"
    producer = ConfluentProducer(config)
    if due is not None:
        producer.init_transactions(30)
        producer.begin_transaction()
    # warm-up outside the clock, every mode alike: connections, the topic's metadata, producer id
    producer.produce(topic, value)
    producer.commit_transaction(30) if due is not None else producer.flush(30)
    if due is not None:
        producer.begin_transaction()
    produce, poll = producer.produce, producer.poll
    count, start = 0, time.perf_counter()
    began = start
    for _ in range(args.records):
        while True:
            try:
                produce(topic, value)
                break
            except BufferError:
                poll(0.001)
        count += 1
        if due is not None and due(count, began):
            producer.commit_transaction(30)
            producer.begin_transaction()
            count, began = 0, time.perf_counter()
    if due is None:
        producer.flush(60)
    else:
        producer.commit_transaction(30)
    return time.perf_counter() - start


def measure(bootstrap: str, topic: str, mode: str, args) -> float:
    if args.client == "confluent":
        return run_confluent(bootstrap, topic, mode, args)
    if args.use_async:
        return asyncio.run(run_async(bootstrap, topic, mode, args))
    return run_sync(bootstrap, topic, mode, args)


def profiled(fn) -> None:
    profile = cProfile.Profile()
    profile.enable()
    try:
        fn()
    finally:
        profile.disable()
        pstats.Stats(profile).sort_stats("tottime").print_stats(25)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--records", type=int, default=200_000, help="records per run")
    parser.add_argument("--size", type=int, default=100)
    parser.add_argument("--partitions", type=int, default=1)
    parser.add_argument("--linger-ms", type=float, default=5)
    parser.add_argument("--batch-size", type=int, default=16384)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--async", dest="use_async", action="store_true", help="AsyncProducer instead of Producer")
    parser.add_argument("--yield-every", type=int, default=1000, help="--async: sends between yields to the loop")
    parser.add_argument("--client", choices=("odradek", "confluent"), default="odradek",
                        help="odradek's own producer (default) or confluent-kafka's (librdkafka)")
    parser.add_argument("--profile", choices=MODES)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as data, BrokerProcess(Path(data) / "data",
                                                               transaction_state_log_num_partitions=4) as broker:
        bootstrap = broker.bootstrap
        topics = [f"bench-{r}-{m}" for r in range(args.rounds + 1) for m in MODES]
        with AdminClient(bootstrap) as admin:
            admin.create_topics([NewTopic(t, args.partitions, 1) for t in topics])
        client = "confluent-kafka" if args.client == "confluent" else "AsyncProducer" if args.use_async else "Producer"
        print(f"{args.records:,} records of {args.size} bytes, {args.partitions} partition(s), "
              f"linger_ms={args.linger_ms}, batch_size={args.batch_size}, {client}, {args.rounds} rounds")
        for mode in MODES:  # warm-up: connections, __transaction_state, code paths
            measure(bootstrap, f"bench-{args.rounds}-{mode}", mode, argparse.Namespace(**{**vars(args), "records": 2000}))
        if args.profile:
            profiled(lambda: measure(bootstrap, f"bench-0-{args.profile}", args.profile, args))
            return
        runs: dict[str, list[float]] = {m: [] for m in MODES}
        for r in range(args.rounds):
            order = MODES[r % len(MODES):] + MODES[:r % len(MODES)]
            rates = {m: args.records / measure(bootstrap, f"bench-{r}-{m}", m, args) for m in order}
            line = "   ".join(f"{m} {rates[m]:>9,.0f} rec/s" for m in MODES)
            ratios = "  ".join(f"{m}/idempotent {rates[m] / rates['idempotent']:.2f}" for m in MODES[1:])
            print(f"round {r + 1}: {line}   ({ratios})")
            for m in MODES:
                runs[m].append(rates[m])
        median = {m: statistics.median(rs) for m, rs in runs.items()}
        print("median:  " + "   ".join(f"{m} {median[m]:>9,.0f} rec/s" for m in MODES))
        for m in MODES[1:]:
            ratio = median[m] / median["idempotent"]
            print(f"{m}: {ratio:.2f} x idempotent ({'meets' if ratio >= GOAL else 'below'} the {GOAL} goal)")


if __name__ == "__main__":
    main()
