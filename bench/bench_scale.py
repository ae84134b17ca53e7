"""How odradek's cost grows with the partition count: a 3-broker cluster with a real ZooKeeper
at 1,000, 10,000 and 30,000 partitions (replication factor 3), from creation to deletion.

    .venv/bin/python bench/bench_scale.py [--partitions 1000,10k,30k] [--skip consumers,failover]
        [--per-topic 100] [--records 200000] [--paced-rate 1000] [--members 300] [--idle-s 30]
        [--revision HEAD] [--publish]

For each count, on a fresh cluster (``odradek/server/local_cluster/``'s `LocalCluster`: a
ZooKeeper and brokers 1-3 as child processes, ``zookeeper.session.timeout.ms=6000``, segments
of 1 MiB and indexes of 64 KiB, ``log.segment.delete.delay.ms=0``), one phase after the other:

1. **create**: one CreateTopics for all topics (``--per-topic`` partitions each), then
   Metadata polled (confluent-kafka's AdminClient) until every partition has a leader:
   ``create_s``; then each broker's ``VmRSS`` (``rss_mb``) and ``VmHWM`` (``hwm_mb``);
2. **idle**, once every ISR is full (``full_isr_s`` after creation), ``--settle-s`` more, and
   the cluster has settled (``settled_s``: from the full ISR until a 5 s window in which the
   brokers and ZooKeeper used less than ``--settled-cores``, at most ``--settle-max-s``; with
   thousands of partitions the brokers go on working through the creation's LeaderAndIsr and
   first fetches for tens of seconds after every ISR is full, and that is not idle cost):
   CPU per broker and of ZooKeeper over ``--idle-s`` with no client connected (per-thread
   ``schedstat``, `proc_stats.cpu_seconds`), in cores; ``others`` is what the rest of the
   (shared) machine used meanwhile (``/proc/stat``);
3. **produce**: ``--records`` records of 100 B, acks=all, record i to partition i mod count
   (every partition written), confluent-kafka with linger.ms=5 and at most ``--window``
   records queued: records/s, and p50/p99 of each record's time from ``produce()`` to its
   acknowledgement (``Message.latency()``; at full speed, so it includes the queue), and the
   cluster's CPU per 1,000 records (brokers and ZooKeeper, ``cpu_ms_per_k``: a busy machine
   slows the rates but barely changes it); then ``--paced-rate`` records/s for ``--paced-s``
   seconds sent on a 10 ms schedule (``paced``): p50/p99 without a queue, while the cluster
   keeps up;
4. **consumers**: ``--members`` confluent-kafka consumers in one group (classic, roundrobin
   assignor; ``--group-protocol consumer`` for KIP-848), polled by ``--consumer-threads``
   threads of a child process (``bench/harness/scale_group.py``: not sharing the producer's
   GIL): ``rebalance_s`` from the first consumer's creation to every partition owned by
   exactly one member and ``min(members, partitions)`` members owning some;
   then phase 3 again while they consume (``auto.offset.reset=latest``): produce figures, and
   records consumed per second until they have it all (``consume_rps``);
5. **failover**: kill -9 of the controller (``/controller`` in ZooKeeper), then Metadata polled
   on the two others until every partition's leader is one of them: ``seconds`` (it includes
   the ZooKeeper session timeout, 6 s); the broker is restarted and ``rejoin_s`` is the time
   until every ISR is full again;
6. **delete**: one DeleteTopics for all, until Metadata lists none of them
   (``delete_metadata_s``) and no directory of theirs is left on any broker's disk (``delete_s``).

Metadata is polled no faster than twice the time one answer took (a full Metadata of 30,000
partitions costs the brokers too), at least every 0.25 s: that is the resolution of the times.
``--skip`` drops phases (``idle,produce,consumers,failover,delete``). The soft limit of open
files is raised to the hard limit (brokers inherit it). The brokers run this checkout's code
(recorded as its commit, ``dirty`` when odradek/ has uncommitted changes), or with
``--revision REV`` a clean worktree of that commit (``bench/harness/revision.py``).

Results: ``bench/results/scale.json`` (each count's latest run, this run's counts replacing
earlier ones; layout in ``bench/harness/scale_report.py``), a copy of this run alone beside it,
and ``bench/results/scale.png``. ``--publish`` merges this run into ``bench/published/scale.json``
and redraws ``bench/published/scale.png`` and the table in ``bench/README.md``
(``--publish-from FILE`` does that with a results file, measuring nothing). Nothing asserted;
a phase that fails is recorded under ``errors`` and the next one runs.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO)]

from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

from bench.harness import revision  # noqa: E402
from bench.harness import scale_report as report  # noqa: E402
from bench.harness.scale_produce import produce, produce_paced  # noqa: E402
from bench.harness.scale_usage import cluster_cpu, cpu_ticks, idle, memory, settle  # noqa: E402
from odradek.server.local_cluster.local_cluster import LocalCluster  # noqa: E402

RESULTS = REPO / "bench" / "results"
PUBLISHED = REPO / "bench" / "published"
README = REPO / "bench" / "README.md"
SESSION_MS = 6000
BROKER_PROPS = {
    "zookeeper.session.timeout.ms": SESSION_MS,
    # Small files so that 30,000 replicas per broker fit in memory and on disk.
    "log.segment.bytes": 1 << 20,
    "log.index.size.max.bytes": 64 << 10,
    "log.segment.delete.delay.ms": 0,  # "gone from disk" is then the deletion itself
    "offsets.topic.replication.factor": 3,
    "offsets.topic.num.partitions": 10,
    "min.insync.replicas": 2,
}


# -- options and the machine ------------------------------------------------------------------


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--partitions", type=report.parse_counts, default=report.parse_counts("1000,10000,30000"),
                   help="partition counts, comma-separated (10k allowed); default 1000,10000,30000")
    p.add_argument("--skip", type=report.parse_skip, default=frozenset(),
                   help=f"phases to skip, comma-separated: {','.join(report.PHASES)}")
    p.add_argument("--per-topic", type=int, default=100, help="partitions per topic (default 100)")
    p.add_argument("--records", type=int, default=200_000, help="records per produce run (default 200000)")
    p.add_argument("--window", type=int, default=20_000, help="records queued in the producer at most")
    p.add_argument("--paced-rate", type=float, default=1000.0,
                   help="records/s of the paced latency run after the full-speed one (0: none; default 1000)")
    p.add_argument("--paced-s", type=float, default=10.0)
    p.add_argument("--members", type=int, default=300, help="consumers in the group (default 300)")
    p.add_argument("--consumer-threads", type=int, default=4)
    p.add_argument("--group-protocol", choices=("classic", "consumer"), default="classic")
    p.add_argument("--idle-s", type=float, default=30.0)
    p.add_argument("--settle-s", type=float, default=5.0, help="wait after creation before the idle window")
    p.add_argument("--settled-cores", type=float, default=0.1,
                   help="the cluster is settled once a 5 s window uses less CPU than this (cores)")
    p.add_argument("--settle-max-s", type=float, default=120.0,
                   help="start the idle window after this long from the full ISR even if not settled")
    p.add_argument("--timeout-s", type=float, default=600.0, help="longest wait of any one phase")
    p.add_argument("--work-dir", type=Path, default=None, help="where the clusters' data go (default: /tmp)")
    p.add_argument("--revision", default=None,
                   help="run the brokers from a clean worktree of this commit (e.g. HEAD), not this checkout")
    p.add_argument("--publish", action="store_true",
                   help="also merge into bench/published/ and rewrite bench/README.md's table")
    p.add_argument("--publish-from", type=Path, default=None, metavar="FILE",
                   help="measure nothing: publish the runs of FILE (e.g. bench/results/scale.json)")
    args = p.parse_args(argv)
    if args.per_topic < 1 or args.members < 1 or args.consumer_threads < 1:
        p.error("--per-topic, --members and --consumer-threads must be positive")
    return args


def raise_fd_limit(members: int) -> dict:
    """Soft RLIMIT_NOFILE up to the hard one; what it was and is, and whether it looks enough
    (the bench's consumers hold ~10 descriptors each; a broker holds its file-handle cache,
    1,024 segments, plus a socket per client connection)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    wanted = 4096 + 10 * members
    return {"soft_before": soft, "soft": hard, "hard": hard, "enough": hard >= wanted, "wanted": wanted}


