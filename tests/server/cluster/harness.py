"""A replicated cluster for integration tests: one ZooKeeper, N ``odradek broker`` child processes.

``Cluster(zookeeper, root, chroot)`` names a cluster whose metadata lives under ``chroot`` on a
shared throw-away ZooKeeper (tests/metadata/zookeeper_server.py), so tests never see each
other's znodes. ``cluster.start([1000, 1001, 1002])`` launches one process per broker id
(``python -m odradek.cli.main broker --override ...``) and returns when every one of them is
registered under ``/brokers/ids`` and a controller holds ``/controller``.

Each ``BrokerNode`` keeps its port and its log directory for life, so ``restart()`` brings the
same broker back on the same endpoint with the same data, as an operator restarting a Kafka
broker does. Faults: ``kill()`` is kill -9 (no flush, no controlled shutdown), ``pause()`` /
``resume()`` are SIGSTOP / SIGCONT (a process that misses its ZooKeeper session),
``terminate()`` is SIGTERM (controlled shutdown) and waits for the exit status.

Reading state: ``cluster.zk`` is a kazoo client rooted at the chroot; helpers decode the znodes
of Kafka's layout (odradek/metadata/layout.py). ``node.partition_log(topic, p)`` is the bytes
of a replica's log: its ``.log`` segments in offset order, concatenated, cut after the last
whole batch (so replicas compare byte for byte whatever their segment boundaries).

Clean-up contract: ``close()`` kills every broker process the cluster started (a paused one is
continued first so the kill is delivered at once) and waits for it; the children also get
SIGKILL from the kernel when the test process dies (``PR_SET_PDEATHSIG``), so a crashed or
interrupted test run leaves no broker behind. Processes are started from the calling thread
only, because the death signal follows the thread that forked.
"""

from __future__ import annotations

import ctypes
import json
import os
import random
import signal
import socket
import struct
import subprocess
import sys
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from kazoo.client import KazooClient
from kazoo.exceptions import NoNodeError

REPO_ROOT = Path(__file__).resolve().parents[3]
SESSION_TIMEOUT_MS = 4000
# Long enough for a starting interpreter on a loaded 2-core machine, short enough to fail fast.
START_TIMEOUT_S = 45.0
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


class StopWaiting(Exception):
    """Raised by a predicate of `wait_until` when waiting longer is pointless."""


def wait_until(predicate: Callable[[], Any], timeout: float, what: str, interval: float = 0.1) -> Any:
    """Poll ``predicate`` until it returns something truthy (returned); AssertionError naming
    ``what`` (and the last exception the predicate raised, if any) after ``timeout`` s. A
    `StopWaiting` from the predicate propagates at once."""
    deadline = time.monotonic() + timeout
    last_error: BaseException | None = None
    while True:
        try:
            value = predicate()
        except StopWaiting:
            raise
        except Exception as e:  # noqa: BLE001 - a state not reached yet; reported on timeout
            last_error, value = e, None
        if value:
            return value
        if time.monotonic() > deadline:
            detail = f" (last error: {last_error!r})" if last_error is not None else ""
            raise AssertionError(f"timed out after {timeout} s waiting for {what}{detail}")
        time.sleep(interval)


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


