#!/usr/bin/env python3
"""A share group (KIP-932) against a classic consumer group on one partition: records per
second delivered and acknowledged with 1, 4 and 16 consumers.

    .venv/bin/python bench/bench_share_groups.py [--records 20000] [--consumers 1,4,16]
        [--work-ms 0,1] [--records-per-batch 0] [--max-poll-records 500] [--timeout 120]

One ``odradek broker`` in a child process (``BrokerProcess``). For each per-record work
(``--work-ms``: a sleep per record, the consumer's own processing; 0 measures the broker and
the clients alone), each producer batch size (``--records-per-batch``), each share consumer
``max.poll.records`` (``--max-poll-records``), each mode and each consumer count, one after the
other, on a topic of its own with one partition:

1. ``--records`` records of 100 bytes are produced first (acks=1; librdkafka, linger 5 ms).
   ``--records-per-batch`` N > 0 also sets batch.num.messages to N, so every log batch holds
   N records (the last one fewer); 0 leaves librdkafka's batching (hundreds of records per
   batch). The log's batches are counted after the run (``batches``, ``batch_max``): a share
   fetch acquires whole log batches of new records, so the batch size bounds how finely the
   records spread over share consumers;
2. the consumers (confluent-kafka, librdkafka, one thread each, all in this process) start:
   - **share**: ``ShareConsumer`` with ``share.acknowledgement.mode=explicit`` and
     ``max.poll.records`` (librdkafka sends it as the ShareFetch's MaxRecords: the records one
     fetch acquires, rounded up to whole log batches; default 500) in a group whose
     ``share.auto.offset.reset`` is earliest (a GROUP config); each record is accepted, then
     ``commit_sync()`` after every poll; a record counts as acknowledged when the
     acknowledgement commit callback confirms it;
   - **classic**: ``Consumer`` (classic protocol, range assignor), ``auto.offset.reset``
     earliest, no auto-commit; ``commit(asynchronous=False)`` after every batch; a record
     counts as acknowledged when the commit that covers it returns. One partition: one
     member works, the others idle (Kafka's classic groups give a partition to one member);
3. until every record is acknowledged (or ``--timeout``).

Measured, from the first record delivered to any consumer (the group's formation is left out:
``join`` is the time from the consumers' start to that first record, whichever consumer got
it):
``delivered/s`` (distinct records delivered over the time to the last first delivery),
``acked/s`` (records over the time to the last acknowledgement), ``busy`` (consumers that got
any record) and ``redelivered`` (deliveries beyond a record's first). Printed with the CPU that
other processes took from the (shared) machine meanwhile; ``bench/results/share_groups.json``
keeps the figures.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from confluent_kafka import AcknowledgeType, Consumer, KafkaException, Producer, ShareConsumer  # noqa: E402
from confluent_kafka.admin import (  # noqa: E402
    AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, NewTopic, ResourceType,
)

from bench.harness import proc_stats  # noqa: E402
from odradek.testing.broker import BrokerProcess  # noqa: E402

RESULTS = Path(__file__).resolve().parent / "results"
VALUE = b"x" * 100


class Tally:
    """What every consumer of one run delivered and had acknowledged, with the times."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.deliveries = 0
        self.first_delivery: float | None = None
        self.delivered: dict[int, float] = {}  # offset -> time of its first delivery
        self.acked: dict[int, float] = {}  # offset -> time of its first confirmed acknowledgement
        self.busy: set[str] = set()
        self.errors: list[str] = []

    def deliver(self, who: str, offsets: list[int]) -> None:
        now = time.monotonic()
        with self.lock:
            self.deliveries += len(offsets)
            if self.first_delivery is None:
                self.first_delivery = now
            self.busy.add(who)
            for o in offsets:
                self.delivered.setdefault(o, now)

    def ack(self, offsets) -> None:
        now = time.monotonic()
        with self.lock:
            for o in offsets:
                self.acked.setdefault(o, now)

    def acked_count(self) -> int:
        with self.lock:
            return len(self.acked)


def work(count: int, work_ms: float) -> None:
    if work_ms > 0:
        time.sleep(count * work_ms / 1000)


def share_member(bootstrap: str, group: str, topic: str, who: str, tally: Tally, work_ms: float,
                 stop: threading.Event, max_poll_records: int) -> None:
    c = ShareConsumer({"bootstrap.servers": bootstrap, "group.id": group,
                       "share.acknowledgement.mode": "explicit", "max.poll.records": max_poll_records,
                       "log_level": 0})

    def committed(offsets, exception) -> None:
        if exception is not None:
            tally.errors.append(str(exception))
            return
        tally.ack(o for acked in offsets.values() for o in acked)

    c.set_acknowledgement_commit_callback(committed)
    c.subscribe([topic])
    try:
        while not stop.is_set():
            batch = [m for m in c.poll(0.2) if m.error() is None]
            if not batch:
                continue
            tally.deliver(who, [m.offset() for m in batch])
            work(len(batch), work_ms)
            for m in batch:
                c.acknowledge(m, AcknowledgeType.ACCEPT)
            try:
                c.commit_sync(30)
            except KafkaException as e:
                tally.errors.append(str(e))
    finally:
        c.close()


