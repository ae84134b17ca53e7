"""One broker child process of a test cluster (`BrokerNode`), and reading its log bytes.

A node keeps its broker id, port and data directory for life, so a restart brings the same
broker back on the same endpoint with the same data. Output (stdout and stderr) goes to
``broker-<n>.log`` in its directory, one file per start. The process gets SIGKILL from the
kernel when the thread that started it dies (``PR_SET_PDEATHSIG``): start nodes from the test's
main thread. See harness.py for the cluster around the nodes.
"""

from __future__ import annotations

import ctypes
import os
import random
import signal
import socket
import struct
import subprocess
import sys
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[3]
SESSION_TIMEOUT_MS = 4000
_PR_SET_PDEATHSIG = 1
_LIBC = ctypes.CDLL(None, use_errno=True)

# Broker settings every cluster test shares: Kafka's names, small and quick.
BASE_PROPS = {
    "zookeeper.session.timeout.ms": str(SESSION_TIMEOUT_MS),
    "zookeeper.connection.timeout.ms": "10000",
    "replica.lag.time.max.ms": "3000",
    "replica.fetch.wait.max.ms": "200",
    "replica.fetch.backoff.ms": "200",
    "replica.high.watermark.checkpoint.interval.ms": "1000",
    "controlled.shutdown.enable": "true",
    "controlled.shutdown.max.retries": "3",
    "controlled.shutdown.retry.backoff.ms": "500",
    "auto.leader.rebalance.enable": "false",
    "auto.create.topics.enable": "false",
    "group.initial.rebalance.delay.ms": "0",
    "offsets.topic.num.partitions": "3",
    "transaction.state.log.num.partitions": "3",
    # Deleted logs are renamed "-delete" and erased this long after, by the retention pass.
    "log.segment.delete.delay.ms": "200",
    "log.retention.check.interval.ms": "1000",
    "num.partitions": "1",
}


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


def _die_with_parent() -> None:
    """Runs in the forked child before exec: SIGKILL it when the test process goes away."""
    _LIBC.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)


def log_batches(data: bytes) -> list[tuple[int, int, bytes]]:
    """``(base_offset, last_offset, raw bytes)`` of each whole v2 batch framed in ``data``
    (baseOffset int64, batchLength int32, ...; lastOffsetDelta int32 at byte 23), stopping at
    a partial or zero-length tail (what a crash or a space reservation leaves)."""
    out, pos = [], 0
    while pos + 12 <= len(data):
        base, length = struct.unpack_from(">qi", data, pos)
        end = pos + 12 + length
        if length <= 0 or end > len(data):
            break
        last_delta = struct.unpack_from(">i", data, pos + 23)[0] if length >= 15 else 0
        out.append((base, base + last_delta, bytes(data[pos:end])))
        pos = end
    return out


class BrokerNode:
    """One broker process of a cluster: fixed id, port and data directory across restarts."""

    def __init__(self, broker_id: int, directory: Path, connect: str, props: dict[str, str]) -> None:
        self.broker_id = broker_id
        self.directory = directory
        self.data_dir = directory / "data"
        self.port = free_port()
        self.props = {
            **BASE_PROPS,
            "broker.id": str(broker_id),
            "zookeeper.connect": connect,
            "listeners": f"PLAINTEXT://127.0.0.1:{self.port}",
            "log.dirs": str(self.data_dir),
            **props,
        }
        self.proc: subprocess.Popen | None = None
        self.starts = 0
        self.paused = False

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def log_path(self) -> Path:
        return self.directory / f"broker-{self.starts}.log"

    def __repr__(self) -> str:
        state = "stopped" if not self.alive else ("paused" if self.paused else f"pid {self.proc.pid}")
        return f"<broker {self.broker_id} {self.bootstrap} {state}>"

    # --- process control -------------------------------------------------------------------

    def launch(self) -> None:
        """Start the process (not waiting for it to be ready); output goes to ``log_path``."""
        if self.alive:
            raise RuntimeError(f"broker {self.broker_id} is already running")
        self.starts += 1
        self.directory.mkdir(parents=True, exist_ok=True)
        args = [sys.executable, "-m", "odradek.cli.main", "broker",
                "--log-level", os.environ.get("ODRADEK_CLUSTER_LOG_LEVEL", "INFO")]
        for key, value in self.props.items():
            args += ["--override", f"{key}={value}"]
        # PYTHONFAULTHANDLER: a SIGABRT makes the broker print every thread's stack first
        # (`terminate` does that to a broker that does not stop).
        env = {**os.environ, "PYTHONUNBUFFERED": "1", "PYTHONFAULTHANDLER": "1",
               "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO_ROOT), os.environ.get("PYTHONPATH")]))}
        with open(self.log_path, "wb") as out:
            self.proc = subprocess.Popen(args, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                         cwd=self.directory, env=env, preexec_fn=_die_with_parent)
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

    def accepts_connections(self) -> bool:
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=0.5):
                return True
        except OSError:
            return False

    def kill(self) -> None:
        """kill -9, and reap it."""
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
        AssertionError is raised with the end of its output: a broker must stop by itself."""
        if not self.alive:
            return self.proc.returncode
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
            raise AssertionError(f"broker {self.broker_id} did not stop within {timeout} s of SIGTERM; "
                                 f"its output ends:\n{self.output(6000)}") from None

    # --- its data --------------------------------------------------------------------------

    def partition_dir(self, topic: str, partition: int) -> Path:
        return self.data_dir / f"{topic}-{partition}"

    def partition_dirs(self, topic: str) -> list[Path]:
        """This broker's directories of ``topic``'s partitions, live ones and ones awaiting
        deletion (``<topic>-<p>.<uuid>-delete``)."""
        if not self.data_dir.is_dir():
            return []
        prefix = topic + "-"
        found = []
        for entry in self.data_dir.iterdir():
            if not entry.is_dir() or not entry.name.startswith(prefix):
                continue
            rest = entry.name[len(prefix):].split(".", 1)[0]
            if rest.isdigit():
                found.append(entry)
        return sorted(found)

    def partition_log(self, topic: str, partition: int) -> bytes:
        """The replica's batches, in offset order, as bytes (b"" when it has no such log)."""
        directory = self.partition_dir(topic, partition)
        if not directory.is_dir():
            return b""
        segments = sorted((p for p in directory.glob("*.log") if p.stem.isdigit()), key=lambda p: int(p.stem))
        out = []
        for path in segments:
            try:
                data = path.read_bytes()
            except FileNotFoundError:  # a segment deleted (retention, truncation) meanwhile
                continue
            out.extend(batch for _, _, batch in log_batches(data))
        return b"".join(out)

    def log_end_offset(self, topic: str, partition: int) -> int:
        batches = log_batches(self.partition_log(topic, partition))
        return batches[-1][1] + 1 if batches else 0
