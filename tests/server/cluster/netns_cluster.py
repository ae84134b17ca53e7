"""A test cluster whose ZooKeeper and brokers each run in a network namespace of their own
(tests/server/cluster/network.py), so a test can partition them as a real network would.

`NetnsCluster` is the harness's `Cluster` (tests/server/cluster/harness.py) placed on a
`Network` of hosts ``zk``, ``b1``, ``b2``, ...: ZooKeeper listens on ``zk``'s address, port
2181; broker ``k`` on host ``b<k>``'s address, port 9092 (every namespace has its own ports),
which it also advertises, so every connection between the processes, and from the test's
clients in the root namespace, crosses the bridge and can be cut. The test process reads
ZooKeeper from the root namespace (``cluster.zk``); no scenario cuts that path.

`netns_cluster(directory, brokers, props)` is the whole life cycle as a context manager:
it removes leftovers of crashed runs, creates and checks the network before any process or
client uses it, starts ZooKeeper, yields the cluster (brokers not started), and at the end,
pass or fail, kills every process and removes the namespaces and the bridge.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path

from odradek.server.local_cluster.zookeeper_server import ZooKeeperServer
from tests.server.cluster.harness import BrokerNode, Cluster
from tests.server.cluster.network import Network

__all__ = ["BROKER_PORT", "NetnsCluster", "broker_host", "netns_cluster"]

BROKER_PORT = 9092
ZOOKEEPER_PORT = 2181
ZOOKEEPER_HOST = "zk"


def broker_host(broker_id: int) -> str:
    return f"b{broker_id}"


class NetnsCluster(Cluster):
    """See the module docstring. ``network`` must hold ``zk`` and ``b<id>`` for each broker."""

    def __init__(self, network: Network, root: Path, props: dict[str, str] | None = None) -> None:
        self.network = network
        zookeeper = ZooKeeperServer(Path(root) / "zookeeper", port=ZOOKEEPER_PORT,
                                    host=network.address(ZOOKEEPER_HOST),
                                    command_prefix=network.command(ZOOKEEPER_HOST))
        super().__init__(zookeeper, root, "", props)

    def _new_node(self, broker_id: int, props: dict[str, str], port: int) -> BrokerNode:
        host = broker_host(broker_id)
        return BrokerNode(broker_id, self.directory / f"broker-{broker_id}", self.zookeeper_connect, props,
                          port=BROKER_PORT, host=self.network.address(host),
                          command_prefix=self.network.command(host))

    def close(self) -> None:
        """Kill every broker and ZooKeeper (kill -9); safe to repeat."""
        try:
            super().close()
        finally:
            self.zookeeper.kill()


@contextmanager
def netns_cluster(directory: Path, brokers: Iterable[int], props: dict[str, str] | None = None
                  ) -> Iterator[NetnsCluster]:
    """The module docstring's life cycle; start the brokers with ``cluster.start(ids)``."""
    network = Network([ZOOKEEPER_HOST, *(broker_host(b) for b in brokers)])
    network.create()
    cluster = None
    try:
        cluster = NetnsCluster(network, directory, props)
        cluster.zookeeper.start()
        yield cluster
    finally:
        try:
            if cluster is not None:
                cluster.close()
        finally:
            network.close()