def classic_member(bootstrap: str, group: str, topic: str, who: str, tally: Tally, work_ms: float,
                   stop: threading.Event, max_poll_records: int) -> None:
    del max_poll_records  # a classic consumer takes up to 500 records a consume() here
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "auto.offset.reset": "earliest",
                  "enable.auto.commit": False, "log_level": 0})
    c.subscribe([topic])
    try:
        while not stop.is_set():
            batch = [m for m in c.consume(500, 0.2) if m.error() is None]
            if not batch:
                continue
            offsets = [m.offset() for m in batch]
            tally.deliver(who, offsets)
            work(len(batch), work_ms)
            try:
                c.commit(asynchronous=False)
                tally.ack(offsets)
            except KafkaException as e:
                tally.errors.append(str(e))
    finally:
        c.close()


MEMBERS = {"share": share_member, "classic": classic_member}


def prepare(bootstrap: str, topic: str, group: str, mode: str, records: int, records_per_batch: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 0})
    for f in admin.create_topics([NewTopic(topic, 1, 1)]).values():
        f.result(30)
    if mode == "share":
        entry = ConfigEntry("share.auto.offset.reset", "earliest", incremental_operation=AlterConfigOpType.SET)
        for f in admin.incremental_alter_configs([ConfigResource(ResourceType.GROUP, group,
                                                                 incremental_configs=[entry])]).values():
            f.result(30)
    config = {"bootstrap.servers": bootstrap, "acks": 1, "linger.ms": 5, "log_level": 0}
    if records_per_batch > 0:  # produce() is far faster than N records per 5 ms: batches fill to N
        config["batch.num.messages"] = records_per_batch
    producer = Producer(config)
    for _ in range(records):
        while True:
            try:
                producer.produce(topic, VALUE, partition=0)
                break
            except BufferError:
                producer.poll(0.05)
    assert producer.flush(60) == 0


def log_batches(log_dirs: Path, topic: str) -> tuple[int, int]:
    """``(batches, most records in one)`` of partition 0 of ``topic``, read from its segment
    files (v2 batches: baseOffset int64, batchLength int32, ..., recordsCount int32 at byte 57)."""
    count = largest = 0
    for segment in sorted((log_dirs / f"{topic}-0").glob("*.log")):
        data = segment.read_bytes()
        pos = 0
        while pos + 61 <= len(data):
            length = int.from_bytes(data[pos + 8:pos + 12], "big")
            if length == 0:  # preallocated tail
                break
            count += 1
            largest = max(largest, int.from_bytes(data[pos + 57:pos + 61], "big"))
            pos += 12 + length
    return count, largest


def run(bootstrap: str, broker_pid: int, mode: str, consumers: int, work_ms: float, records_per_batch: int,
        max_poll_records: int, log_dirs: Path, args) -> dict:
    tag = uuid.uuid4().hex[:6]
    topic, group = f"{mode}-{consumers}-{tag}", f"g-{mode}-{consumers}-{tag}"
    prepare(bootstrap, topic, group, mode, args.records, records_per_batch)
    tally, stop = Tally(), threading.Event()
    machine0, ours0 = proc_stats.system_busy_seconds(), proc_stats.self_cpu_seconds() + proc_stats.cpu_seconds_ticks(broker_pid)
    started = time.monotonic()
    threads = [threading.Thread(target=MEMBERS[mode], daemon=True,
                                args=(bootstrap, group, topic, f"c{i}", tally, work_ms, stop, max_poll_records))
               for i in range(consumers)]
    for t in threads:
        t.start()
    deadline = started + args.timeout
    while tally.acked_count() < args.records and time.monotonic() < deadline:
        time.sleep(0.05)
    wall = time.monotonic() - started
    others = (proc_stats.system_busy_seconds() - machine0
              - (proc_stats.self_cpu_seconds() + proc_stats.cpu_seconds_ticks(broker_pid) - ours0))
    stop.set()
    for t in threads:
        t.join(60)
    with tally.lock:
        first = tally.first_delivery
        delivered, acked = dict(tally.delivered), dict(tally.acked)
        out = {"mode": mode, "consumers": consumers, "work_ms": work_ms, "records": args.records,
               "records_per_batch": records_per_batch, "max_poll_records": max_poll_records,
               "delivered": len(delivered), "acked": len(acked),
               "redelivered": tally.deliveries - len(delivered), "busy": len(tally.busy),
               "errors": tally.errors[:5], "other_cpu": max(0.0, others) / wall / (os.cpu_count() or 1)}
    out["batches"], out["batch_max"] = log_batches(log_dirs, topic)
    if first is not None and delivered and acked:
        out["join_s"] = first - started
        out["delivered_per_s"] = len(delivered) / max(max(delivered.values()) - first, 1e-3)
        out["acked_per_s"] = len(acked) / max(max(acked.values()) - first, 1e-3)
    return out


