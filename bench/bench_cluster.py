"""Replication's cost and failover times (issue 18), side by side in one run, same client.

    .venv/bin/python bench/bench_cluster.py [--records 1000000] [--partitions 6] [--kills 3]

What it runs, on loopback, every broker a child process (``odradek broker``):

1. **Throughput**: kcat (librdkafka, ``bench/harness/kcat.py``'s producer settings) writes
   ``--records`` 100-byte records to a topic of ``--partitions`` partitions on one broker
   (embedded metadata, replication factor 1, acks=1), then to a topic on three brokers
   coordinated by a real ZooKeeper (replication factor 3, ``min.insync.replicas=2``,
   acks=all). The ratio of the two rates is the cost of replication (Kafka's own 2014 figures:
   421k against 821k records/s, 0.51).
2. **End-to-end latency** on the cluster at half the rate kcat reaches into one partition of
   three replicas (acks=all), into another such partition: ``bench/harness/latency.py``'s open-loop generator (pre-built acks=all
   requests sent to the leader on a schedule) and its consumer; p50/p99 from the scheduled
   send to the consumer holding the records (read up to the high watermark, so after the
   whole ISR has them).
3. **Failover**: a producer (idempotent, acks=all) sends one record at a time to partition 0;
   its leader is killed (kill -9); the time from the kill to the first acknowledged send
   after it, ``--kills`` times (the killed broker restarts between rounds), median reported
   against ``zookeeper.session.timeout.ms`` + 1 s.
4. **Controlled shutdown**: the same producer while partition 0's leader gets SIGTERM: the
   time until leadership moved (first acknowledged send on the new leader) and the number of
   failed sends (the goal: none).

Results go to ``bench/results/cluster.json`` and the terminal. The figures are the machine's
of the moment (2 cores shared by every broker, ZooKeeper and the clients): quote ratios from
one run, as ``bench/README.md`` says.
"""

from __future__ import annotations

import argparse
import json
import signal
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO), str(REPO / "bench")]

from confluent_kafka import Producer  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

from harness import latency  # noqa: E402
from harness.kcat import Kcat, librdkafka_shim, records_file  # noqa: E402
from odradek.server.local_cluster.zookeeper_server import ZooKeeperServer  # noqa: E402
from odradek.testing.broker import BrokerProcess  # noqa: E402

SESSION_MS = 6000
RESULTS = REPO / "bench" / "results" / "cluster.json"


# -- brokers ----------------------------------------------------------------------------------


def start_cluster(work: Path, zk: ZooKeeperServer, ids=(1, 2, 3)) -> dict[int, BrokerProcess]:
    brokers = {}
    for broker_id in ids:
        brokers[broker_id] = start_broker(work, zk, broker_id)
    return brokers


def start_broker(work: Path, zk: ZooKeeperServer, broker_id: int) -> BrokerProcess:
    overrides = {
        "node.id": broker_id,
        "zookeeper.connect": f"{zk.hosts}/bench",
        "zookeeper.session.timeout.ms": SESSION_MS,
        "replica.lag.time.max.ms": 10000,
        "offsets.topic.replication.factor": 3,
        "offsets.topic.num.partitions": 3,
        "min.insync.replicas": 2,
    }
    return BrokerProcess(work / f"broker-{broker_id}", **overrides).start(60)


def create_topic(bootstrap: str, name: str, partitions: int, rf: int, configs=None) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(name, partitions, rf, config=configs or {})])[name].result(60)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        topic = admin.list_topics(name, timeout=10).topics.get(name)
        if topic is not None and topic.error is None and len(topic.partitions) == partitions and all(
                p.leader >= 0 and len(p.isrs) == rf for p in topic.partitions.values()):
            return
        time.sleep(0.2)
    raise TimeoutError(f"{name}: partitions without a leader or a full ISR")


def leader_of(bootstrap: str, topic: str, partition: int) -> int:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    return admin.list_topics(topic, timeout=10).topics[topic].partitions[partition].leader


# -- 1. throughput ----------------------------------------------------------------------------


def throughput(kcat: Kcat, bootstrap: str, topic: str, path: Path, records: int, acks: str) -> float:
    run = kcat.produce(bootstrap, topic, path, records, acks)
    return records / run.seconds


# -- 2. end-to-end latency --------------------------------------------------------------------


def warm_up(bootstrap: str, topic: str) -> None:
    """One acknowledged acks=all record: the followers of a new topic are fetching (a follower
    that asked before its leader had its role backs off replica.fetch.backoff.ms, 1 s), so
    the run measures the steady state, not the topic's first second."""
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all"})
    producer.produce(topic, b"warm-up", partition=0)
    if producer.flush(30):
        raise TimeoutError(f"{topic}: the warm-up record was not acknowledged")


def end_to_end(brokers: dict, topic: str, rate: float, seconds: float = 10.0) -> dict:
    """``harness.latency`` (open loop, pre-built requests, stamped batches) against the leader
    of partition 0 of ``topic``, with acks=all: the consumer reads up to the high watermark,
    so every latency includes the replication to the whole ISR."""
    leader = leader_of(all_of(brokers), topic, 0)
    warm_up(all_of(brokers), topic)
    run = latency.run(brokers[leader].bootstrap, topic, rate, seconds, tick_s=0.005, acks=-1, start_offset=1)
    return {"offered_rps": run.offered_records_per_s, "achieved_rps": run.achieved_records_per_s,
            "p50_ms": run.p50_ms, "p99_ms": run.p99_ms, "max_ms": run.max_ms,
            "send_lag_p99_ms": run.send_lag_p99_ms}


