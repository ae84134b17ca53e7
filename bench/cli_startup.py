#!/usr/bin/env python3
"""How long the ``odradek`` command takes to start: ``odradek --version``, and
``odradek topics --list`` against a running broker, as a user types them.

Run: ``.venv/bin/python bench/cli_startup.py [--runs N] [--importtime]`` (about 20 seconds).
One broker runs in a child process (127.0.0.1, an ephemeral port, data in a temporary
directory); each command runs ``--runs`` times (default 7) as a fresh process, the first run of
each thrown away (it warms the page cache), and the minimum and median wall-clock times are
printed. On the project's 2-core machine: about 0.1 s for ``--version`` and 0.35 s for
``topics --list`` (most of it importing the admin client and the protocol's generated
messages), down from 0.7 s and 0.8 s when every subcommand, the whole client and numpy
loaded first.

``--importtime`` also prints the modules that took longest to import for each command
(``python -X importtime``, cumulative microseconds): where to look when a number grows.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from odradek.testing.broker import BrokerProcess  # noqa: E402

# The console script pip installed beside this interpreter, as a user runs it.
_SCRIPT = Path(sys.executable).parent / "odradek"
ODRADEK = [str(_SCRIPT)] if _SCRIPT.exists() else [sys.executable, "-m", "odradek.cli.main"]


def timed(args: list[str], runs: int) -> list[float]:
    """Wall-clock seconds of ``runs`` fresh processes of ``args`` (each must exit 0)."""
    times = []
    for _ in range(runs + 1):
        start = time.perf_counter()
        subprocess.run(args, check=True, stdout=subprocess.DEVNULL)
        times.append(time.perf_counter() - start)
    return times[1:]


def slowest_imports(args: list[str], top: int = 8) -> list[tuple[int, str]]:
    """The ``top`` largest cumulative import times (µs) of one run of ``args``."""
    err = subprocess.run(args, check=True, env={**os.environ, "PYTHONPROFILEIMPORTTIME": "1"},
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True).stderr
    rows = []
    for line in err.splitlines():
        parts = line.split("|")
        if len(parts) == 3 and parts[1].strip().isdigit():
            rows.append((int(parts[1]), parts[2].rstrip()))
    return sorted(rows, reverse=True)[:top]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=7, help="timed runs per command (default 7)")
    parser.add_argument("--importtime", action="store_true", help="also list the slowest imports")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="odradek-cli-startup-") as data, BrokerProcess(Path(data)) as broker:
        broker.start()
        commands = {
            "odradek --version": [*ODRADEK, "--version"],
            "odradek topics --list": [*ODRADEK, "topics", "--bootstrap-server", broker.bootstrap, "--list"],
        }
        print(f"{'command':<24} {'min s':>7} {'median s':>9}   ({args.runs} runs each)")
        for name, command in commands.items():
            times = timed(command, args.runs)
            print(f"{name:<24} {min(times):7.3f} {statistics.median(times):9.3f}")
        if args.importtime:
            for name, command in commands.items():
                print(f"\nslowest imports of {name} (cumulative µs):")
                for micros, module in slowest_imports(command):
                    print(f"  {micros:>9}  {module}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
