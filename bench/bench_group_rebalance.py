#!/usr/bin/env python3
"""A consumer group through one member joining and one leaving, under a steady producer:
classic eager (range), classic cooperative-sticky and the KIP-848 consumer protocol (uniform).

    .venv/bin/python bench/bench_group_rebalance.py [--members 50] [--partitions 200]
        [--rate 2000] [--heartbeat-ms 1000] [--modes eager,cooperative,consumer]

One ``odradek broker`` in a child process (``BrokerProcess``). For each mode, on a topic of
its own (``--partitions``, one replica), one after the other:

1. ``--members`` confluent-kafka consumers (librdkafka, one thread each, all in this process)
   subscribe and the group forms (until every partition is owned once, balanced);
2. a producer thread starts writing ``--rate`` records/s of 100 bytes, round-robin over the
   partitions (librdkafka, linger 5 ms), and runs to the end of the mode;
3. after ``--baseline`` seconds, one more consumer joins; the script waits until the group
   has **settled** (every partition owned by exactly one live member, member sizes within
   one of each other, every live member owning some) and ``--tail`` seconds more;
4. then one of the first consumers leaves (``close()``: LeaveGroup, or a heartbeat at
   epoch -1), and the same wait.

Heartbeats are the same for every mode: ``heartbeat.interval.ms`` (classic, client side) and
``group.consumer.heartbeat.interval.ms`` (KIP-848, broker side) are both ``--heartbeat-ms``,
so the modes differ only in their protocol. Consumers fetch with ``fetch.wait.max.ms=100``
and a large ``fetch.min.bytes``: each asks about ten times a second, the resolution of the
buckets below. Offsets are auto-committed every second (commit on revoke included).

Measured per event, from every consumed record counted in 100 ms buckets of the time the
consumer got it (a record at an offset its partition already delivered is a **redelivery**,
counted apart and not in the rate):

- ``settle``: seconds from the join (the new consumer created) or the leave (``close()``
  called) to the settled group;
- ``min rate``: the lowest rate over 300 ms (three buckets: each consumer fetches every
  ~100 ms, so one bucket alone can miss a fetch) from the event to the end of its window
  (``--tail`` s after settling), as a share of the rate of the ``--baseline`` seconds before
  the event; ``base min``, the same over the baseline itself, is this machine's noise floor;
- ``revoked``: members (there before and after the event) told to give up partitions
  during its window (librdkafka's ``on_revoke``/``on_lost``), and the partitions they gave up
  in all; ``unowned``: partition-seconds, until settled, of partitions no live member owned
  (assignments sampled every 10 ms): the work nobody could do;
- ``kept``: members whose partitions after settling include all those they had before the
  event (the members the rebalance need not disturb), and their own lowest 300 ms rate as a share
  of their own baseline rate: the incremental protocols' promise is that these consume on;
- ``backlog``: the peak, over the event's window, of records produced but not yet consumed,
  above its mean over the baseline, in records and in milliseconds of production;
- ``redelivered``: records consumed again (uncommitted progress of revoked partitions).

Printed: the CPU other processes took from the (shared) machine while each mode ran, a
table, mode by mode, and each event's rate curve (200 ms a character, from 1 s
before the event; all members, then the kept members). ``bench/results/group_rebalance.json``
keeps every 100 ms bucket; ``group_rebalance.png`` plots them when matplotlib is installed.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path
from typing import NamedTuple

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from confluent_kafka import Consumer, Producer  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

from bench.harness import proc_stats  # noqa: E402
from odradek.testing.broker import BrokerProcess  # noqa: E402

RESULTS = Path(__file__).resolve().parent / "results"
BUCKET = 0.1  # seconds
# The lowest rate is taken over 3 buckets: a consumer fetches every ~100 ms, so a single
# bucket can miss a fetch of a member that is consuming at full rate.
SMOOTH = 3
MODES = {
    "eager": ("classic eager (range)", {"partition.assignment.strategy": "range"}),
    "cooperative": ("classic cooperative-sticky", {"partition.assignment.strategy": "cooperative-sticky"}),
    "consumer": ("consumer protocol (uniform)", {"group.protocol": "consumer", "group.remote.assignor": "uniform"}),
}


class Tally:
    """Every consumer's progress: the highest offset delivered per partition (to tell new
    records from redeliveries) and, per member, records counted in 100 ms buckets since
    ``origin``. A partition has one owner at a time, so its slot is written by one thread."""

    def __init__(self, partitions: int, origin: float) -> None:
        self.origin = origin
        self.high = [-1] * partitions
        self.redelivered = Counter()  # bucket -> records

    def bucket(self, t: float) -> int:
        return int((t - self.origin) / BUCKET)


class Member(threading.Thread):
    """One consumer polled by its own thread; ``assignment`` is its latest view of what it owns."""

    def __init__(self, index: int, config: dict, topic: str, tally: Tally) -> None:
        super().__init__(name=f"member-{index}", daemon=True)
        self.index, self.config, self.topic, self.tally = index, config, topic, tally
        self.counts = Counter()  # bucket -> new records
        self.revoked: list[tuple[float, int]] = []  # (time, partitions) of each revoke or loss
        self.assignment: frozenset[int] = frozenset()
        self.leaving = threading.Event()
        self.left = threading.Event()
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            consumer = Consumer(self.config)
            def revoked(_, partitions) -> None:
                self.revoked.append((time.monotonic(), len(partitions)))

            consumer.subscribe([self.topic], on_revoke=revoked, on_lost=revoked)
            high, tally = self.tally.high, self.tally
            while not self.leaving.is_set():
                batch = consumer.consume(1000, 0.05)
                if batch:
                    b = tally.bucket(time.monotonic())
                    new = 0
                    for m in batch:
                        if m.error() is not None:
                            continue
                        p, offset = m.partition(), m.offset()
                        if offset > high[p]:
                            high[p] = offset
                            new += 1
                        else:
                            tally.redelivered[b] += 1
                    self.counts[b] += new
                self.assignment = frozenset(tp.partition for tp in consumer.assignment())
            self.assignment = frozenset()
            consumer.close()
        except BaseException as e:  # noqa: BLE001 - reported by the caller
            self.error = e
        finally:
            self.left.set()


class SteadyProducer(threading.Thread):
    """``rate`` records/s of 100 bytes, round-robin over the partitions, in 10 ms ticks;
    ``counts`` per 100 ms bucket of the ``produce()`` call."""

    def __init__(self, bootstrap: str, topic: str, partitions: int, rate: int, tally: Tally) -> None:
        super().__init__(name="producer", daemon=True)
        self.producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "acks": 1, "log_level": 0})
        self.topic, self.partitions, self.rate, self.tally = topic, partitions, rate, tally
        self.counts = Counter()
        self.stopping = threading.Event()

    def run(self) -> None:
        value, n = b"x" * 100, 0
        tick = 0.01
        per_tick = self.rate * tick
        due, start = 0.0, time.monotonic()
        while not self.stopping.is_set():
            due += per_tick
            while n < due:
                try:
                    self.producer.produce(self.topic, value, partition=n % self.partitions)
                except BufferError:
                    self.producer.poll(0.05)
                    continue
                self.counts[self.tally.bucket(time.monotonic())] += 1
                n += 1
            self.producer.poll(0)
            delay = start + (due / self.rate) - time.monotonic()
            if delay > 0:
                time.sleep(delay)
        self.producer.flush(30)


class CpuSpent(NamedTuple):
    wall: float
    machine: float  # busy CPU seconds of the whole machine (/proc/stat)
    ours: float  # this process's and the broker's

    def others_share(self, earlier: CpuSpent) -> float:
        others = (self.machine - earlier.machine) - (self.ours - earlier.ours)
        return max(0.0, others) / (self.wall - earlier.wall) / (os.cpu_count() or 1)


def cpu_spent(broker_pid: int) -> CpuSpent:
    return CpuSpent(time.monotonic(), proc_stats.system_busy_seconds(),
                    proc_stats.self_cpu_seconds() + proc_stats.cpu_seconds_ticks(broker_pid))


def settled(members: list[Member], partitions: int) -> bool:
    live = [m for m in members if not m.leaving.is_set()]
    sizes = [len(m.assignment) for m in live]
    owned = sorted(p for m in live for p in m.assignment)
    return owned == list(range(partitions)) and min(sizes) > 0 and max(sizes) - min(sizes) <= 1


def wait_settled(members: list[Member], partitions: int, since: float, timeout: float):
    """``(seconds, unowned)``: seconds from ``since`` until the group is settled (None on
    timeout), and the partition-seconds meanwhile of partitions no live member owned; the
    members' assignments are sampled every 10 ms."""
    deadline = time.monotonic() + timeout
    unowned, last = 0.0, time.monotonic()
    while time.monotonic() < deadline:
        now = time.monotonic()
        owned = set().union(*(m.assignment for m in members if not m.leaving.is_set()))
        unowned += (partitions - len(owned)) * (now - last)
        last = now
        if settled(members, partitions):
            return now - since, unowned
        time.sleep(0.01)
    return None, unowned