def broker_source(rev: str | None) -> dict:
    """Where the brokers' code comes from: this checkout (``dirty`` if odradek/ has uncommitted
    changes: others edit this tree), or with ``rev`` a clean worktree of that commit
    (``harness/revision.py``, C extensions built) put first on the brokers' ``PYTHONPATH``."""
    if rev is None:
        tree = revision.working_tree()
        dirty = any(path.startswith("odradek/") for path in tree.dirty)
        return {"revision": tree.sha[:7], "dirty": dirty}
    tree = revision.checkout(rev)
    os.environ["PYTHONPATH"] = str(tree.path)  # the brokers inherit it (popen_child)
    with tempfile.TemporaryDirectory() as elsewhere:  # brokers run in their own directories
        found = subprocess.run([sys.executable, "-c", "import odradek, os; print(os.path.dirname(odradek.__file__))"],
                               cwd=elsewhere, capture_output=True, text=True).stdout.strip()
    if Path(found) != tree.path / "odradek":
        raise SystemExit(f"brokers would import odradek from {found!r}, not from {tree.path}")
    return {"revision": tree.sha[:7], "dirty": False}


# -- Metadata ---------------------------------------------------------------------------------


def wait_partitions(admin: AdminClient, layout: list[tuple[str, int]], ok, timeout: float) -> float:
    """Seconds until Metadata shows every partition of ``layout`` with ``ok(partition)`` true
    (``PartitionMetadata``: leader, replicas, isrs); TimeoutError after ``timeout``."""
    begin = time.monotonic()
    while True:
        asked = time.monotonic()
        try:
            if _all_partitions(admin.list_topics(timeout=60).topics, layout, ok):
                return time.monotonic() - begin
        except Exception as e:  # noqa: BLE001 - a broker busy or gone: ask again
            print(f"    (metadata: {e})", flush=True)
        took = time.monotonic() - asked
        if time.monotonic() - begin > timeout:
            raise TimeoutError(f"partitions not ready after {timeout:.0f} s")
        time.sleep(max(0.25, 2 * took))