# -- 3, 4. failover ---------------------------------------------------------------------------


class SendLoop:
    """Sends one record at a time to a partition (idempotent, acks=all) and records when
    each acknowledgement came and every failure."""

    def __init__(self, bootstrap: str, topic: str, partition: int) -> None:
        self.producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True,
                                  "acks": "all", "linger.ms": 0, "message.timeout.ms": 60000,
                                  "retry.backoff.ms": 50, "retry.backoff.max.ms": 100,
                                  "topic.metadata.refresh.interval.ms": 1000})
        self.topic, self.partition = topic, partition
        self.acks: list[float] = []
        self.failures: list[str] = []

    def _delivered(self, err, _msg) -> None:
        if err is None:
            self.acks.append(time.monotonic())
        else:
            self.failures.append(str(err))

    def run_until(self, predicate, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while not predicate() and time.monotonic() < deadline:
            self.producer.produce(self.topic, b"v" * 100, partition=self.partition,
                                  on_delivery=self._delivered)
            self.producer.poll(0.005)
        self.producer.flush(60)

    def first_ack_after(self, t: float) -> float | None:
        later = [a for a in self.acks if a > t]
        return min(later) - t if later else None


def all_of(brokers: dict) -> str:
    """Every broker's address (a restarted broker listens on a new port)."""
    return ",".join(b.bootstrap for b in brokers.values())


def failover(work: Path, zk, brokers: dict, topic: str, how: str) -> dict:
    bootstrap = all_of(brokers)
    leader = leader_of(bootstrap, topic, 0)
    loop = SendLoop(bootstrap, topic, 0)
    loop.run_until(lambda: len(loop.acks) >= 50, 30)
    victim = brokers[leader]
    t0 = time.monotonic()
    if how == "kill":
        victim.kill()
    else:
        victim.proc.send_signal(signal.SIGTERM)
    loop.run_until(lambda: loop.first_ack_after(t0) is not None and time.monotonic() - t0 > 1, 60)
    if how != "kill":
        victim.proc.wait(60)
    brokers[leader] = start_broker(work, zk, leader)
    return {"leader": leader, "seconds": loop.first_ack_after(t0), "failed_sends": len(loop.failures),
            "failures": loop.failures[:3]}


# -- the run ----------------------------------------------------------------------------------


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--partitions", type=int, default=6)
    parser.add_argument("--kills", type=int, default=3)
    args = parser.parse_args()
    out: dict = {"records": args.records, "partitions": args.partitions, "session_ms": SESSION_MS}
    with tempfile.TemporaryDirectory(prefix="odradek-bench-cluster-") as tmp:
        work = Path(tmp)
        kcat = Kcat(librdkafka_shim(work))
        path = records_file(work / "records.txt", args.records)
        with BrokerProcess(work / "single") as single:
            create_topic(single.bootstrap, "single", args.partitions, 1)
            out["single_acks1_rps"] = throughput(kcat, single.bootstrap, "single", path, args.records, "1")
        print(f"one broker, RF 1, acks=1: {out['single_acks1_rps']:,.0f} records/s", flush=True)
        zk = ZooKeeperServer(work / "zookeeper")
        zk.start()
        brokers = {}
        try:
            brokers = start_cluster(work, zk)
            bootstrap = all_of(brokers)
            create_topic(bootstrap, "replicated", args.partitions, 3, {"min.insync.replicas": "2"})
            out["cluster_acks_all_rps"] = throughput(kcat, bootstrap, "replicated", path, args.records, "all")
            out["ratio"] = out["cluster_acks_all_rps"] / out["single_acks1_rps"]
            print(f"three brokers, RF 3, acks=all: {out['cluster_acks_all_rps']:,.0f} records/s "
                  f"({out['ratio']:.2f}x; goal >= 0.5)", flush=True)
            # The latency generator writes one partition: half of what one partition takes.
            create_topic(bootstrap, "one-partition", 1, 3, {"min.insync.replicas": "2"})
            out["one_partition_acks_all_rps"] = throughput(kcat, bootstrap, "one-partition", path,
                                                           args.records, "all")
            create_topic(bootstrap, "latency", 1, 3, {"min.insync.replicas": "2"})
            out["end_to_end"] = end_to_end(brokers, "latency", out["one_partition_acks_all_rps"] / 2)
            print(f"end to end at half that rate: {out['end_to_end']}", flush=True)
            create_topic(bootstrap, "failover", 1, 3, {"min.insync.replicas": "2"})
            kills = [failover(work, zk, brokers, "failover", "kill") for _ in range(args.kills)]
            out["kill9"] = kills
            seconds = [k["seconds"] for k in kills if k["seconds"] is not None]
            out["kill9_median_s"] = statistics.median(seconds) if seconds else None
            print(f"kill -9 of the leader to the first acknowledged send: {seconds} s "
                  f"(goal: median <= {SESSION_MS / 1000 + 1:.0f} s)", flush=True)
            out["controlled"] = failover(work, zk, brokers, "failover", "term")
            print(f"controlled shutdown: {out['controlled']} (goal: <= 1 s, no failed sends)", flush=True)
        finally:
            for broker in brokers.values():
                broker.kill()
            zk.stop()
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(out, indent=2) + "\n")
    print(f"written to {RESULTS.relative_to(REPO)}")


if __name__ == "__main__":
    main()
