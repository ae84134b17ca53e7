"""A soak of network partitions, Jepsen's way, and failover times after kill -9 and after a
partition of a leader. Not a CI test: minutes of running, figures printed, nothing asserted
but the checker's verdicts (the exit status is 1 when a round lost, duplicated or reordered
an acknowledged record, or the cluster did not recover).

    .venv/bin/python bench/partition_soak.py [--rounds 10] [--rate 200] [--fault-s 10:20]
                                             [--scenarios a,b] [--failovers 5] [--seed N]

Root only (network namespaces; see tests/server/cluster/network.py). One cluster for the
whole run: three brokers and a ZooKeeper, each in a network namespace of its own
(tests/server/cluster/netns_cluster.py), with the partition tests' settings
(tests/server/cluster/partition_scenarios.py's ``PROPS``: a 6 s ZooKeeper session, a
follower 1 s behind leaves the ISR).

1. **Rounds** (``--rounds``): each on a topic of its own (``--partitions``, three replicas,
   ``min.insync.replicas=2``) led by the controller of the moment, one fault drawn at random
   from ``--scenarios`` (default: all of ``partition_scenarios.FAULTS``) held for a time
   drawn from ``--fault-s``, under confluent-kafka and odradek's producer writing ``--rate``
   records/s each; then the heal, recovery, and the checker. One line per round.
2. **Failover** (``--failovers`` times each of ``--kinds``): a topic led by a broker that is
   not the controller, the same writers; the leader is killed (kill -9, ``kill``), or cut
   from everyone (brokers, ZooKeeper, clients) for ``--fault-s``'s upper bound
   (``partition``); or a topic led by the controller, which is killed (``kill-controller``); the time from the fault to
   the first acknowledgement of a record sent after it. The killed broker is restarted and
   the partitioned one healed, and both rejoin every ISR, before the next. Medians printed.
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO)]

from odradek.server.local_cluster.zookeeper_server import environment_note  # noqa: E402
from tests.server.cluster import partition_scenarios as scenarios  # noqa: E402
from tests.server.cluster.jepsen_workload import Workload  # noqa: E402
from tests.server.cluster.netns_cluster import broker_host, netns_cluster  # noqa: E402
from tests.server.cluster.network import unavailable  # noqa: E402


def soak_rounds(cluster, args, rng: random.Random) -> int:
    """The rounds; how many failed."""
    names = args.scenarios.split(",") if args.scenarios else list(scenarios.FAULTS)
    low, high = args.fault_range
    failed = 0
    for i in range(args.rounds):
        name, fault_s = rng.choice(names), rng.uniform(low, high)
        topic = f"soak-{i}"
        roles = scenarios.arrange(cluster, topic, args.partitions)
        started = time.monotonic()
        outcome = scenarios.run(cluster, roles, scenarios.FAULTS[name], fault_s, rate=args.rate, topic=topic,
                                partitions=args.partitions)
        failed += not outcome.ok
        summary = outcome.verdict.summary() if outcome.verdict else "not read"
        print(f"round {i + 1}/{args.rounds} {name} {fault_s:.0f} s ({roles}): {'ok' if outcome.ok else 'FAILED'} "
              f"in {time.monotonic() - started:.0f} s; {summary}", flush=True)
        if not outcome.ok:
            print("  " + outcome.describe().replace("\n", "\n  "), flush=True)
    return failed


def first_ack_per_writer(workload, moment: float) -> dict[str, float | None]:
    """Per writer (client), seconds from ``moment`` to the first acknowledgement of a record
    it sent after it (None: none came)."""
    out = {}
    for writer in workload.writers:
        acked = [writer.acked_at[seq] for seq in range(writer.sent)
                 if writer.acked_at.get(seq) is not None and writer.sent_at.get(seq, 0.0) > moment]
        out[writer.name] = min(acked) - moment if acked else None
    return out


def failover(cluster, args, kind: str, i: int) -> float | None:
    """One fault of the leader (``kill`` or ``partition``) of a fresh topic; seconds from the
    fault to the first acknowledgement of a record sent after it (None: none came); each
    client's own figure is printed."""
    controller = cluster.wait_for_controller()
    victim = controller if kind == "kill-controller" else next(b for b in sorted(cluster.nodes) if b != controller)
    topic = f"failover-{kind}-{i}"
    scenarios.arrange(cluster, topic, args.partitions, leader=victim)
    workload = Workload.both_clients(cluster.bootstrap, topic, args.partitions, args.rate).start()
    try:
        workload.wait_progress(scenarios.PROGRESS, timeout=30)
        fault_at = time.monotonic()
        if kind != "partition":
            cluster[victim].kill()
        else:
            cluster.network.isolate(broker_host(victim))
        try:
            workload.wait_progress(scenarios.PROGRESS, timeout=scenarios.RECOVERY_S)
        except AssertionError as e:
            print(f"  {kind} {i + 1}: no progress: {e}", flush=True)
        took = workload.first_ack_after(fault_at)
        per_writer = first_ack_per_writer(workload, fault_at)
        print(f"  {kind} {i + 1}: per client " + ", ".join(
            f"{name} {'none' if t is None else f'{t:.2f} s'}" for name, t in per_writer.items()), flush=True)
        if kind != "partition":
            cluster.restart(victim)
        else:
            time.sleep(max(0.0, fault_at + args.fault_range[1] - time.monotonic()))
            cluster.network.heal()
    finally:
        cluster.network.heal()
        workload.stop()
    problems = scenarios.wait_recovered(cluster, topic, args.partitions, time.monotonic() + scenarios.RECOVERY_S)
    for problem in problems:
        print(f"  {kind} {i + 1}: {problem}", flush=True)
    return None if took is None else took - fault_at