def consumer_config(bootstrap: str, group: str, mode: str, args) -> dict:
    config = {"bootstrap.servers": bootstrap, "group.id": group, "auto.offset.reset": "earliest",
              "enable.auto.commit": True, "auto.commit.interval.ms": 1000, "log_level": 0,
              "fetch.wait.max.ms": 100, "fetch.min.bytes": 1_000_000,
              "topic.metadata.refresh.interval.ms": 10000, **MODES[mode][1]}
    if mode != "consumer":  # the consumer protocol takes both from the broker
        config.update({"heartbeat.interval.ms": args.heartbeat_ms, "session.timeout.ms": 10000})
    return config


def run_mode(bootstrap: str, broker_pid: int, mode: str, args) -> dict:
    """The two events of one mode (see the module docstring); their measures and buckets, and
    ``noise``: the CPU other processes used meanwhile, as a share of the machine."""
    topic, group = f"rebalance-{mode}", f"bench-{mode}"
    admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 0})
    admin.create_topics([NewTopic(topic, args.partitions, 1)])[topic].result(60)
    tally = Tally(args.partitions, time.monotonic())
    config = consumer_config(bootstrap, group, mode, args)
    members = [Member(i, config, topic, tally) for i in range(args.members)]
    for m in members:
        m.start()
    formed, _ = wait_settled(members, args.partitions, tally.origin, 120)
    if formed is None:
        raise SystemExit(f"{mode}: the group of {args.members} did not form in 120 s")
    producer = SteadyProducer(bootstrap, topic, args.partitions, args.rate, tally)
    producer.start()
    events = {}
    cpu0 = cpu_spent(broker_pid)
    try:
        time.sleep(args.baseline + 1)
        events["join"] = run_event(members, args, lambda: join(members, config, topic, tally))
        events["leave"] = run_event(members, args, lambda: leave(members[0]))
        noise = cpu_spent(broker_pid).others_share(cpu0)
    finally:
        producer.stopping.set()
        producer.join(60)
        for m in members:
            m.leaving.set()
        for m in members:
            m.left.wait(60)
    errors = [m.error for m in members if m.error is not None]
    if errors:
        raise SystemExit(f"{mode}: consumer error {errors[0]!r}")
    for name, event in events.items():
        event.update(measure(event, members, producer, tally, args))
    return {"formed_s": formed, "noise": noise, "events": events}