def report(results: list[dict]) -> None:
    print()
    by_key = {(r["records_per_batch"], r["max_poll_records"], r["work_ms"], r["mode"], r["consumers"]): r
              for r in results}
    head = (f"{'batch':>5} {'mpr':>4} {'work':>5} {'cons':>4} | {'share deliv/s':>13} {'acked/s':>8} {'busy':>4}"
            f" {'redeliv':>7} {'join':>6} | {'classic deliv/s':>15} {'acked/s':>8} {'busy':>4} {'join':>6}")
    print(head)
    print("-" * len(head))
    for rpb, mpr, work_ms, consumers in sorted({(b, m, w, c) for b, m, w, _, c in by_key}):
        s, c = (by_key.get((rpb, mpr, work_ms, mode, consumers)) for mode in ("share", "classic"))
        batch = rpb if rpb > 0 else max((r["batch_max"] for r in (s, c) if r is not None), default=0)
        print(f"{batch:>5} {mpr:>4} {work_ms:>3g}ms {consumers:>4} | {_cell(s, True)} | {_cell(c, False)}")
    print()
    for r in results:
        if r["acked"] < r["records"] or r["errors"]:
            print(f"{r['mode']} x{r['consumers']} work {r['work_ms']} ms: {r['acked']}/{r['records']} acknowledged, "
                  f"errors {r['errors']}")
    print("log batches (count, most records in one): "
          + ", ".join(f"{r['mode'][0]}{r['consumers']}/{r['records_per_batch']} {r['batches']} {r['batch_max']}"
                      for r in results))
    print("CPU other processes took from the machine: "
          + ", ".join(f"{r['mode'][0]}{r['consumers']}/{r['work_ms']:g}ms {r['other_cpu']:.0%}" for r in results))


def _cell(r: dict | None, share: bool) -> str:
    width = 13 if share else 15
    if r is None or "acked_per_s" not in r:
        return f"{'-':>{width}} {'-':>8} {'-':>4}" + (f" {'-':>7}" if share else "") + f" {'-':>6}"
    text = f"{r['delivered_per_s']:>{width},.0f} {r['acked_per_s']:>8,.0f} {r['busy']:>4}"
    if share:
        text += f" {r['redelivered']:>7}"
    return text + f" {r['join_s']:>5.1f}s"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--records", type=int, default=20000)
    parser.add_argument("--consumers", default="1,4,16")
    parser.add_argument("--work-ms", default="0,1", help="sleep per record in the consumer, comma-separated")
    parser.add_argument("--records-per-batch", default="0",
                        help="records per producer batch (batch.num.messages), comma-separated; 0: librdkafka's")
    parser.add_argument("--max-poll-records", default="500",
                        help="the share consumers' max.poll.records (ShareFetch MaxRecords), comma-separated")
    parser.add_argument("--modes", default="share,classic")
    parser.add_argument("--timeout", type=float, default=120.0, help="longest run of one case")
    args = parser.parse_args()
    results = []
    cases = [(float(w), int(b), int(m), int(c), mode) for w in args.work_ms.split(",")
             for b in args.records_per_batch.split(",") for m in args.max_poll_records.split(",")
             for c in args.consumers.split(",") for mode in args.modes.split(",")]
    with tempfile.TemporaryDirectory() as data, BrokerProcess(
            Path(data) / "data", group_share_heartbeat_interval_ms=1000) as broker:
        for work_ms, rpb, mpr, consumers, mode in cases:
            print(f"{mode} x{consumers}, work {work_ms:g} ms, {rpb or 'default'} records per batch,"
                  f" max.poll.records {mpr} ...", flush=True)
            results.append(run(broker.bootstrap, broker.proc.pid, mode, consumers, work_ms, rpb, mpr,
                               Path(data) / "data", args))
    report(results)
    RESULTS.mkdir(exist_ok=True)
    out = RESULTS / "share_groups.json"
    out.write_text(json.dumps({"args": vars(args), "results": results}, indent=1))
    print(f"figures in {out}")


if __name__ == "__main__":
    main()
