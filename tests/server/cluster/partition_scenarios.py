"""Network-partition scenarios, Jepsen's way: writers record every acknowledgement while a
fault cuts the network, the network heals, and a checker compares the history with what the
cluster then holds. Shared by tests/server/cluster/test_network_partitions.py and
bench/partition_soak.py.

The cluster (tests/server/cluster/netns_cluster.py): three brokers and a ZooKeeper, each in
its own network namespace, with second-scale timeouts (`PROPS`). `arrange` makes one broker
the leader of every partition of a topic of `PARTITIONS` partitions, three replicas each,
``min.insync.replicas=2``, no unclean election: that broker first in every partition's
replica list (the preferred leader). By default it is the controller, so the worst single
failure hits both roles.

A fault is a function of the network and the `Roles` that makes cuts (`FAULTS`):

- ``controller_cut_from_brokers_and_zookeeper``: the controller (and leader) loses the other
  brokers and ZooKeeper, both ways, while clients still reach it;
- ``follower_cut_from_everything``: one follower loses everyone, clients included;
- ``zookeeper_cut_from_controller``: the controller (and leader) loses ZooKeeper only;
- ``followers_cannot_send_to_leader``: one way: the leader's packets reach the followers,
  theirs do not reach it;
- ``clients_cut_from_leader``: clients cannot reach the leader; the brokers can.

`run` drives one round: the writers (jepsen_workload.py) until each has progress, the fault
for ``fault_s`` seconds, the heal; then the writers must make progress again and the cluster
recover (every partition led, its ISR full) within `RECOVERY_S` of the heal; the writers stop,
and the checker (jepsen_checker.py) reads every partition from the start: no acknowledged
record lost or moved, none duplicated or reordered, every replica the same bytes, and no
writer ended by a fatal error (librdkafka's idempotent producer gives up, with
OUT_OF_ORDER_SEQUENCE_NUMBER, when the broker lacks records it saw acknowledged). The
`Outcome` lists every problem found.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

from odradek.client import AdminClient, NewTopic
from tests.server.cluster.broker_node import log_batches
from tests.server.cluster.cluster_clients import read_partition
from tests.server.cluster.jepsen_checker import Verdict, check, replica_divergence
from tests.server.cluster.jepsen_workload import Workload
from tests.server.cluster.netns_cluster import ZOOKEEPER_HOST, NetnsCluster, broker_host
from tests.server.cluster.network import CLIENT, Network

__all__ = ["BROKERS", "FAULTS", "Outcome", "PROPS", "Roles", "arrange", "run"]

BROKERS = [1, 2, 3]
TOPIC = "jepsen"
PARTITIONS = 3
# A session ends 6 s after its last heartbeat; a follower 1 s behind leaves the ISR. So a
# leader cut off asks to shrink its ISR (after 1-1.5 s) before its ZooKeeper client notices
# the silence (kazoo: after 2-4 s, a third to two thirds of the session): the write is in flight
# when the connection is declared lost, the case a controller must not answer from memory.
PROPS = {
    "zookeeper.session.timeout.ms": "6000",
    "replica.lag.time.max.ms": "1000",
    "unclean.leader.election.enable": "false",
    "min.insync.replicas": "2",
}
TOPIC_CONFIG = {"min.insync.replicas": "2", "unclean.leader.election.enable": "false"}
RECOVERY_S = 60.0  # the bound on recovery after the heal (a liveness failure past it)
PROGRESS = 20  # acknowledgements per writer that show the cluster serves


@dataclass(frozen=True)
class Roles:
    """Who is who in a round: the leader of every partition (the controller, unless `arrange`
    was told otherwise), its followers, and the controller."""

    leader: int
    followers: tuple[int, ...]
    controller: int


def arrange(cluster: NetnsCluster, topic: str = TOPIC, partitions: int = PARTITIONS,
            leader: int | None = None) -> Roles:
    """The topic of the module docstring, every partition led by ``leader`` (default: the
    controller); returns once every partition's ISR is full."""
    controller = cluster.wait_for_controller()
    leader = controller if leader is None else leader
    followers = tuple(b for b in sorted(cluster.nodes) if b != leader)
    assignment = {p: [leader, *followers] for p in range(partitions)}
    with AdminClient(cluster.bootstrap) as admin:
        admin.create_topics([NewTopic(topic, replica_assignment=assignment, configs=TOPIC_CONFIG)])
    cluster.wait_topic_ready(topic, partitions)
    for p in range(partitions):
        cluster.wait_for_isr(topic, p, cluster.nodes)
        assert cluster.leader(topic, p) == leader, cluster.partition_state(topic, p)
    return Roles(leader, followers, controller)