def join(members: list[Member], config: dict, topic: str, tally: Tally) -> float:
    joiner = Member(len(members), config, topic, tally)
    members.append(joiner)
    at = time.monotonic()
    joiner.start()
    return at


def leave(member: Member) -> float:
    at = time.monotonic()
    member.leaving.set()
    return at


def run_event(members: list[Member], args, act) -> dict:
    before = {m.index: m.assignment for m in members if not m.leaving.is_set()}
    at = act()
    settle, unowned = wait_settled(members, args.partitions, at, args.timeout)
    time.sleep(args.tail)
    after = {m.index: m.assignment for m in members if not m.leaving.is_set()}
    until = time.monotonic()
    kept = [i for i, parts in before.items() if i in after and parts <= after[i]]
    return {"at": at, "settle_s": settle, "unowned_ps": unowned, "until": until, "kept": kept, "before": before,
            "after": after}


def measure(event: dict, members: list[Member], producer: SteadyProducer, tally: Tally, args) -> dict:
    """The event's figures (module docstring) from the buckets of ``args.baseline`` s before it
    to the end of its window (``--tail`` s after settling)."""
    at = tally.bucket(event["at"])
    settle = event["settle_s"] if event["settle_s"] is not None else args.timeout
    end = at + round((settle + args.tail) / BUCKET)
    base = range(at - round(args.baseline / BUCKET), at)
    window = range(base.start, end)
    offset = at - window.start
    every = [sum(m.counts[b] for m in members) for b in window]
    kept_members = [m for m in members if m.index in event["kept"]]
    kept = [sum(m.counts[b] for m in kept_members) for b in window]
    produced = [producer.counts[b] for b in window]
    through = [m for m in members if m.index in event["before"] and m.index in event["after"]]

    backlog, lag = [], 0
    for p, c in zip(produced, every):
        lag += p - c
        backlog.append(lag)
    peak = max(backlog[offset:]) - sum(backlog[:offset]) / len(base)
    return {"min_rate": lowest(every, offset, offset, len(every)),
            "base_min_rate": lowest(every, offset, SMOOTH - 1, offset),
            "kept_count": len(kept_members), "kept_min_rate": lowest(kept, offset, offset, len(kept)),
            "revoked_members": sum(any(event["at"] <= t < event["until"] for t, _ in m.revoked) for m in through),
            "revoked_partitions": sum(n for m in through for t, n in m.revoked if event["at"] <= t < event["until"]),
            "backlog_records": peak, "backlog_ms": 1000 * peak / args.rate,
            "redelivered": sum(tally.redelivered[b] for b in range(at, end)),
            "buckets": {"start_s": -args.baseline, "every": every, "kept": kept, "produced": produced}}


