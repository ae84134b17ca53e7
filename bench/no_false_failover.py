"""No false failover under load: three live brokers, produce and consume as fast as they go,
and count what must not happen (a leader deposed, a session lost, a broker taken for dead).

    flock /tmp/bench.lock .venv/bin/python bench/no_false_failover.py [--seconds 600]

One `LocalCluster` on loopback (three ``odradek broker`` processes, a ZooKeeper), with the
partition soak's session (``zookeeper.session.timeout.ms=6000``, bench/partition_soak.py) and
a topic of ``--partitions`` partitions, three replicas, ``min.insync.replicas=2``. Load:
librdkafka's idempotent acks=all producer (100-byte records, as fast as its queue drains) and a
consumer group reading them, for ``--seconds``. A sampler reads ZooKeeper every 0.2 s (every
partition's leader and leader epoch, every broker's registration czxid) and each broker's
``odradek_eventloop_lag_seconds`` (odradek/server/metrics/event_loop_lag.py).

Printed at the end: records produced and consumed; leader epoch changes (none should happen:
nothing fails); registrations that changed or vanished (a lost ZooKeeper session); the
"its process is gone" declarations (the controller's of a broker,
odradek/controller/broker_liveness_monitor.py, and the brokers' of the controller,
odradek/controller/controller_liveness.py) and session expiries found in the brokers' output; the largest event loop lag seen per broker
(a floor of the longest stall: sampled every 0.5 s by the broker, read every 0.2 s here).
Exit status 1 if any of the must-nots happened.
"""

from __future__ import annotations

import argparse
import re
import shutil
import socket
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO)]

from confluent_kafka import Consumer, Producer  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

from odradek.server.local_cluster.local_cluster import LocalCluster  # noqa: E402

TOPIC = "no-false-failover"
PROPS = {"zookeeper.session.timeout.ms": "6000", "replica.lag.time.max.ms": "10000",
         "min.insync.replicas": "2", "auto.leader.rebalance.enable": "false",
         # Ten minutes at full speed write ~15 GB per replica: retention keeps each partition's
         # replica near 256 MiB so the run fits on a small disk.
         "log.retention.bytes": str(256 << 20), "log.segment.bytes": str(64 << 20),
         "log.retention.check.interval.ms": "5000"}
LAG = re.compile(rb"^odradek_eventloop_lag_seconds(?:\{[^}]*\})? ([0-9.eE+-]+)$", re.M)
GONE = "its process is gone"
EXPIRED = re.compile(r"session (expired|was lost)|SESSION_EXPIRED|new session", re.I)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def produce(bootstrap: str, stop: threading.Event, counts: dict) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "acks": "all",
                         "linger.ms": 5, "queue.buffering.max.messages": 100000})
    value = b"x" * 100

    def report(err, _msg) -> None:
        counts["acked" if err is None else "failed"] += 1

    while not stop.is_set():
        try:
            producer.produce(TOPIC, value, on_delivery=report)
        except BufferError:
            producer.poll(0.05)
        producer.poll(0)
    producer.flush(30)


def consume(bootstrap: str, stop: threading.Event, counts: dict) -> None:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "no-false-failover",
                         "auto.offset.reset": "earliest"})
    consumer.subscribe([TOPIC])
    while not stop.is_set():
        for message in consumer.consume(1000, 0.5):
            if message.error() is None:
                counts["consumed"] += 1
    consumer.close()


def sample(cluster: LocalCluster, metrics: dict[int, int], partitions: int, seen: dict) -> None:
    for p in range(partitions):
        state = cluster.partition_state(TOPIC, p)
        key = (state["leader"], state["leader_epoch"])
        if seen["leaders"].get(p, key) != key:
            seen["leader_changes"].append((time.monotonic(), p, seen["leaders"][p], key))
        seen["leaders"][p] = key
    for broker_id in cluster.nodes:
        stat = cluster.zk.exists(f"/brokers/ids/{broker_id}")
        czxid = None if stat is None else stat.czxid
        if seen["registrations"].get(broker_id, czxid) != czxid:
            seen["registration_changes"].append((time.monotonic(), broker_id, czxid))
        seen["registrations"][broker_id] = czxid
    for broker_id, port in metrics.items():
        try:
            body = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=2).read()
        except OSError:
            continue
        found = LAG.search(body)
        if found:
            seen["lag"][broker_id] = max(seen["lag"].get(broker_id, 0.0), float(found.group(1)))


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=600)
    parser.add_argument("--partitions", type=int, default=6)
    parser.add_argument("--keep", action="store_true", help="keep the brokers' directories and logs")
    args = parser.parse_args(argv)
    work = Path(tempfile.mkdtemp(prefix="no-false-failover-"))
    cluster = LocalCluster(work, [], props=PROPS, log_level="INFO")
    metrics = {}
    for broker_id in (1, 2, 3):
        metrics[broker_id] = free_port()
        cluster.add_broker(broker_id, {"http.listeners": f"http://127.0.0.1:{metrics[broker_id]}"})
    with cluster:  # started; killed at the end
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
        for future in admin.create_topics([NewTopic(TOPIC, args.partitions, 3,
                                                    config={"min.insync.replicas": "2"})]).values():
            future.result(60)
        deadline = time.monotonic() + 60
        while any(cluster.partition_state(TOPIC, p) is None or len(cluster.partition_state(TOPIC, p)["isr"]) < 3
                  for p in range(args.partitions)):
            assert time.monotonic() < deadline, "the topic's ISRs did not fill"
            time.sleep(0.2)
        stop = threading.Event()
        counts = {"acked": 0, "failed": 0, "consumed": 0}
        threads = [threading.Thread(target=produce, args=(cluster.bootstrap, stop, counts)),
                   threading.Thread(target=consume, args=(cluster.bootstrap, stop, counts))]
        for thread in threads:
            thread.start()
        seen = {"leaders": {}, "leader_changes": [], "registrations": {}, "registration_changes": [],
                "lag": {}}
        started = time.monotonic()
        end = started + args.seconds
        while time.monotonic() < end:
            sample(cluster, metrics, args.partitions, seen)
            time.sleep(0.2)
        stop.set()
        for thread in threads:
            thread.join(60)
        took = time.monotonic() - started
        outputs = {b: node.log_path.read_text(errors="replace") for b, node in cluster.nodes.items()}
    gone = sum(text.count(GONE) for text in outputs.values())
    expired = {b: len(EXPIRED.findall(text)) for b, text in outputs.items()}
    print(f"{took:.0f} s of load on {args.partitions} partitions: {counts['acked']} records acknowledged "
          f"({counts['acked'] / took:.0f}/s), {counts['failed']} failed, {counts['consumed']} consumed")
    print(f"leader changes: {len(seen['leader_changes'])} {seen['leader_changes'][:5]}")
    print(f"registration changes (lost sessions): {len(seen['registration_changes'])} "
          f"{seen['registration_changes'][:5]}")
    print(f"'process gone' declarations: {gone}; session expiry lines per broker: {expired}")
    print("largest event loop lag seen per broker: "
          + ", ".join(f"{b}: {lag * 1000:.0f} ms" for b, lag in sorted(seen["lag"].items())))
    if args.keep:
        print(f"brokers' output in {work}")
    else:
        shutil.rmtree(work, ignore_errors=True)
    bad = seen["leader_changes"] or seen["registration_changes"] or gone or counts["failed"]
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