LABELS = {"kill": "kill -9 of the leader", "kill-controller": "kill -9 of the controller (and leader)",
          "partition": "partition of the leader"}


def failovers(cluster, args) -> None:
    for kind in args.kinds.split(","):
        times = []
        for i in range(args.failovers):
            took = failover(cluster, args, kind, i)
            print(LABELS[kind],
                  f"{i + 1}/{args.failovers}: first acknowledgement after "
                  f"{'none' if took is None else f'{took:.2f} s'}", flush=True)
            if took is not None:
                times.append(took)
        if times:
            print(f"failover after {LABELS[kind]}: median "
                  f"{statistics.median(times):.2f} s over {len(times)} (min {min(times):.2f}, max {max(times):.2f})",
                  flush=True)


def parse_args(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--rate", type=float, default=200.0, help="records/s per writer (two writers)")
    parser.add_argument("--partitions", type=int, default=6)
    parser.add_argument("--fault-s", default="10:20", help="how long a fault lasts, drawn from LOW:HIGH s")
    parser.add_argument("--scenarios", default="", help=f"comma-separated, of {', '.join(scenarios.FAULTS)}")
    parser.add_argument("--failovers", type=int, default=5, help="kills and partitions of a leader, each")
    parser.add_argument("--kinds", default="kill,partition", help="failovers, comma-separated: kill, kill-controller, partition")
    parser.add_argument("--seed", type=int, default=None)
    parser.add_argument("--work", type=Path, default=None, help="where the cluster's files go (default: a temp dir)")
    args = parser.parse_args(argv)
    low, _, high = args.fault_s.partition(":")
    args.fault_range = (float(low), float(high or low))
    unknown = set(filter(None, args.scenarios.split(","))) - set(scenarios.FAULTS)
    if unknown:
        parser.error(f"unknown scenarios {sorted(unknown)}")
    return args


def main(argv=None) -> int:
    args = parse_args(argv)
    reason = unavailable() or environment_note()
    if reason:
        print(f"cannot run: {reason}", file=sys.stderr)
        return 2
    seed = args.seed if args.seed is not None else random.randrange(1 << 30)
    print(f"seed {seed}", flush=True)
    work = args.work or Path(tempfile.mkdtemp(prefix="partition-soak-"))
    with netns_cluster(work, scenarios.BROKERS, scenarios.PROPS) as cluster:
        cluster.start(scenarios.BROKERS)
        failed = soak_rounds(cluster, args, random.Random(seed))
        failovers(cluster, args)
    print(f"{args.rounds - failed}/{args.rounds} rounds passed; brokers' output in {work}", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