class Cluster:
    """Brokers sharing one ZooKeeper chroot. See the module docstring for the contract."""

    def __init__(self, zookeeper, root: Path, chroot: str, props: dict[str, str] | None = None) -> None:
        self.zookeeper = zookeeper
        self.root = root
        self.chroot = chroot
        self.props = dict(props or {})
        self.nodes: dict[int, BrokerNode] = {}
        self.zk = KazooClient(hosts=zookeeper.hosts + chroot, timeout=10.0)
        self._zk_started = False

    # --- life cycle ------------------------------------------------------------------------

    def start(self, broker_ids: Iterable[int], props: dict[str, str] | None = None,
              timeout: float = START_TIMEOUT_S, *, controller: bool = True) -> Cluster:
        """Launch the brokers (all at once), then wait until each is registered and (unless
        ``controller=False``) a controller is elected. ``props`` override the cluster's for
        these brokers."""
        self._ensure_zk()
        ids = list(broker_ids)
        for broker_id in ids:
            node = self.nodes.get(broker_id)
            if node is None:
                node = BrokerNode(broker_id, self.root / f"broker-{broker_id}",
                                  self.zookeeper.hosts + self.chroot, {**self.props, **(props or {})})
                self.nodes[broker_id] = node
            node.launch()
        for broker_id in ids:
            self.wait_registered(broker_id, timeout)
        if controller:
            self.wait_for_controller(timeout=20)
        return self

    def restart(self, broker_id: int, timeout: float = START_TIMEOUT_S) -> BrokerNode:
        """Start a stopped (killed, terminated) broker again with the same id, port and data."""
        node = self.nodes[broker_id]
        if node.alive:
            raise RuntimeError(f"broker {broker_id} is still running")
        node.launch()
        self.wait_registered(broker_id, timeout)
        return node

    def close(self) -> None:
        """Kill every broker process (continuing paused ones first) and disconnect."""
        for node in self.nodes.values():
            if node.alive:
                try:
                    node.proc.send_signal(signal.SIGCONT)
                    node.proc.send_signal(signal.SIGKILL)
                except ProcessLookupError:
                    pass
        for node in self.nodes.values():
            if node.proc is not None:
                try:
                    node.proc.wait(30)
                except subprocess.TimeoutExpired:  # pragma: no cover - a zombie we cannot reap
                    pass
        if self._zk_started:
            try:
                self.zk.stop()
                self.zk.close()
            finally:
                self._zk_started = False

    def __enter__(self) -> Cluster:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _ensure_zk(self) -> None:
        if not self._zk_started:
            root = KazooClient(hosts=self.zookeeper.hosts, timeout=10.0)
            root.start(timeout=15)
            try:
                root.ensure_path(self.chroot)
            finally:
                root.stop()
                root.close()
            self.zk.start(timeout=15)
            self._zk_started = True

    # --- addressing ------------------------------------------------------------------------

    def __getitem__(self, broker_id: int) -> BrokerNode:
        return self.nodes[broker_id]

    @property
    def bootstrap(self) -> str:
        """Every broker's address, running or not (clients skip the dead ones)."""
        return ",".join(node.bootstrap for node in self.nodes.values())

    def live_ids(self) -> list[int]:
        return sorted(i for i, node in self.nodes.items() if node.alive and not node.paused)

    def describe(self) -> str:
        """A summary for failure messages: brokers, registrations, controller."""
        lines = [repr(node) for node in self.nodes.values()]
        try:
            lines.append(f"registered: {self.registered_ids()} controller: {self.controller_id()} "
                         f"epoch: {self.controller_epoch()}")
        except Exception as e:  # noqa: BLE001 - a summary must not raise
            lines.append(f"(ZooKeeper unreadable: {e!r})")
        return "\n".join(lines)

    # --- ZooKeeper reads -------------------------------------------------------------------

    def read_json(self, path: str) -> Any | None:
        """The JSON held by ``path``, or None when the znode does not exist."""
        try:
            data, _ = self.zk.get(path)
        except NoNodeError:
            return None
        return json.loads(data) if data else {}

    def exists(self, path: str) -> bool:
        return self.zk.exists(path) is not None

    def children(self, path: str) -> list[str]:
        try:
            return self.zk.get_children(path)
        except NoNodeError:
            return []

    def registered_ids(self) -> list[int]:
        return sorted(int(c) for c in self.children("/brokers/ids"))

    def broker_epoch(self, broker_id: int) -> int | None:
        """Kafka's broker epoch: the czxid of the broker's registration."""
        stat = self.zk.exists(f"/brokers/ids/{broker_id}")
        return None if stat is None else stat.czxid

    def controller_id(self) -> int | None:
        data = self.read_json("/controller")
        return None if data is None else int(data["brokerid"])

    def controller_epoch(self) -> int | None:
        try:
            data, _ = self.zk.get("/controller_epoch")
        except NoNodeError:
            return None
        return int(data)

    def topic_assignment(self, topic: str) -> dict[int, list[int]] | None:
        data = self.read_json(f"/brokers/topics/{topic}")
        return None if data is None else {int(p): list(r) for p, r in data["partitions"].items()}

    def topic_id(self, topic: str) -> str | None:
        data = self.read_json(f"/brokers/topics/{topic}")
        return None if data is None else data.get("topic_id")

    def partition_state(self, topic: str, partition: int) -> dict | None:
        """``{"controller_epoch", "leader", "leader_epoch", "isr", "version"}`` or None."""
        return self.read_json(f"/brokers/topics/{topic}/partitions/{partition}/state")

    def leader(self, topic: str, partition: int) -> int | None:
        state = self.partition_state(topic, partition)
        return None if state is None else state["leader"]

    def isr(self, topic: str, partition: int) -> list[int]:
        state = self.partition_state(topic, partition)
        return [] if state is None else sorted(state["isr"])

    # --- waiting ---------------------------------------------------------------------------

    def wait_registered(self, broker_id: int, timeout: float = START_TIMEOUT_S) -> None:
        """Until the broker's registration exists and its port answers; fails early, with its
        output, when the process exits."""
        node = self.nodes[broker_id]

        def ready() -> bool:
            if not node.alive:
                raise _Exited(node)
            return self.exists(f"/brokers/ids/{broker_id}") and node.accepts_connections()

        try:
            wait_until(ready, timeout, f"broker {broker_id} to register", interval=0.2)
        except _Exited:
            raise AssertionError(f"broker {broker_id} exited with {node.proc.returncode} while starting:\n"
                                 f"{node.output()}") from None
        except AssertionError as e:
            raise AssertionError(f"{e}\n{self.describe()}\n--- broker {broker_id} output ---\n{node.output()}") from None

    def wait_unregistered(self, broker_id: int, timeout: float = SESSION_TIMEOUT_MS / 1000 + 10) -> None:
        wait_until(lambda: not self.exists(f"/brokers/ids/{broker_id}"), timeout,
                   f"broker {broker_id}'s registration to vanish")

    def wait_for_controller(self, *, other_than: int | None = None, epoch_above: int | None = None,
                            timeout: float = SESSION_TIMEOUT_MS / 1000 + 15) -> int:
        """The controller id once one holds ``/controller`` (not ``other_than``, with
        ``/controller_epoch`` above ``epoch_above`` when given) and it is a live broker."""

        def elected() -> int | None:
            cid = self.controller_id()
            if cid is None or cid == other_than or cid not in self.live_ids():
                return None
            epoch = self.controller_epoch()
            if epoch_above is not None and (epoch is None or epoch <= epoch_above):
                return None
            return cid

        try:
            return wait_until(elected, timeout, "a controller")
        except AssertionError as e:
            raise AssertionError(f"{e}\n{self.describe()}") from None

    def wait_for_leader(self, topic: str, partition: int, *, other_than: int | None = None,
                        timeout: float = SESSION_TIMEOUT_MS / 1000 + 15) -> int:
        """The partition's leader (state znode) once it is a live broker other than ``other_than``."""

        def led() -> int | None:
            leader = self.leader(topic, partition)
            return leader if leader is not None and leader >= 0 and leader != other_than \
                and leader in self.live_ids() else None

        try:
            return wait_until(led, timeout, f"a leader of {topic}-{partition} other than {other_than}")
        except AssertionError as e:
            raise AssertionError(f"{e}: state {self.partition_state(topic, partition)}\n{self.describe()}") from None

    def wait_for_isr(self, topic: str, partition: int, expected: Iterable[int], timeout: float = 30) -> None:
        want = sorted(expected)
        try:
            wait_until(lambda: self.isr(topic, partition) == want, timeout, f"ISR {want} of {topic}-{partition}")
        except AssertionError as e:
            raise AssertionError(f"{e}: state {self.partition_state(topic, partition)}\n{self.describe()}") from None

    def wait_topic_ready(self, topic: str, partitions: int, timeout: float = 30) -> None:
        """Until every partition has a state znode naming a live leader."""

        def ready() -> bool:
            live = self.live_ids()
            for p in range(partitions):
                state = self.partition_state(topic, p)
                if state is None or state["leader"] not in live:
                    return False
            return True

        wait_until(ready, timeout, f"every partition of {topic} to have a live leader")

    def wait_replicas_identical(self, topic: str, partition: int, broker_ids: Iterable[int] | None = None,
                                timeout: float = 30) -> bytes:
        """Until the listed replicas (default: the assignment's) hold the same non-empty log
        bytes; returns them. The failure message gives each replica's batches' offsets."""
        ids = list(broker_ids) if broker_ids is not None else self.topic_assignment(topic)[partition]

        def same() -> bytes | None:
            logs = [self.nodes[i].partition_log(topic, partition) for i in ids]
            return logs[0] if logs[0] and all(log == logs[0] for log in logs) else None

        try:
            return wait_until(same, timeout, f"replicas {ids} of {topic}-{partition} to be identical", interval=0.25)
        except AssertionError as e:
            summary = {i: [(b, last) for b, last, _ in log_batches(self.nodes[i].partition_log(topic, partition))][-5:]
                       for i in ids}
            raise AssertionError(f"{e}: last batches (base, last offset) per replica {summary}; "
                                 f"state {self.partition_state(topic, partition)}") from None


class _Exited(StopWaiting):
    def __init__(self, node: BrokerNode) -> None:
        super().__init__(f"broker {node.broker_id} exited")
