"""The machine and the software a run measured: stored with every result, shown in the README.

CPU model and count, memory, kernel, the filesystem under the work directory, Python, and the
versions of the clients and the peer broker; the load average at the start hints at noise.
"""

from __future__ import annotations

import datetime
import os
import platform
import subprocess
from pathlib import Path


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def _mem_gib() -> float:
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("MemTotal:"):
            return round(int(line.split()[1]) / (1 << 20), 1)
    return 0.0


def _filesystem(path: Path) -> str:
    out = subprocess.run(["df", "-T", str(path)], capture_output=True, text=True).stdout.split("\n")
    return out[1].split()[1] if len(out) > 1 and out[1].split() else "unknown"


def _git_commit(repo: Path) -> str:
    out = subprocess.run(["git", "-C", str(repo), "rev-parse", "--short", "HEAD"],
                         capture_output=True, text=True)
    return out.stdout.strip() or "unknown"


def describe(work_dir: Path, repo: Path, versions: dict[str, str]) -> dict:
    return {
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "cpu": _cpu_model(),
        "cores": os.cpu_count(),
        "memory_gib": _mem_gib(),
        "kernel": platform.release(),
        "filesystem": _filesystem(work_dir),
        "python": platform.python_version(),
        "odradek_commit": _git_commit(repo),
        "load_average_at_start": os.getloadavg()[0],
        **versions,
    }
