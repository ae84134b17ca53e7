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

The process control, ZooKeeper reads and waits are odradek's own `LocalCluster`
(odradek/server/local_cluster/local_cluster.py), which `Cluster` extends: it makes its nodes
with this directory's `BrokerNode`, starts brokers a few at a time (``start(ids, props)``), and
fails the test (AssertionError) where LocalCluster raises TimeoutError or ClusterStartError.

Reading state: ``cluster.zk`` is a kazoo client rooted at the chroot; helpers decode the znodes
of Kafka's layout (odradek/metadata/layout.py). ``node.partition_log(topic, p)`` is the bytes
of a replica's log: its ``.log`` segments in offset order, each cut after its last whole
batch, concatenated (so replicas compare byte for byte whatever their segment boundaries).

Clean-up contract: ``close()`` kills every broker process the cluster started (a paused one too)
and waits for it; the children also get SIGKILL from the kernel when the test process dies
(``PR_SET_PDEATHSIG``), so a crashed or interrupted test run leaves no broker behind. Processes
are started from the calling thread only, because the death signal follows the thread that
forked.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from odradek.server.local_cluster import local_cluster
from odradek.server.local_cluster.local_cluster import LocalCluster
from tests.server.cluster.broker_node import (  # noqa: F401 - re-exported for the tests
    BASE_PROPS, REPO_ROOT, SESSION_TIMEOUT_MS, BrokerNode, free_port, log_batches,
)

# Long enough for a starting interpreter on a loaded 2-core machine, short enough to fail fast.
START_TIMEOUT_S = 45.0


def wait_until(predicate: Callable[[], Any], timeout: float, what: str, interval: float = 0.1) -> Any:
    """odradek's `local_cluster.wait_until`, failing the test (AssertionError) on a timeout."""
    return local_cluster.wait_until(predicate, timeout, what, interval, error=AssertionError)


class Cluster(LocalCluster):
    """Brokers sharing one ZooKeeper chroot. See the module docstring for the contract."""

    timeout_error = AssertionError
    start_error = AssertionError

    def __init__(self, zookeeper, root: Path, chroot: str, props: dict[str, str] | None = None) -> None:
        super().__init__(root, (), props=props, zookeeper=zookeeper, chroot=chroot)

    def _new_node(self, broker_id: int, props: dict[str, str], port: int) -> BrokerNode:
        return BrokerNode(broker_id, self.directory / f"broker-{broker_id}", self.zookeeper_connect, props)

    def start(self, broker_ids: Iterable[int], props: dict[str, str] | None = None,
              timeout: float = START_TIMEOUT_S, *, controller: bool = True) -> Cluster:
        """Launch the brokers (all at once; ``props`` on top of the cluster's for the ones not
        made yet), then wait until each is registered and (unless ``controller=False``) a
        controller is elected and they all know each other (`LocalCluster.start_brokers`)."""
        self._connect_zk()
        ids = list(broker_ids)
        for broker_id in ids:
            if broker_id not in self.nodes:
                self.add_broker(broker_id, props)
        return self.start_brokers(ids, timeout, controller=controller)

    def __enter__(self) -> Cluster:
        return self

    # --- ZooKeeper reads -------------------------------------------------------------------

    def broker_epoch(self, broker_id: int) -> int | None:
        """Kafka's broker epoch: the czxid of the broker's registration."""
        stat = self.zk.exists(f"/brokers/ids/{broker_id}")
        return None if stat is None else stat.czxid

    def topic_assignment(self, topic: str) -> dict[int, list[int]] | None:
        data = self.read_json(f"/brokers/topics/{topic}")
        return None if data is None else {int(p): list(r) for p, r in data["partitions"].items()}

    def topic_id(self, topic: str) -> str | None:
        data = self.read_json(f"/brokers/topics/{topic}")
        return None if data is None else data.get("topic_id")

    def isr(self, topic: str, partition: int) -> list[int]:
        state = self.partition_state(topic, partition)
        return [] if state is None else sorted(state["isr"])

    # --- waiting ---------------------------------------------------------------------------

    def wait_unregistered(self, broker_id: int, timeout: float = SESSION_TIMEOUT_MS / 1000 + 10) -> None:
        wait_until(lambda: not self.exists(f"/brokers/ids/{broker_id}"), timeout,
                   f"broker {broker_id}'s registration to vanish")

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
