"""A replicated cluster for integration tests: one ZooKeeper, N ``odradek broker`` child processes.

``Cluster(zookeeper, root, chroot)`` names a cluster whose metadata lives under ``chroot`` on a
shared throw-away ZooKeeper (odradek/server/local_cluster/zookeeper_server.py), so tests never
see each other's znodes. ``cluster.start([1000, 1001, 1002])`` launches one process per broker id
(``python -m odradek.cli.main broker --override ...``) and returns when every one of them is
registered under ``/brokers/ids`` and a controller holds ``/controller``.

Each ``BrokerNode`` (broker_node.py) keeps its port and its log directory for life, so
``restart()`` brings the same broker back on the same endpoint with the same data, as an
operator restarting a Kafka broker does. Faults: ``kill()`` is kill -9 (no flush, no
controlled shutdown), ``pause()`` / ``resume()`` are SIGSTOP / SIGCONT (a process that misses
its ZooKeeper session), ``terminate()`` is SIGTERM (controlled shutdown) and waits for the
exit status.

Reading state: ``cluster.zk`` is a kazoo client rooted at the chroot; helpers decode the znodes
of Kafka's layout (odradek/metadata/layout.py). ``node.partition_log(topic, p)`` is the bytes
of a replica's log: its ``.log`` segments in offset order, each cut after its last whole
batch, concatenated (so replicas compare byte for byte whatever their segment boundaries).

Clean-up contract: ``close()`` kills every broker process the cluster started (a paused one is
continued first so the kill is delivered at once) and waits for it; the children also get
SIGKILL from the kernel when the test process dies (``PR_SET_PDEATHSIG``), so a crashed or
interrupted test run leaves no broker behind. Processes are started from the calling thread
only, because the death signal follows the thread that forked.
"""

from __future__ import annotations

import json
import signal
import subprocess
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from kazoo.client import KazooClient
from kazoo.exceptions import NoNodeError

from tests.server.cluster.broker_node import (  # noqa: F401 - re-exported for the tests
    BASE_PROPS, REPO_ROOT, SESSION_TIMEOUT_MS, BrokerNode, free_port, log_batches,
)

# Long enough for a starting interpreter on a loaded 2-core machine, short enough to fail fast.
START_TIMEOUT_S = 45.0


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
            self.wait_brokers_known(ids)
        return self

    def wait_brokers_known(self, broker_ids: Iterable[int], timeout: float = 20) -> None:
        """Until every one of ``broker_ids`` lists them all in its Metadata: a broker's view
        of the live brokers follows ZooKeeper's watches, so a topic created through a broker
        the moment the others registered could see too few of them for its replication
        factor (INVALID_REPLICATION_FACTOR, which clients do not retry)."""
        from tests.server.cluster.cluster_clients import metadata_from

        wanted = set(broker_ids)

        def known() -> bool:
            try:
                return all({b.node_id for b in metadata_from(self.nodes[i].bootstrap).brokers} >= wanted
                           for i in wanted)
            except Exception:  # noqa: BLE001 - a broker still starting: look again
                return False

        wait_until(known, timeout, f"brokers {sorted(wanted)} to all know each other")

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
