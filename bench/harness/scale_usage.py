"""What a cluster of ``bench/bench_scale.py`` uses: its processes (brokers and ZooKeeper), the
cores they use over an idle window (and what the rest of the machine used meanwhile), the CPU
seconds they have used so far, waiting for them to settle, and the brokers' memory. Read from
``/proc`` (``proc_stats``); a process that exited counts 0.
"""

from __future__ import annotations

import time

from odradek.server.local_cluster.local_cluster import LocalCluster

from . import proc_stats
from . import scale_report as report


def processes(cluster: LocalCluster) -> dict[str, int]:
    pids = {str(i): node.pid for i, node in cluster.nodes.items() if node.alive}
    pids["zookeeper"] = cluster.zookeeper.process.pid
    return pids


def idle(cluster: LocalCluster, seconds: float) -> dict:
    """Cores used by each broker, ZooKeeper, the cluster, and everything else, over ``seconds``."""
    pids = processes(cluster)
    before = {k: proc_stats.cpu_seconds(pid) for k, pid in pids.items()}
    busy0, me0, t0 = proc_stats.system_busy_seconds(), proc_stats.self_cpu_seconds(), time.monotonic()
    time.sleep(seconds)
    after = {k: proc_stats.cpu_seconds(pid) for k, pid in pids.items()}
    wall = time.monotonic() - t0
    used = report.cores(before, after, wall)
    cluster_cores = sum(used.values())
    others = (proc_stats.system_busy_seconds() - busy0 - proc_stats.self_cpu_seconds() + me0) / wall - cluster_cores
    return {"seconds": round(wall, 1), "brokers": {k: v for k, v in used.items() if k != "zookeeper"},
            "zookeeper": used.get("zookeeper"), "cluster": cluster_cores, "others": max(others, 0.0)}


def settle(cluster: LocalCluster, below_cores: float, max_s: float, window_s: float = 5.0) -> float:
    """Wait until a ``window_s`` window in which the cluster used less than ``below_cores``
    (or ``max_s`` passed); the seconds waited."""
    t0 = time.monotonic()
    while time.monotonic() - t0 < max_s:
        before, start = cluster_cpu(cluster), time.monotonic()
        time.sleep(window_s)
        if (cluster_cpu(cluster) - before) / (time.monotonic() - start) < below_cores:
            break
    return time.monotonic() - t0


def memory(cluster: LocalCluster) -> tuple[dict, dict]:
    """Each broker's VmRSS and VmHWM in MB."""
    mem = {str(i): proc_stats.memory_bytes(node.pid) for i, node in cluster.nodes.items() if node.alive}
    return {k: m["rss"] / 1e6 for k, m in mem.items()}, {k: m["hwm"] / 1e6 for k, m in mem.items()}


def cpu_ticks(cluster: LocalCluster) -> float:
    """As `cluster_cpu`, from each process's own counters (``cpu_seconds_ticks``): threads
    that exit meanwhile (a deletion's erasing threads) still count."""
    return _summed(cluster, proc_stats.cpu_seconds_ticks)


def cluster_cpu(cluster: LocalCluster) -> float:
    """CPU seconds the brokers and ZooKeeper have used so far (a dead process counts 0)."""
    return _summed(cluster, proc_stats.cpu_seconds)


def _summed(cluster: LocalCluster, cpu_seconds) -> float:
    total = 0.0
    for pid in processes(cluster).values():
        try:
            total += cpu_seconds(pid)
        except (FileNotFoundError, ProcessLookupError):
            pass
    return total
