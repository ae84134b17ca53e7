"""What a process, and the machine, have spent so far: CPU seconds, resident memory, the CPU
busy time of the whole machine (from /proc).

``/proc/<pid>/stat`` fields 14 and 15 (1-based) are ``utime`` and ``stime`` in clock ticks
(``SC_CLK_TCK``, 100 per second on Linux), summed over every thread of the process, dead
threads included; the ``comm`` field (2) is in parentheses and may hold spaces, so the fields
are counted from the last ``)``. ``/proc/<pid>/status`` gives ``VmRSS`` (resident now) and
``VmHWM`` (the peak) in kB. Their resolution is one tick (10 ms), too coarse for the short runs
of ``--quick``, so ``cpu_seconds`` sums the per-thread ``schedstat`` counters (ns) instead.
"""

from __future__ import annotations

import os
import resource
import time

_TICK = os.sysconf("SC_CLK_TCK")


def cpu_seconds_ticks(pid: int) -> float:
    """utime + stime of the process, in seconds (10 ms resolution)."""
    with open(f"/proc/{pid}/stat", "rb") as f:
        text = f.read()
    fields = text[text.rindex(b")") + 2 :].split()
    # fields[0] is field 3 (state), so utime (14) and stime (15) are at 11 and 12.
    return (int(fields[11]) + int(fields[12])) / _TICK


def cpu_seconds(pid: int) -> float:
    """CPU seconds of the process's live threads, in nanoseconds' resolution.

    The first field of ``/proc/<pid>/task/<tid>/schedstat`` is the thread's time on a CPU in
    ns. Summed over the live threads this misses threads that have exited, which the brokers'
    (Tansu's tokio workers, odradek's executor threads) do not do during a run; it agrees with
    ``cpu_seconds_ticks`` to within its 10 ms tick, and resolves the short runs of --quick.
    """
    total = 0
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except FileNotFoundError:
        return cpu_seconds_ticks(pid)
    for tid in tids:
        try:
            with open(f"/proc/{pid}/task/{tid}/schedstat", "rb") as f:
                total += int(f.read().split()[0])
        except (FileNotFoundError, ProcessLookupError, IndexError, ValueError):
            continue  # the thread exited between listdir and open
    return total / 1e9


def memory_bytes(pid: int) -> dict[str, int]:
    """``{"rss": VmRSS, "hwm": VmHWM}`` in bytes."""
    out = {}
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                out["rss"] = int(line.split()[1]) * 1024
            elif line.startswith("VmHWM:"):
                out["hwm"] = int(line.split()[1]) * 1024
    return out


def system_seconds() -> tuple[float, float]:
    """``(busy, steal)`` CPU seconds of the whole machine so far, from one read of the first
    line of /proc/stat (user nice system idle iowait irq softirq steal ...).

    busy: what all processes spent (idle and iowait excluded, steal included); against the
    broker's and the clients' own CPU it shows what else ran, the noise. steal: what the
    hypervisor gave to other virtual machines while this one wanted to run."""
    with open("/proc/stat") as f:
        fields = [int(x) for x in f.readline().split()[1:]]
    return (sum(fields[:8]) - fields[3] - fields[4]) / _TICK, fields[7] / _TICK


def system_busy_seconds() -> float:
    return system_seconds()[0]


def system_steal_seconds() -> float:
    return system_seconds()[1]


def self_cpu_seconds() -> float:
    """CPU seconds of this process so far (all threads): the in-process generators' cost."""
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def wait_until_idle(pids: list[int], busy_below: float = 0.05, window_s: float = 0.25,
                    timeout_s: float = 120.0) -> float:
    """Wait until every process of ``pids`` used less than ``busy_below`` of a core over one
    ``window_s``, or ``timeout_s`` passed; returns the seconds waited.

    Why: a broker that fell behind (Tansu at rates it cannot sustain) works off its backlog
    for seconds after its run ends, and would be counted as noise in the next broker's run.
    A process that has exited counts as idle.
    """
    begin = time.monotonic()
    while True:
        before = {pid: _cpu_or_none(pid) for pid in pids}
        time.sleep(window_s)
        busy = [pid for pid, cpu in before.items()
                if cpu is not None and (_cpu_or_none(pid) or cpu) - cpu >= busy_below * window_s]
        waited = time.monotonic() - begin
        if not busy or waited >= timeout_s:
            return waited


def _cpu_or_none(pid: int) -> float | None:
    try:
        return cpu_seconds(pid)
    except (FileNotFoundError, ProcessLookupError):
        return None