def lowest(series: list[int], baseline_buckets: int, first: int, stop: int) -> float | None:
    """The lowest mean of ``SMOOTH`` consecutive buckets ending at ``first`` .. ``stop - 1``,
    as a share of the mean of the first ``baseline_buckets``; None without a baseline rate."""
    baseline = sum(series[:baseline_buckets]) / baseline_buckets
    if baseline == 0:
        return None
    return min(sum(series[e - SMOOTH + 1:e + 1]) / SMOOTH for e in range(first, stop)) / baseline


BARS = " ▁▂▃▄▅▆▇█"


def curve(series: list[int], baseline_buckets: int, skip: int, width: int = 2) -> str:
    """One character per ``width`` buckets, from ``skip`` buckets in: the share of the
    baseline rate, in eighths (full block at 100% or more; blank at zero)."""
    baseline = sum(series[:baseline_buckets]) / baseline_buckets or 1
    out = []
    for i in range(skip, len(series) - width + 1, width):
        share = sum(series[i:i + width]) / width / baseline
        out.append(BARS[min(8, max(0, round(share * 8)))])
    return "".join(out)


def report(results: dict, args) -> None:
    print(f"\n{args.members} consumers, {args.partitions} partitions, {args.rate:,} records/s, "
          f"heartbeat {args.heartbeat_ms} ms; the group formed in "
          + ", ".join(f"{m} {r['formed_s']:.1f} s" for m, r in results.items()))
    print("machine: CPU of other processes, as a share of the machine, while each mode ran: "
          + ", ".join(f"{m} {100 * r['noise']:.0f}%" for m, r in results.items()))
    head = (f"{'':11} {'mode':28} {'settle':>7} {'revoked':>9} {'unowned':>9} {'min rate':>8} {'base min':>8} "
            f"{'kept':>4} {'kept min':>8} {'backlog':>16} {'redeliv.':>8}")
    print(head)
    print("-" * len(head))
    for event in ("join", "leave"):
        for mode, r in results.items():
            e = r["events"][event]
            settle = "timeout" if e["settle_s"] is None else f"{e['settle_s']:.2f} s"
            revoked = f"{e['revoked_members']}/{e['revoked_partitions']}"
            print(f"{'one ' + event + 's':11} {MODES[mode][0]:28} {settle:>7} {revoked:>9} {e['unowned_ps']:>7.1f} s "
                  f"{share(e['min_rate']):>8} {share(e['base_min_rate']):>8} {e['kept_count']:>4} "
                  f"{share(e['kept_min_rate']):>8} "
                  f"{e['backlog_records']:>7,.0f} ({e['backlog_ms']:>4,.0f} ms) {e['redelivered']:>8,}")
    skip = round((args.baseline - 1) / BUCKET)
    base = round(args.baseline / BUCKET)
    print("\nconsumed rate, 200 ms a character from 1 s before the event (| marks it); "
          "full block = the rate before the event")
    for event in ("join", "leave"):
        for mode, r in results.items():
            b = r["events"][event]["buckets"]
            for name in ("every", "kept"):
                line = curve(b[name], base, skip)
                label = f"{event} {mode} {'all' if name == 'every' else 'kept'}"
                print(f"  {label:22} {line[:5]}|{line[5:60]}")