# --- faults --------------------------------------------------------------------------------

def controller_cut_from_brokers_and_zookeeper(net: Network, roles: Roles) -> None:
    others = [b for b in roles.followers + (roles.leader,) if b != roles.controller]
    net.partition([broker_host(roles.controller)], [ZOOKEEPER_HOST, *map(broker_host, others)])


def follower_cut_from_everything(net: Network, roles: Roles) -> None:
    net.isolate(broker_host(roles.followers[0]))


def zookeeper_cut_from_controller(net: Network, roles: Roles) -> None:
    net.partition([broker_host(roles.controller)], [ZOOKEEPER_HOST])


def followers_cannot_send_to_leader(net: Network, roles: Roles) -> None:
    for follower in roles.followers:
        net.cut(broker_host(follower), broker_host(roles.leader))


def clients_cut_from_leader(net: Network, roles: Roles) -> None:
    net.partition([CLIENT], [broker_host(roles.leader)])


Fault = Callable[[Network, Roles], None]
FAULTS: dict[str, Fault] = {f.__name__: f for f in (
    controller_cut_from_brokers_and_zookeeper, follower_cut_from_everything, zookeeper_cut_from_controller,
    followers_cannot_send_to_leader, clients_cut_from_leader)}


# --- a round -------------------------------------------------------------------------------

@dataclass
class Outcome:
    """What a round found: the checker's verdict and every other problem, as sentences."""

    verdict: Verdict | None = None
    problems: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems and self.verdict is not None and self.verdict.ok

    def describe(self) -> str:
        lines = [] if self.verdict is None else [self.verdict.describe()]
        return "\n".join(lines + self.problems)


def run(cluster: NetnsCluster, roles: Roles, fault: Fault, fault_s: float, *, rate: float = 100.0,
        topic: str = TOPIC, partitions: int = PARTITIONS) -> Outcome:
    """One round (module docstring)."""
    outcome = Outcome()
    workload = Workload.both_clients(cluster.bootstrap, topic, partitions, rate).start()
    try:
        workload.wait_progress(PROGRESS, timeout=30)
        fault(cluster.network, roles)
        time.sleep(fault_s)
        cluster.network.heal()
        deadline = time.monotonic() + RECOVERY_S
        try:
            workload.wait_progress(PROGRESS, timeout=RECOVERY_S)
        except AssertionError as e:
            outcome.problems.append(f"no progress after the heal: {e}")
        outcome.problems += wait_recovered(cluster, topic, partitions, deadline)
    finally:
        cluster.network.heal()
        workload.stop()
    errors = workload.errors()
    outcome.problems += [f"writer {w.name} failed for good: {w.fatal}" for w in workload.writers if w.fatal]
    try:
        read = {p: read_partition(cluster.bootstrap, topic, p) for p in range(partitions)}
    except Exception as e:  # noqa: BLE001 - reported with the rest
        outcome.problems.append(f"cannot read the topic back: {e!r}")
        return outcome
    outcome.verdict = check(workload.history(), read)
    outcome.problems += replicas_differ(cluster, topic, partitions)
    if errors and not outcome.ok:
        outcome.problems.append(f"the writers' first error reports: {errors}")
    return outcome


def wait_recovered(cluster: NetnsCluster, topic: str, partitions: int, deadline: float) -> list[str]:
    """[] once every partition has a live leader and a full ISR, before ``deadline``
    (time.monotonic()); else what is missing."""
    try:
        cluster.wait_topic_ready(topic, partitions, timeout=max(deadline - time.monotonic(), 1))
        for p in range(partitions):
            cluster.wait_for_isr(topic, p, cluster.nodes, timeout=max(deadline - time.monotonic(), 1))
    except AssertionError as e:
        return [f"not recovered within {RECOVERY_S:.0f} s of the heal: {e}"]
    return []


def replicas_differ(cluster: NetnsCluster, topic: str, partitions: int, timeout: float = 30.0) -> list[str]:
    """[] once every replica of every partition holds the same batches (segment files read
    directly: writes have stopped and the ISR is full, so each replica catches up to the
    leader's log end); else each partition's difference after ``timeout`` s."""
    deadline = time.monotonic() + timeout
    while True:
        found = []
        for p in range(partitions):
            replicas = {b: log_batches(node.partition_log(topic, p)) for b, node in cluster.nodes.items()}
            difference = replica_divergence(p, replicas)
            if difference:
                found.append(difference)
        if not found or time.monotonic() > deadline:
            return found
        time.sleep(0.25)
