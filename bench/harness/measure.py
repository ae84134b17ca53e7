"""One measured run: what the broker, the client and everything else on the machine spent.

``measured(pid, fn)`` runs ``fn()`` and reads, around it, the broker's CPU seconds
(``/proc/<pid>/stat``), this process's and its reaped children's (kcat, the latency consumer:
``getrusage``), and the whole machine's busy CPU seconds (``/proc/stat``). What the machine
spent beyond those three is ``noise_cpu_s``: other engineers' test suites on a shared 2-core
machine, which a reader of the results should see next to the numbers they disturbed.
``steal_cpu_s`` is the time the hypervisor ran other virtual machines instead, which makes
every figure of a run worse, the peer's too (the guest may count some of it as the processes'
own CPU time, so it is shown beside the noise, not as a part of it).
"""

from __future__ import annotations

import os
import resource
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from .proc_stats import cpu_seconds, system_seconds, wait_until_idle


def _rusage_seconds(who: int) -> float:
    r = resource.getrusage(who)
    return r.ru_utime + r.ru_stime


@dataclass(frozen=True)
class Measured:
    value: Any  # what fn returned
    wall_s: float
    broker_cpu_s: float
    client_cpu_s: float  # this process (in-process generators) + reaped children (kcat ...)
    noise_cpu_s: float
    steal_cpu_s: float = 0.0

    def fields(self) -> dict[str, float]:
        return {"wall_s": self.wall_s, "broker_cpu_s": self.broker_cpu_s,
                "client_cpu_s": self.client_cpu_s, "noise_cpu_s": max(0.0, self.noise_cpu_s),
                "steal_cpu_s": self.steal_cpu_s}


def measured(pid: int, fn: Callable[[], Any]) -> Measured:
    broker0 = cpu_seconds(pid)
    self0 = _rusage_seconds(resource.RUSAGE_SELF)
    children0 = _rusage_seconds(resource.RUSAGE_CHILDREN)
    busy0, steal0 = system_seconds()
    begin = time.perf_counter()
    value = fn()
    wall = time.perf_counter() - begin
    busy1, steal1 = system_seconds()
    busy, steal = busy1 - busy0, steal1 - steal0
    broker = cpu_seconds(pid) - broker0
    client = (_rusage_seconds(resource.RUSAGE_SELF) - self0
              + _rusage_seconds(resource.RUSAGE_CHILDREN) - children0)
    return Measured(value, wall, broker, client, busy - broker - client, steal)


def noise_share(run: dict, cores: int) -> float | None:
    """CPU other processes used during a run (its ``fields()``), as a share of the machine;
    None when the run has no wall time."""
    return run["noise_cpu_s"] / run["wall_s"] / cores if run.get("wall_s") else None


def steal_share(run: dict, cores: int) -> float | None:
    """Steal during a run as a share of the machine; None for runs recorded before it was."""
    if not run.get("wall_s") or "steal_cpu_s" not in run:
        return None
    return run["steal_cpu_s"] / run["wall_s"] / cores


DROP_CACHES = Path("/proc/sys/vm/drop_caches")


def fresh_page_cache(*keep: Path) -> bool:
    """Before a run that writes: write back and drop the clean page cache (root only; returns
    whether it could), then read ``keep`` (the client's input files) back in.

    Why: on this project's virtual machines, page-cache pages beyond the first ~4 GB of the
    guest's memory cost the kernel's copy into them (``copy_folio_from_iter_atomic``) about
    six times as much, every time (the host backs that memory differently; touching it once
    beforehand does not help). Each produce run leaves its log in the cache, so after ~3 GB of
    runs every further run's broker CPU tripled, ``sys`` time alone: a cliff whose place in
    the run order decided A/B medians. Dropping the cache keeps every run on the same memory.
    Runs that read from the page cache (consume) must not call this between filling and
    reading."""
    os.sync()
    try:
        DROP_CACHES.write_text("1")
    except OSError:
        return False
    for path in keep:
        with open(path, "rb") as f:
            while f.read(1 << 20):
                pass
    return True


def settle(pids: list[int]) -> float:
    """Bring the machine to the same state before every run; returns the seconds it took.

    ``os.sync()`` first: the page cache's dirty data from earlier runs is written back now
    rather than during the next run, where its writeback would slow odradek's appends (the
    kernel throttles writers past ``vm.dirty_background_ratio``) and show as noise; the
    targets are about writing into the page cache. Then ``wait_until_idle``: a broker still
    working off an earlier run's backlog (Tansu at rates it cannot sustain) finishes first.
    """
    begin = time.monotonic()
    os.sync()
    wait_until_idle(pids)
    return time.monotonic() - begin