def _all_partitions(topics: dict, layout, ok) -> bool:
    for name, count in layout:
        topic = topics.get(name)
        if topic is None or topic.error is not None or len(topic.partitions) != count:
            return False
        if not all(ok(p) for p in topic.partitions.values()):
            return False
    return True


def full_isr(partition) -> bool:
    return len(partition.isrs) == len(partition.replicas)


def admin_for(cluster: LocalCluster, ids=None) -> AdminClient:
    ids = ids or cluster.live_ids()
    return AdminClient({"bootstrap.servers": ",".join(cluster[i].bootstrap for i in ids)})


# -- create, delete ---------------------------------------------------------------------------


def create(cluster: LocalCluster, layout, timeout: float) -> float:
    admin = admin_for(cluster)
    begin = time.monotonic()
    futures = admin.create_topics([NewTopic(t, n, 3) for t, n in layout], operation_timeout=0,
                                  request_timeout=timeout)
    for future in futures.values():
        future.result()
    wait_partitions(admin, layout, lambda p: p.leader >= 0, timeout - (time.monotonic() - begin))
    return time.monotonic() - begin


def topic_dirs_left(cluster: LocalCluster, prefix: str) -> dict[str, int]:
    """Per broker, the directories of the bench's topics (live, or renamed ``-delete``) on disk."""
    return {str(i): sum(1 for d in node.data_dir.iterdir() if d.name.startswith(prefix + "-"))
            if node.data_dir.exists() else 0 for i, node in cluster.nodes.items()}


