"""A standalone ZooKeeper server on 127.0.0.1, as a child process, for local clusters and tests.

Uses Debian's ZooKeeper (``apt-get install zookeeper``, or just ``libzookeeper-java`` and a JRE):
the server class ``ZooKeeperServerMain`` from /usr/share/java/zookeeper.jar, whose manifest
names its dependencies, run in the foreground with a generated config.

Layout of ``directory``: ``zoo.cfg`` (rewritten at each start), ``data/`` (ZooKeeper's
``dataDir``: snapshots and transaction log, so a restart on the same directory brings the same
znodes back), ``server.log`` (its output, appended to).

Contract: `start()` returns once the server takes sessions on ``port`` (see `serving`; a free
port is chosen when ``port`` is 0), or raises `ZooKeeperStartError`
with the end of its output. `stop()` is SIGTERM (SIGKILL after 10 s) and waits for the exit.
With ``die_with_parent`` the kernel kills the server when the thread that started it ends
(``PR_SET_PDEATHSIG``); with ``new_session`` it does not get the terminal's Ctrl-C (whoever
started it stops it, after the brokers).

``host`` (default 127.0.0.1) is the address it listens on; ``command_prefix`` is what its
command line runs under: the partition tests (tests/server/cluster/network.py) run it inside
a network namespace with ``["ip", "netns", "exec", NS]`` and that namespace's address.
"""

from __future__ import annotations

import shutil
import socket
import subprocess
import time
from collections.abc import Sequence
from pathlib import Path

from odradek.server.child_process import popen_child

__all__ = ["ZOOKEEPER_JAR", "ZooKeeperServer", "ZooKeeperStartError", "zookeeper_installed"]

ZOOKEEPER_JAR = Path("/usr/share/java/zookeeper.jar")
CONF_DIR = Path("/etc/zookeeper/conf")  # holds the full package's log4j configuration, if installed
START_LIMIT_S = 30.0


class ZooKeeperStartError(RuntimeError):
    """The server exited, or did not serve, while starting."""


def zookeeper_installed() -> bool:
    return ZOOKEEPER_JAR.exists() and shutil.which("java") is not None


def free_port() -> int:
    """A port the kernel calls free on 127.0.0.1 now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def serving(port: int, host: str = "127.0.0.1") -> bool:
    """Whether the server takes sessions: the four-letter command ``srvr`` answers with its
    version then ("Zookeeper version: ..."), and "This ZooKeeper instance is not currently
    serving requests" before (when ``ruok`` already answers ``imok`` and sessions are refused)."""
    try:
        with socket.create_connection((host, port), timeout=1) as sock:
            sock.sendall(b"srvr")
            return sock.recv(64).startswith(b"Zookeeper version")
    except OSError:
        return False


class ZooKeeperServer:
    """A standalone server in ``directory``. ``tick_time_ms`` is ZooKeeper's ``tickTime``: it
    bounds the session timeouts clients get to [2, 20] ticks (500 ms: 1 to 10 s). ``host`` and
    ``command_prefix``: see the module docstring (a ``port`` 0 is picked free on 127.0.0.1)."""

    def __init__(self, directory: Path, *, port: int = 0, tick_time_ms: int = 500,
                 die_with_parent: bool = True, new_session: bool = False, host: str = "127.0.0.1",
                 command_prefix: Sequence[str] = ()) -> None:
        self.directory = Path(directory)
        self.host = host
        self.command_prefix = list(command_prefix)
        self.requested_port = port
        self.port = port
        self.tick_time_ms = tick_time_ms
        self.die_with_parent = die_with_parent
        self.new_session = new_session
        self.process: subprocess.Popen | None = None

    @property
    def hosts(self) -> str:
        """The ``zookeeper.connect`` string of this server (no chroot)."""
        return f"{self.host}:{self.port}"

    @property
    def log_path(self) -> Path:
        return self.directory / "server.log"

    @property
    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def start(self) -> ZooKeeperServer:
        self.port = self.requested_port or free_port()
        data = self.directory / "data"
        data.mkdir(parents=True, exist_ok=True)
        config = self.directory / "zoo.cfg"
        config.write_text(
            f"tickTime={self.tick_time_ms}\n"
            f"dataDir={data}\n"
            f"clientPort={self.port}\n"
            f"clientPortAddress={self.host}\n"
            "admin.enableServer=false\n"
            "4lw.commands.whitelist=ruok,srvr\n"
        )
        classpath = f"{CONF_DIR}:{ZOOKEEPER_JAR}"
        args = [*self.command_prefix, "java", "-Xmx128m", "-cp", classpath,
                "org.apache.zookeeper.server.ZooKeeperServerMain", str(config)]
        self.process = popen_child(args, self.log_path, env={"ZOO_LOG_DIR": str(self.directory)},
                                   die_with_parent=self.die_with_parent, new_session=self.new_session)
        deadline = time.monotonic() + START_LIMIT_S
        while not serving(self.port, self.host):
            if self.process.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise ZooKeeperStartError(f"ZooKeeper did not start within {START_LIMIT_S:.0f} s on port "
                                          f"{self.port}; its output ends:\n{self.output()}")
            time.sleep(0.1)
        return self

    def output(self, tail: int = 2000) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-tail:]
        except OSError:
            return ""

    def stop(self, timeout: float = 10) -> int | None:
        """SIGTERM, then SIGKILL after ``timeout`` s; the exit status (None: never started)."""
        if self.process is None:
            return None
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        return self.process.returncode

    def kill(self) -> None:
        if self.alive:
            self.process.kill()
            self.process.wait()

    def __enter__(self) -> ZooKeeperServer:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()


def environment_note() -> str:
    """Why a cluster cannot start here, for messages (empty when ZooKeeper is installed)."""
    if zookeeper_installed():
        return ""
    missing = [] if ZOOKEEPER_JAR.exists() else [f"{ZOOKEEPER_JAR} (apt-get install zookeeper)"]
    if shutil.which("java") is None:
        missing.append("java (apt-get install default-jre-headless)")
    return "ZooKeeper is not installed here: missing " + " and ".join(missing)

