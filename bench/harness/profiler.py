"""Where odradek's broker spends its time under a workload: py-spy samples, summarised.

``Profiler(pid, path).start()`` attaches ``py-spy record --format raw`` (collapsed stacks: one
line per distinct stack, ``frame;frame;...;leaf count``, a frame being ``function (file)``
with ``--nolineno``) to the broker; ``stop()`` interrupts it (SIGINT makes py-spy write its
file) and returns the ``summary``: the functions with the most samples as the leaf (*self*:
time spent in the function's own code, including C calls it makes that are not Python
frames) and anywhere on the stack (*total*), as percentages of all non-idle samples.

Under uvloop, time spent inside the event loop's C code (epoll, socket reads and writes,
dispatch of callbacks) has no Python frame of its own: it shows as the self time of
``run (uvloop/__init__.py)`` / ``Runner.run``; the summary names it ``IN_LOOP`` and drops
the frames above the loop from every stack. ``--nonblocking`` keeps the sampler from
pausing the broker, so the profile barely disturbs what it measures.
"""

from __future__ import annotations

import shutil
import signal
import subprocess
import sys
from collections import Counter
from pathlib import Path

RATE = 200
# The frames of every stack from the interpreter's start down to the event loop: left out of
# "total" (they would top it at ~100%); as a leaf they mean time in uvloop's C code.
LOOP_FRAMES = ("Runner.run (asyncio/runners.py)", "run (uvloop/__init__.py)")
IN_LOOP = "(event loop: uvloop C code, epoll, socket I/O, callback dispatch)"


def py_spy() -> str | None:
    local = Path(sys.executable).parent / "py-spy"
    return str(local) if local.exists() else shutil.which("py-spy")


class Profiler:
    def __init__(self, pid: int, output: Path) -> None:
        self.pid = pid
        self.output = Path(output)
        self._proc: subprocess.Popen | None = None

    def start(self) -> "Profiler":
        binary = py_spy()
        if binary is None:
            raise RuntimeError("py-spy is not installed (.venv/bin/pip install py-spy)")
        self._proc = subprocess.Popen(
            [binary, "record", "--pid", str(self.pid), "--format", "raw", "--nolineno",
             "--nonblocking", "--rate", str(RATE), "--output", str(self.output)],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        return self

    def stop(self) -> dict:
        self._proc.send_signal(signal.SIGINT)
        _, err = self._proc.communicate(timeout=60)
        if not self.output.exists():
            raise RuntimeError(f"py-spy wrote no profile: {err.decode(errors='replace')[-1000:]}")
        return summarize(self.output.read_text())


def _short(frame: str) -> str:
    """``handle (odradek/server/handlers/produce.py)`` -> ``handle (server/handlers/produce.py)``."""
    name, _, where = frame.partition(" (")
    where = where.rstrip(")").removeprefix("odradek/")
    return f"{name} ({where})" if where else name


def summarize(collapsed: str, top: int = 25) -> dict:
    self_counts: Counter[str] = Counter()
    total_counts: Counter[str] = Counter()
    files: Counter[str] = Counter()
    samples = 0
    for line in collapsed.splitlines():
        stack, _, count = line.rpartition(" ")
        if not stack or not count.isdigit():
            continue
        n = int(count)
        frames = [_short(f) for f in stack.split(";") if f and not f.startswith("process ")
                  and not f.startswith("thread ")]
        if not frames:
            continue
        loop_at = max((i for i, f in enumerate(frames) if f in LOOP_FRAMES), default=-1)
        frames = frames[loop_at + 1:] or [IN_LOOP]
        samples += n
        self_counts[frames[-1]] += n
        files[frames[-1].partition(" (")[2].rstrip(")") or "?"] += n
        for f in set(frames):
            total_counts[f] += n

    def pct(counter: Counter) -> list[list]:
        return [[name, round(100 * c / samples, 1)] for name, c in counter.most_common(top)]

    if samples == 0:
        return {"samples": 0, "self": [], "total": [], "self_by_file": []}
    return {"samples": samples, "self": pct(self_counts), "total": pct(total_counts),
            "self_by_file": pct(files)}