def delete(cluster: LocalCluster, layout, timeout: float) -> dict:
    """``delete_metadata_s``, ``delete_s`` (the last directory gone), ``delete_s_per_broker``
    (when each broker's last one went) and ``delete_cpu_s`` (CPU seconds of the brokers and
    ZooKeeper from the request until the last directory went: the figure a busy machine
    stretches least)."""
    admin = admin_for(cluster)
    names, prefix = {t for t, _ in layout}, layout[0][0].rsplit("-", 1)[0]
    cpu_before = cpu_ticks(cluster)
    begin = time.monotonic()
    for future in admin.delete_topics(sorted(names), operation_timeout=0, request_timeout=timeout).values():
        future.result()
    out: dict = {"delete_s_per_broker": {}}
    ask_at = begin  # Metadata no faster than twice its last answer took, as wait_partitions
    while time.monotonic() - begin < timeout:
        if "delete_metadata_s" not in out and time.monotonic() >= ask_at:
            asked = time.monotonic()
            if not names & set(admin.list_topics(timeout=60).topics):
                out["delete_metadata_s"] = time.monotonic() - begin
            ask_at = asked + max(0.25, 2 * (time.monotonic() - asked))
        for broker, left in topic_dirs_left(cluster, prefix).items():
            if not left:
                out["delete_s_per_broker"].setdefault(broker, time.monotonic() - begin)
        if "delete_metadata_s" in out and len(out["delete_s_per_broker"]) == len(cluster.nodes):
            out["delete_s"] = max(out["delete_s_per_broker"].values())
            out["delete_cpu_s"] = round(cpu_ticks(cluster) - cpu_before, 2)
            return out
        time.sleep(0.25)
    raise TimeoutError(f"topics not gone after {timeout:.0f} s (so far: {out}; "
                       f"directories left: {topic_dirs_left(cluster, prefix)})")


def produce_phase(cluster: LocalCluster, layout, args) -> dict:
    """The full-speed run and the paced one, each with the cluster's CPU per 1,000 records
    (``cpu_ms_per_k``: CPU-ms of brokers and ZooKeeper; the machine's load does not inflate it
    as it does the rates) and its busy cores."""
    cpu = cluster_cpu(cluster)
    out = produce(cluster.bootstrap, layout, args.records, args.window)
    used = cluster_cpu(cluster) - cpu
    out.update(cpu_ms_per_k=used / args.records * 1e6, cluster_cores=used / out.pop("seconds"))
    out.pop("started_at")
    if args.paced_rate > 0:
        cpu = cluster_cpu(cluster)
        paced = out["paced"] = produce_paced(cluster.bootstrap, layout, args.paced_rate, args.paced_s)
        paced.update(cpu_ms_per_k=(cluster_cpu(cluster) - cpu) / max(paced["records"], 1) * 1e6)
    return out


# -- a group of consumers ---------------------------------------------------------------------


