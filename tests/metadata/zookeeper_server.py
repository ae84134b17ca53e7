"""Start a throw-away standalone ZooKeeper server on 127.0.0.1 for tests.

Uses Debian's ``zookeeper`` package (``apt-get install zookeeper``, which brings a JRE): the
server class ``ZooKeeperServerMain`` from /usr/share/java/zookeeper.jar, whose manifest names
its dependencies, run in the foreground with a config in a temp directory, on a free port.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
from pathlib import Path

ZOOKEEPER_JAR = Path("/usr/share/java/zookeeper.jar")
CONF_DIR = Path("/etc/zookeeper/conf")  # holds the package's log4j configuration
START_LIMIT_S = 20.0


def zookeeper_installed() -> bool:
    return ZOOKEEPER_JAR.exists() and shutil.which("java") is not None


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _answers_ruok(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1) as sock:
            sock.sendall(b"ruok")
            return sock.recv(16) == b"imok"
    except OSError:
        return False


class ZooKeeperServer:
    """A standalone server in ``directory``; `start()` waits until it answers ``ruok``."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.port = 0
        self.process: subprocess.Popen | None = None
        self._log = None

    @property
    def hosts(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self) -> None:
        self.port = _free_port()
        data = self.directory / "data"
        data.mkdir(parents=True, exist_ok=True)
        config = self.directory / "zoo.cfg"
        config.write_text(
            "tickTime=500\n"
            f"dataDir={data}\n"
            f"clientPort={self.port}\n"
            "clientPortAddress=127.0.0.1\n"
            "admin.enableServer=false\n"
            "4lw.commands.whitelist=ruok\n"
        )
        classpath = f"{CONF_DIR}:{ZOOKEEPER_JAR}"
        self._log = open(self.directory / "server.log", "wb")
        self.process = subprocess.Popen(
            [
                "java",
                "-Xmx128m",
                "-cp",
                classpath,
                "org.apache.zookeeper.server.ZooKeeperServerMain",
                str(config),
            ],
            stdout=self._log,
            stderr=subprocess.STDOUT,
            env={**os.environ, "ZOO_LOG_DIR": str(self.directory)},
        )
        deadline = time.monotonic() + START_LIMIT_S
        while not _answers_ruok(self.port):
            if self.process.poll() is not None or time.monotonic() > deadline:
                self.stop()
                log = (self.directory / "server.log").read_text(errors="replace")[-2000:]
                raise RuntimeError(f"ZooKeeper did not start within {START_LIMIT_S} s:\n{log}")
            time.sleep(0.1)

    def stop(self) -> None:
        if self._log is not None:
            self._log.close()
            self._log = None
        if self.process is None:
            return
        self.process.terminate()
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        self.process = None
