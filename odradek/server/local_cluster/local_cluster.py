"""A ZooKeeper-mode cluster on one machine: a ZooKeeper and N ``odradek broker`` child processes
(`LocalCluster`), run by ``odradek cluster`` and ``odradek demo --brokers N``, and by the
``odradek_cluster`` pytest fixture (odradek/testing/pytest_plugin.py, which adds
odradek/testing/local_cluster.py's `QUICK_PROPS` for second-scale failover).

Layout of ``directory``::

    zookeeper/   zoo.cfg, data/ (ZooKeeper's dataDir), server.log
    broker-1/    data/ (the broker's log.dirs), broker.log
    broker-2/    ...

Everything that makes up the cluster (znodes, logs, ``meta.properties`` with the cluster id)
lives there, so a `LocalCluster` started again on the same directory is the same cluster: the
same cluster id, topics and records. Broker ``i`` (ids 1..N by default) listens on
``PLAINTEXT://127.0.0.1:<port + i - 1>``, or on a free port per broker when ``port`` is 0 (kept
for the life of the object, so a restarted broker comes back on its endpoint). ZooKeeper
listens on a free port; brokers get it as ``zookeeper.connect`` (plus ``chroot``) when they
start. Instead of its own ZooKeeper a cluster can use a running one (``zookeeper=``) under a
``chroot`` of its own, as the pytest fixture does with one ZooKeeper per test session.

Contract: `start` returns once every broker is registered under ``/brokers/ids``, answers on
its port, a controller holds ``/controller``, and every broker lists every other one in its
DescribeCluster answer (its metadata cache follows ZooKeeper's watches, so a topic created a
moment earlier could have seen too few brokers for its replication factor); otherwise it raises
`ClusterStartError` with the failing broker's output. `stop` is a clean stop: brokers one at a
time with SIGTERM (a controlled shutdown: the controller moves their leaderships away first),
the controller last so the controller moves once, then ZooKeeper. `close` is kill -9 for all.

The cluster tests' harness (tests/server/cluster/harness.py) is a subclass: it makes its nodes
with `_new_node`, starts brokers a few at a time with `start_brokers`, and sets
`timeout_error` and `start_error` to AssertionError so that a wait that fails fails the test.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from kazoo.client import KazooClient
from kazoo.exceptions import NoNodeError

from odradek.server.local_cluster.broker_node import BrokerDidNotStop, BrokerNode
from odradek.server.local_cluster.zookeeper_server import ZooKeeperServer

__all__ = ["ClusterStartError", "LocalCluster", "StopWaiting", "wait_until"]

START_TIMEOUT_S = 60.0  # a starting interpreter on a loaded 2-core machine

class ClusterStartError(RuntimeError):
    """A broker exited or did not become ready while the cluster started."""


class StopWaiting(Exception):
    """Raised by a predicate of `wait_until` when waiting longer is pointless."""


def wait_until(predicate: Callable[[], Any], timeout: float, what: str, interval: float = 0.1, *,
               error: type[Exception] = TimeoutError) -> Any:
    """Poll ``predicate`` until it returns something truthy (returned); ``error`` naming
    ``what`` and the predicate's last exception, if any, after ``timeout`` s. A `StopWaiting`,
    `ClusterStartError` or `BrokerDidNotStop` from the predicate propagates at once."""
    deadline = time.monotonic() + timeout
    last_error: BaseException | None = None
    while True:
        try:
            value = predicate()
        except (StopWaiting, ClusterStartError, BrokerDidNotStop):
            raise
        except Exception as e:  # noqa: BLE001 - a state not reached yet; reported on timeout
            last_error, value = e, None
        if value:
            return value
        if time.monotonic() > deadline:
            detail = f" (last error: {last_error!r})" if last_error is not None else ""
            raise error(f"timed out after {timeout} s waiting for {what}{detail}")
        time.sleep(interval)


def known_broker_ids(bootstrap: str) -> set[int]:
    """The broker ids one broker lists in its DescribeCluster answer (its own view)."""
    from odradek.client.connection import BrokerConnection
    from odradek.protocol.generated import ApiKey
    from odradek.protocol.generated.describe_cluster_request import DescribeClusterRequest

    host, _, port = bootstrap.rpartition(":")

    async def ask() -> set[int]:
        conn = BrokerConnection(host, int(port), client_id="odradek-local-cluster", request_timeout=5)
        await conn.connect(5)
        try:
            response = await conn.send(ApiKey.DESCRIBE_CLUSTER, DescribeClusterRequest())
        finally:
            await conn.close()
        return {b.broker_id for b in response.brokers}

    return asyncio.run(ask())


class LocalCluster:
    """See the module docstring. ``brokers``: a count (ids 1..N) or the ids; ``props``: broker
    configs (Kafka's names) for every broker; ``new_session``: children do not get the
    terminal's Ctrl-C (``odradek cluster`` stops them itself, in order); ``notice(text)`` is
    told of a long wait while starting."""

    # What a wait that times out raises, and what a broker that cannot start raises.
    timeout_error: type[Exception] = TimeoutError
    start_error: type[Exception] = ClusterStartError

    def __init__(self, directory: Path, brokers: int | Iterable[int] = 3, *, port: int = 0,
                 props: dict[str, str] | None = None, zookeeper: ZooKeeperServer | None = None,
                 chroot: str = "", log_level: str = "INFO", new_session: bool = False,
                 notice: Callable[[str], None] | None = None) -> None:
        self.directory = Path(directory)
        self.notice = notice or (lambda text: None)
        ids = list(range(1, brokers + 1)) if isinstance(brokers, int) else list(brokers)
        self.owns_zookeeper = zookeeper is None
        self.zookeeper = zookeeper or ZooKeeperServer(self.directory / "zookeeper", new_session=new_session)
        self.chroot = chroot
        self.props = dict(props or {})
        self.log_level = log_level
        self.new_session = new_session
        self.nodes: dict[int, BrokerNode] = {}
        for i, broker_id in enumerate(ids):
            self.add_broker(broker_id, port=port + i if port else 0)
        self.zk: KazooClient | None = None

    def add_broker(self, broker_id: int, props: dict[str, str] | None = None, *, port: int = 0) -> BrokerNode:
        """A node (not started) for ``broker_id``: the cluster's props with ``props`` on top."""
        node = self._new_node(broker_id, {**self.props, **(props or {})}, port)
        self.nodes[broker_id] = node
        return node

    def _new_node(self, broker_id: int, props: dict[str, str], port: int) -> BrokerNode:
        return BrokerNode(broker_id, self.directory / f"broker-{broker_id}", props, port=port,
                          log_level=self.log_level, new_session=self.new_session)

    # --- life cycle ------------------------------------------------------------------------

    @property
    def zookeeper_connect(self) -> str:
        return self.zookeeper.hosts + self.chroot

    def start(self, timeout: float = START_TIMEOUT_S) -> LocalCluster:
        """Start ZooKeeper (if owned) and every broker; see the module docstring."""
        if not self.nodes:
            raise ValueError("a cluster needs at least one broker")
        self.directory.mkdir(parents=True, exist_ok=True)
        if self.owns_zookeeper and not self.zookeeper.alive:
            self.zookeeper.start()
        self._connect_zk()
        self._wait_stale_registrations()
        return self.start_brokers(self.nodes, timeout)

    def start_brokers(self, broker_ids: Iterable[int], timeout: float = START_TIMEOUT_S, *,
                      controller: bool = True) -> LocalCluster:
        """Launch these (stopped) brokers together, ZooKeeper being connected; return once each
        is registered and answers and (unless ``controller=False``) a live broker is controller
        and they all know each other."""
        ids = list(broker_ids)
        for broker_id in ids:
            node = self.nodes[broker_id]
            node.props["zookeeper.connect"] = self.zookeeper_connect
            node.launch()
        for broker_id in ids:
            self.wait_registered(broker_id, timeout)
        if controller:
            self.wait_for_controller(timeout=timeout)
            self.wait_brokers_known(ids, timeout=timeout)
        return self

    def _connect_zk(self) -> None:
        if self.zk is not None:
            return
        if self.chroot:
            root = KazooClient(hosts=self.zookeeper.hosts, timeout=10.0)
            root.start(timeout=15)
            try:
                root.ensure_path(self.chroot)
            finally:
                root.stop()
                root.close()
        self.zk = KazooClient(hosts=self.zookeeper_connect, timeout=10.0)
        self.zk.start(timeout=15)

    def _wait_stale_registrations(self) -> None:
        """A cluster killed with its ZooKeeper leaves sessions that ZooKeeper restores on
        restart and expires only after their timeout; a broker whose old registration is
        still there would refuse to start (its id is in use)."""
        stale = set(self.nodes) & set(self.registered_ids())
        if stale and not any(node.alive for node in self.nodes.values()):
            self.notice(f"waiting for ZooKeeper to expire the sessions of the previous run's brokers {sorted(stale)}")
            wait_until(lambda: not set(self.nodes) & set(self.registered_ids()), 60,
                       f"the previous run's registrations of brokers {sorted(stale)} to expire", interval=0.5,
                       error=self.timeout_error)

    def stop(self, timeout: float = 60) -> dict[str, int | None]:
        """Clean stop (brokers one at a time, the controller last, then ZooKeeper if owned);
        the exit status of each process by name (``broker 1``, ..., ``zookeeper``)."""
        controller = self.controller_id() if self.zk is not None else None
        order = sorted(self.nodes, key=lambda i: (i == controller, i))
        statuses: dict[str, int | None] = {}
        for broker_id in order:
            try:
                statuses[f"broker {broker_id}"] = self.nodes[broker_id].terminate(timeout)
            except BrokerDidNotStop:
                statuses[f"broker {broker_id}"] = self.nodes[broker_id].proc.returncode
        self._disconnect_zk()
        if self.owns_zookeeper:
            statuses["zookeeper"] = self.zookeeper.stop()
        return statuses

    def close(self) -> None:
        """Kill every process (kill -9; a paused one too) and disconnect; safe to repeat."""
        for node in self.nodes.values():
            node.kill()
        self._disconnect_zk()
        if self.owns_zookeeper:
            self.zookeeper.kill()

    def _disconnect_zk(self) -> None:
        if self.zk is not None:
            try:
                self.zk.stop()
                self.zk.close()
            finally:
                self.zk = None

    def __enter__(self) -> LocalCluster:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.close()

    # --- one broker ------------------------------------------------------------------------

    def __getitem__(self, broker_id: int) -> BrokerNode:
        return self.nodes[broker_id]

    def kill(self, broker_id: int) -> None:
        """kill -9: no flush, no controlled shutdown; its session ends after its timeout."""
        self.nodes[broker_id].kill()

    def pause(self, broker_id: int) -> None:
        """SIGSTOP: the broker answers nothing, ZooKeeper included, until `resume`."""
        self.nodes[broker_id].pause()

    def resume(self, broker_id: int) -> None:
        self.nodes[broker_id].resume()

    def terminate(self, broker_id: int, timeout: float = 60) -> int:
        """SIGTERM: a controlled shutdown; the exit status."""
        return self.nodes[broker_id].terminate(timeout)

    def restart(self, broker_id: int, timeout: float = START_TIMEOUT_S) -> BrokerNode:
        """Start a stopped (killed, terminated) broker again with the same id, port and data;
        returns once it is registered and answers."""
        node = self.nodes[broker_id]
        if node.alive:
            raise RuntimeError(f"broker {broker_id} is still running")
        self._wait_own_registration_gone(broker_id)
        node.launch()
        self.wait_registered(broker_id, timeout)
        return node

    def _wait_own_registration_gone(self, broker_id: int) -> None:
        """A killed broker's registration lasts until ZooKeeper expires its session, though the
        controller may have failed it long before (odradek/controller/broker_liveness.py); the
        new process would refuse to start meanwhile (its id is in use, as Kafka's does)."""
        if self.zk is None or not self.exists(f"/brokers/ids/{broker_id}"):
            return
        session_s = float(self.nodes[broker_id].props.get("zookeeper.session.timeout.ms", 18000)) / 1000
        wait_until(lambda: not self.exists(f"/brokers/ids/{broker_id}"), session_s + 30,
                   f"broker {broker_id}'s previous registration to expire", interval=0.2,
                   error=self.timeout_error)

    # --- addressing and state --------------------------------------------------------------

    @property
    def bootstrap(self) -> str:
        """Every broker's address, running or not (clients skip the dead ones)."""
        return ",".join(node.bootstrap for node in self.nodes.values())

    def live_ids(self) -> list[int]:
        return sorted(i for i, node in self.nodes.items() if node.alive and not node.paused)

    def read_json(self, path: str) -> Any | None:
        """The JSON a znode holds (paths under the chroot), or None when it does not exist."""
        try:
            data, _ = self.zk.get(path)
        except NoNodeError:
            return None
        return json.loads(data) if data else {}

    def exists(self, path: str) -> bool:
        return self.zk.exists(path) is not None

    def children(self, path: str) -> list[str]:
        """A znode's children's names ([] when it does not exist)."""
        try:
            return self.zk.get_children(path)
        except NoNodeError:
            return []

    def registered_ids(self) -> list[int]:
        return sorted(int(c) for c in self.children("/brokers/ids"))

    def controller_id(self) -> int | None:
        """The broker ``/controller`` names, or None while there is no controller."""
        data = self.read_json("/controller")
        return None if data is None else int(data["brokerid"])

    def controller_epoch(self) -> int | None:
        """``/controller_epoch`` (bumped by every election), or None before the first one."""
        try:
            data, _ = self.zk.get("/controller_epoch")
        except NoNodeError:
            return None
        return int(data)

    def partition_state(self, topic: str, partition: int) -> dict | None:
        """``{"controller_epoch", "leader", "leader_epoch", "isr", ...}`` or None."""
        return self.read_json(f"/brokers/topics/{topic}/partitions/{partition}/state")

    def leader(self, topic: str, partition: int) -> int | None:
        """The partition's leader as ZooKeeper holds it (-1: none), None for no such partition."""
        state = self.partition_state(topic, partition)
        return None if state is None else state["leader"]

    def describe(self) -> str:
        """A summary for failure messages: brokers, registrations, controller."""
        lines = [repr(node) for node in self.nodes.values()]
        try:
            lines.append(f"registered: {self.registered_ids()} controller: {self.controller_id()} "
                         f"epoch: {self.controller_epoch()}")
        except Exception as e:  # noqa: BLE001 - a summary must not raise
            lines.append(f"(ZooKeeper unreadable: {e!r})")
        return "\n".join(lines)

    # --- waiting ---------------------------------------------------------------------------

    def wait_registered(self, broker_id: int, timeout: float = START_TIMEOUT_S) -> None:
        """Until the broker is registered, its port answers and its start-up is over (it said
        "ready"); `start_error` with its output when it exits or takes longer than ``timeout``."""
        node = self.nodes[broker_id]

        def ready() -> bool:
            if not node.alive:
                raise StopWaiting()
            return (self.exists(f"/brokers/ids/{broker_id}") and node.accepts_connections()
                    and node.finished_starting())

        try:
            wait_until(ready, timeout, f"broker {broker_id} to register", interval=0.2, error=self.timeout_error)
        except StopWaiting:
            if node.launch_on_a_new_port():
                self.notice(f"broker {broker_id}'s port was taken before it could listen: launched on {node.port}")
                return self.wait_registered(broker_id, timeout)
            raise self.start_error(f"broker {broker_id} exited with status {node.proc.returncode} while "
                                   f"starting; its output ({node.log_path}) ends:\n{node.output()}") from None
        except self.timeout_error as e:
            raise self.start_error(f"{e}\n{self.describe()}\n--- broker {broker_id} output ---\n"
                                   f"{node.output()}") from None

    def wait_for_controller(self, *, other_than: int | None = None, epoch_above: int | None = None,
                            timeout: float = 30) -> int:
        """The controller's id once a live broker (not ``other_than``) holds ``/controller``,
        with ``/controller_epoch`` above ``epoch_above`` when given."""

        def elected() -> int | None:
            cid = self.controller_id()
            if cid is None or cid == other_than or cid not in self.live_ids():
                return None
            epoch = self.controller_epoch()
            if epoch_above is not None and (epoch is None or epoch <= epoch_above):
                return None
            return cid

        try:
            return wait_until(elected, timeout, "a controller", error=self.timeout_error)
        except self.timeout_error as e:
            raise self.timeout_error(f"{e}\n{self.describe()}") from None

    def wait_for_leader(self, topic: str, partition: int, *, other_than: int | None = None,
                        timeout: float = 30) -> int:
        """The partition's leader once it is a live broker other than ``other_than``."""

        def led() -> int | None:
            leader = self.leader(topic, partition)
            return leader if leader is not None and leader >= 0 and leader != other_than \
                and leader in self.live_ids() else None

        try:
            return wait_until(led, timeout, f"a leader of {topic}-{partition} other than {other_than}",
                              error=self.timeout_error)
        except self.timeout_error as e:
            raise self.timeout_error(f"{e}: state {self.partition_state(topic, partition)}\n{self.describe()}") \
                from None

    def wait_brokers_known(self, broker_ids: Iterable[int], timeout: float = 30) -> None:
        """Until every one of ``broker_ids`` lists them all (see the module docstring)."""
        wanted = set(broker_ids)

        def known() -> bool:
            return all(known_broker_ids(self.nodes[i].bootstrap) >= wanted for i in wanted)

        wait_until(known, timeout, f"brokers {sorted(wanted)} to all know each other", interval=0.2,
                   error=self.timeout_error)
