"""One broker of a local cluster as a child process (`BrokerNode`): ``python -m odradek.cli.main
broker --override ...`` with a fixed id, port and data directory for life, so a restart brings
the same broker back on the same endpoint with the same data, as an operator restarting a
Kafka broker does.

Layout of ``directory``: ``data/`` is the broker's ``log.dirs``; its output (stdout and stderr)
is appended to ``log_path`` (``broker.log``). Faults: `kill` is kill -9 (no flush, no
controlled shutdown), `pause` / `resume` are SIGSTOP / SIGCONT (a process that misses its
ZooKeeper session), `terminate` is SIGTERM (a controlled shutdown when
``controlled.shutdown.enable``) and waits for the exit status. Children die with the thread
that started them (see odradek/server/child_process.py's `popen_child`).

By default a broker listens on 127.0.0.1. ``host`` and ``command_prefix`` place it elsewhere:
the partition tests (tests/server/cluster/network.py) run each broker inside a network
namespace of its own, ``command_prefix=["ip", "netns", "exec", NS]`` (which execs the broker
in place, so its pid, signals and death signal are the broker's) and ``host`` that
namespace's address, which the broker listens on and advertises.
"""

from __future__ import annotations

import random
import signal
import socket
import subprocess
from collections.abc import Sequence
from pathlib import Path

from odradek.server.child_process import broker_command, popen_child

__all__ = ["BrokerDidNotStop", "BrokerNode", "free_port"]


class BrokerDidNotStop(AssertionError):
    """A broker was still running ``timeout`` s after SIGTERM (it was killed then)."""


def _ephemeral_start() -> int:
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            return int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


def free_port() -> int:
    """A free port below the kernel's ephemeral range: a broker keeps it across restarts, and
    while it is down no outgoing connection (which takes ephemeral ports) can occupy it."""
    high = _ephemeral_start()
    low = max(10000, high - 15000)
    for _ in range(100):
        port = random.randrange(low, high)
        with socket.socket() as sock:
            try:
                sock.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    raise RuntimeError(f"no free port in [{low}, {high})")


def _listeners(port: int, host: str = "127.0.0.1") -> str:
    return f"PLAINTEXT://{host}:{port}"


class BrokerNode:
    """One broker process: fixed id, port and data directory across restarts. ``props`` are
    broker configs (Kafka's names) on top of the node's ``broker.id``, ``listeners`` and
    ``log.dirs``; ``port`` 0 picks a free one (kept for life). ``host`` is the address it
    listens on, ``command_prefix`` what its command line runs under (module docstring)."""

    def __init__(self, broker_id: int, directory: Path, props: dict[str, str], *, port: int = 0,
                 log_level: str = "INFO", env: dict[str, str] | None = None, new_session: bool = False,
                 host: str = "127.0.0.1", command_prefix: Sequence[str] = ()) -> None:
        self.broker_id = broker_id
        self.directory = Path(directory)
        self.data_dir = self.directory / "data"
        self.host = host
        self.command_prefix = list(command_prefix)
        self.port = port or free_port()
        self._picked_port = not port  # picked here: another may be picked if it is taken first
        self.props = {
            "broker.id": str(broker_id),
            "listeners": _listeners(self.port, host),
            "log.dirs": str(self.data_dir),
            **props,
        }
        self.log_level = log_level
        self.env = dict(env or {})
        self.new_session = new_session
        self.proc: subprocess.Popen | None = None
        self.starts = 0
        self.paused = False
        self._launched_at = 0  # the size of the output file when the process was last launched

    @property
    def bootstrap(self) -> str:
        return f"{self.host}:{self.port}"

    @property
    def log_path(self) -> Path:
        return self.directory / "broker.log"

    def __repr__(self) -> str:
        state = "stopped" if not self.alive else ("paused" if self.paused else f"pid {self.proc.pid}")
        return f"<broker {self.broker_id} {self.bootstrap} {state}>"

    def launch(self) -> None:
        """Start the process (not waiting for it to be ready)."""
        if self.alive:
            raise RuntimeError(f"broker {self.broker_id} is already running")
        self.starts += 1
        self.directory.mkdir(parents=True, exist_ok=True)
        self._launched_at = self.log_path.stat().st_size if self.log_path.exists() else 0
        # PYTHONFAULTHANDLER: a SIGABRT makes the broker print every thread's stack first
        # (`terminate` does that to a broker that does not stop).
        env = {"PYTHONUNBUFFERED": "1", "PYTHONFAULTHANDLER": "1", **self.env}
        command = [*self.command_prefix, *broker_command(self.props, self.log_level)]
        self.proc = popen_child(command, self.log_path, env=env,
                                cwd=self.directory, new_session=self.new_session)
        self.paused = False

    @property
    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    @property
    def pid(self) -> int:
        return self.proc.pid

    def output(self, tail: int = 4000) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-tail:]
        except OSError:
            return ""

    def _launch_output(self) -> bytes:
        """What this launch of the process printed so far."""
        try:
            with open(self.log_path, "rb") as out:
                out.seek(self._launched_at)
                return out.read()
        except OSError:
            return b""

    def finished_starting(self) -> bool:
        """Whether this launch printed its "ready" line: every part of the broker started
        (registered is earlier: it still sets its watches and runs for controller then)."""
        return f"odradek broker {self.broker_id} ready".encode() in self._launch_output()

    def launch_on_a_new_port(self) -> bool:
        """After a first launch that failed because its port was taken between the pick and
        the broker's bind (other processes pick ports too, e.g. parallel tests): pick another
        and launch again. False (nothing done) when that is not the failure, or the port was
        given, or the broker started before (a restart keeps its port: clients know it)."""
        if (not self._picked_port or self.starts != 1 or self.alive
                or self.props["listeners"] != _listeners(self.port, self.host)
                or b"address already in use" not in self._launch_output()):
            return False
        self.port = free_port()
        self.props["listeners"] = _listeners(self.port, self.host)
        self.starts = 0
        self.launch()
        return True

    def accepts_connections(self) -> bool:
        try:
            with socket.create_connection((self.host, self.port), timeout=0.5):
                return True
        except OSError:
            return False

    def kill(self) -> None:
        """kill -9 (a paused process too), and reap it."""
        if self.alive:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(30)
        self.paused = False

    def pause(self) -> None:
        """SIGSTOP: the process stops answering anything, ZooKeeper included."""
        self.proc.send_signal(signal.SIGSTOP)
        self.paused = True

    def resume(self) -> None:
        self.proc.send_signal(signal.SIGCONT)
        self.paused = False

    def terminate(self, timeout: float = 60) -> int:
        """SIGTERM (a controlled shutdown) and its exit status. A broker still running after
        ``timeout`` s gets SIGABRT (its threads' stacks go to its output), then SIGKILL, and
        `BrokerDidNotStop` is raised with the end of its output: a broker must stop by itself."""
        if not self.alive:
            return None if self.proc is None else self.proc.returncode
        if self.paused:
            self.resume()
        self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.send_signal(signal.SIGABRT)
            try:
                self.proc.wait(5)
            except subprocess.TimeoutExpired:
                pass
            self.kill()
            raise BrokerDidNotStop(f"broker {self.broker_id} did not stop within {timeout} s of SIGTERM; "
                                   f"its output ends:\n{self.output(6000)}") from None
