"""How many times one process called fsync/fdatasync during a run, from kernel tracepoints.

``perf record -a -e syscalls:sys_enter_fsync,syscalls:sys_enter_fdatasync`` records every
such call on the machine (each a few bytes; a run makes hundreds at most), and ``perf script``
then attributes each to its process id (thread group), so the broker's own count is exact
however many threads it starts and whatever else on the machine syncs (the disk's flush
counter in ``/sys/block`` cannot tell those apart). Needs ``perf`` and root (or
``perf_event_paranoid`` <= 1 with tracefs readable); ``available()`` says whether it works, and
a run without it reports the count as missing rather than guessing.
"""

from __future__ import annotations

import shutil
import signal
import subprocess
import time
from collections import Counter
from pathlib import Path

EVENTS = ("syscalls:sys_enter_fsync", "syscalls:sys_enter_fdatasync")


def available() -> bool:
    if shutil.which("perf") is None:
        return False
    probe = subprocess.run(["perf", "stat", "-x,", "-e", EVENTS[0], "true"],
                           capture_output=True, text=True)
    return probe.returncode == 0 and "not supported" not in probe.stderr


class SyscallCounter:
    def __init__(self, output: Path) -> None:
        self.output = Path(output)
        self._proc: subprocess.Popen | None = None

    def start(self) -> "SyscallCounter":
        self._proc = subprocess.Popen(
            ["perf", "record", "-q", "-a", "-o", str(self.output), *sum((["-e", e] for e in EVENTS), [])],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        time.sleep(1.0)  # perf takes a moment to open its events on every CPU
        return self

    def stop(self) -> Counter:
        """Calls per process id (thread group id)."""
        self._proc.send_signal(signal.SIGINT)
        self._proc.communicate(timeout=60)
        script = subprocess.run(["perf", "script", "-i", str(self.output), "-F", "pid,event"],
                                capture_output=True, text=True)
        counts: Counter = Counter()
        for line in script.stdout.splitlines():
            fields = line.split()
            if fields and fields[0].isdigit():
                counts[int(fields[0])] += 1
        self.output.unlink(missing_ok=True)
        return counts