class GroupProcess:
    """``harness/scale_group.py``'s group in a child process; `state` holds its last reports."""

    def __init__(self, spec: dict) -> None:
        self.proc = subprocess.Popen([sys.executable, "-m", "bench.harness.scale_group", json.dumps(spec)],
                                     cwd=REPO, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        self.state: dict = {"consumed": 0, "last_at": 0.0}
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        for line in self.proc.stdout:
            if line.startswith("{"):
                self.state.update(json.loads(line))

    def wait_for(self, key: str, timeout: float):
        deadline = time.monotonic() + timeout
        while key not in self.state:
            if "error" in self.state or self.proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(self.state.get("error") or f"the consumers' process gave no {key}")
            time.sleep(0.1)
        return self.state[key]

    def close(self) -> float | None:
        """Stop: the child closes its consumers; seconds that took (None if it did not say)."""
        self.proc.stdin.close()
        try:
            self.proc.wait(180)
        except subprocess.TimeoutExpired:
            self.proc.kill()
        self.reader.join(5)
        return self.state.get("closed_s")


def consumers(cluster: LocalCluster, layout, args) -> dict:
    group = GroupProcess({"bootstrap": cluster.bootstrap, "topics": [t for t, _ in layout], "members": args.members,
                          "threads": args.consumer_threads, "protocol": args.group_protocol,
                          "partitions": sum(n for _, n in layout), "timeout_s": args.timeout_s})
    try:
        out = {"members": args.members, "protocol": args.group_protocol,
               "rebalance_s": group.wait_for("rebalance_s", args.timeout_s + 60)}
        print(f"  group of {args.members} formed in {out['rebalance_s']:.1f} s", flush=True)
        time.sleep(2)  # every member has resolved its "latest" offsets before the first record
        start_count = group.state["consumed"]
        run = produce(cluster.bootstrap, layout, args.records, args.window)
        wanted = start_count + run["records"] - run["failed"]
        deadline = time.monotonic() + 120
        while group.state["consumed"] < wanted and time.monotonic() < deadline:
            time.sleep(0.1)
        consumed = group.state["consumed"] - start_count
        out.update(produce_rps=run["rps"], p99_ms=run["p99_ms"], p50_ms=run["p50_ms"], failed=run["failed"],
                   consumed=consumed, consume_rps=consumed / max(group.state["last_at"] - run["started_at"], 1e-9))
        return out
    finally:
        closed = group.close()
        print(f"  consumers closed in {closed if closed is None else round(closed, 1)} s", flush=True)


# -- controller failover ----------------------------------------------------------------------


def failover(cluster: LocalCluster, layout, timeout: float) -> dict:
    controller = cluster.controller_id()
    survivors = [i for i in cluster.live_ids() if i != controller]
    admin = admin_for(cluster, survivors)
    metadata = admin.list_topics(timeout=60).topics
    led = sum(1 for t, _ in layout for p in metadata[t].partitions.values() if p.leader == controller)
    live = set(survivors)
    begin = time.monotonic()
    cluster.kill(controller)
    seconds = wait_partitions(admin, layout, lambda p: p.leader in live, timeout)
    out = {"controller": controller, "led": led, "seconds": seconds, "new_controller": cluster.controller_id()}
    print(f"  controller {controller} (leader of {led}) killed: all led again after {seconds:.1f} s", flush=True)
    restarted = time.monotonic()
    cluster.restart(controller)
    wait_partitions(admin_for(cluster), layout, full_isr, timeout)
    out["rejoin_s"] = time.monotonic() - restarted
    return out


# -- one count, the run -----------------------------------------------------------------------


def _phase(run: dict, name: str, fn) -> None:
    """Run a phase; its result under ``name`` (a dict is merged in), its failure under errors."""
    began = time.monotonic()
    try:
        value = fn()
    except Exception as e:  # noqa: BLE001 - recorded; the next phase still runs
        run.setdefault("errors", {})[name] = f"{type(e).__name__}: {e}"
        print(f"  {name} FAILED after {time.monotonic() - began:.0f} s: {e}", flush=True)
        return
    if isinstance(value, dict) and name not in ("idle", "produce", "consumers", "failover"):
        run.update(value)
    else:
        run[name] = value
    print(f"  {name}: {_short(value)}", flush=True)


def _short(value) -> str:
    if isinstance(value, dict):
        return ", ".join(f"{k} {_short(v)}" for k, v in value.items() if k not in ("started_at", "first_failures"))
    return f"{value:.3g}" if isinstance(value, float) else str(value)


def one_count(args, count: int) -> dict:
    run = {"partitions": count, **args.source, "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
           "per_topic": args.per_topic, "records": args.records, "session_ms": SESSION_MS,
           "load_average": Path("/proc/loadavg").read_text().split()[0]}
    layout = report.topic_layout(count, args.per_topic)
    print(f"{count:,} partitions ({len(layout)} topics, RF 3), {run['revision']}"
          f"{' +dirty' if run['dirty'] else ''}, load {run['load_average']}", flush=True)
    with tempfile.TemporaryDirectory(prefix="odradek-bench-scale-", dir=args.work_dir) as tmp:
        cluster = LocalCluster(Path(tmp), 3, props={k: str(v) for k, v in BROKER_PROPS.items()},
                               log_level="WARNING")
        try:
            cluster.start()
            _phase(run, "create_s", lambda: create(cluster, layout, args.timeout_s))
            if "create_s" not in run:
                return run
            run["rss_mb"], run["hwm_mb"] = memory(cluster)
            print(f"  RSS MB per broker: {_short(run['rss_mb'])}", flush=True)
            if "idle" not in args.skip:
                _phase(run, "full_isr_s", lambda: wait_partitions(admin_for(cluster), layout, full_isr, args.timeout_s))
                time.sleep(args.settle_s)
                run["settled_s"] = round(args.settle_s + settle(cluster, args.settled_cores,
                                                                args.settle_max_s - args.settle_s), 1)
                _phase(run, "idle", lambda: idle(cluster, args.idle_s))
            if "produce" not in args.skip:
                _phase(run, "produce", lambda: produce_phase(cluster, layout, args))
            if "consumers" not in args.skip:
                _phase(run, "consumers", lambda: consumers(cluster, layout, args))
            run["rss_mb_end"], run["hwm_mb"] = memory(cluster)
            if "failover" not in args.skip:
                _phase(run, "failover", lambda: failover(cluster, layout, args.timeout_s))
            if "delete" not in args.skip:
                _phase(run, "delete", lambda: delete(cluster, layout, args.timeout_s))
        finally:
            cluster.close()
    return run


def save(runs: list[dict], limits: dict) -> dict:
    """This run beside the earlier ones in bench/results (and bench/published with --publish)."""
    RESULTS.mkdir(parents=True, exist_ok=True)
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    (RESULTS / f"scale-{stamp}.json").write_text(json.dumps({"runs": runs, "fd_limit": limits}, indent=1))
    merged = _merge_into(RESULTS / "scale.json", runs)
    report.plot(merged, RESULTS / "scale.png")
    return merged


def _merge_into(path: Path, runs: list[dict]) -> dict:
    old = json.loads(path.read_text()) if path.exists() else None
    merged = report.merge(old, runs)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(merged, indent=1) + "\n")
    return merged