def share(x: float | None) -> str:
    return "n/a" if x is None else f"{100 * x:.0f}%"


def plot(results: dict, path: Path) -> bool:
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    fig, axes = plt.subplots(1, 2, figsize=(12, 4), sharey=True)
    for ax, event in zip(axes, ("join", "leave")):
        for mode, r in results.items():
            b = r["events"][event]["buckets"]
            xs = [b["start_s"] + BUCKET * i for i in range(len(b["every"]))]
            ax.plot(xs, [c / BUCKET for c in b["every"]], label=f"{MODES[mode][0]} (all)", linewidth=1)
            ax.plot(xs, [c / BUCKET for c in b["kept"]], label=f"{MODES[mode][0]} (kept)", linewidth=1,
                    linestyle="--")
        ax.axvline(0, color="grey", linewidth=0.5)
        ax.set_title(f"one member {event}s")
        ax.set_xlabel("s from the event")
    axes[0].set_ylabel("records/s consumed (100 ms buckets)")
    axes[1].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    return True


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--members", type=int, default=50)
    parser.add_argument("--partitions", type=int, default=200)
    parser.add_argument("--rate", type=int, default=2000, help="records/s produced")
    parser.add_argument("--heartbeat-ms", type=int, default=1000)
    parser.add_argument("--baseline", type=float, default=3.0, help="seconds of steady state before each event")
    parser.add_argument("--tail", type=float, default=4.0, help="seconds kept after the group settles")
    parser.add_argument("--timeout", type=float, default=45.0, help="longest wait for a group to settle")
    parser.add_argument("--modes", default=",".join(MODES))
    args = parser.parse_args()
    modes = args.modes.split(",")
    results = {}
    with tempfile.TemporaryDirectory() as data, BrokerProcess(
            Path(data) / "data", group_consumer_heartbeat_interval_ms=args.heartbeat_ms,
            group_consumer_session_timeout_ms=10000, group_initial_rebalance_delay_ms=3000) as broker:
        for mode in modes:
            print(f"{MODES[mode][0]} ...", flush=True)
            results[mode] = run_mode(broker.bootstrap, broker.proc.pid, mode, args)
    report(results, args)
    RESULTS.mkdir(exist_ok=True)
    out = RESULTS / "group_rebalance.json"
    out.write_text(json.dumps({"args": vars(args), "results": results}, default=sorted, indent=1))
    print(f"\nbuckets in {out}" + (f", plot in {RESULTS / 'group_rebalance.png'}"
                                   if plot(results, RESULTS / "group_rebalance.png") else ""))


if __name__ == "__main__":
    main()