def publish(runs: list[dict]) -> None:
    merged = _merge_into(PUBLISHED / "scale.json", runs)
    report.plot(merged, PUBLISHED / "scale.png")
    if not report.update_readme(README, report.table(merged)):
        print(f"no {report.README_START} markers in {README}: table not written", flush=True)


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    if args.publish_from:
        publish(json.loads(args.publish_from.read_text())["runs"])
        print(f"published: {PUBLISHED.relative_to(REPO)}/scale.{{json,png}}, table in {README.relative_to(REPO)}")
        return
    limits = raise_fd_limit(args.members)
    args.source = broker_source(args.revision)
    print(f"open files: soft limit {limits['soft_before']} -> {limits['soft']} (hard {limits['hard']})"
          + ("" if limits["enough"] else f"; below the ~{limits['wanted']} this run may want"), flush=True)
    runs = []
    for count in args.partitions:
        runs.append(one_count(args, count))
        save(runs, limits)  # after each count: a long run keeps what it measured
    merged = save(runs, limits)
    print("\n" + report.table(merged))
    print(f"\nwritten: {(RESULTS / 'scale.json').relative_to(REPO)}, {(RESULTS / 'scale.png').relative_to(REPO)}")
    if args.publish:
        publish(runs)
        print(f"published: {PUBLISHED.relative_to(REPO)}/scale.{{json,png}}, table in {README.relative_to(REPO)}")


if __name__ == "__main__":
    main()
