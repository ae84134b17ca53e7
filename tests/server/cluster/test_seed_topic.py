"""Seed 000 on a real cluster: ``odradek topics --create --topic topicA --partitions 10
--replication-factor 2`` on brokers 1000-1004.

Kafka's ``AdminUtils.assignReplicasToBrokersRackUnaware`` picks ``startIndex`` and
``nextReplicaShift`` at random in [0, brokers), so the test accepts the assignment when it is
the algorithm's output for one of those 25 choices. The controller then creates every
partition (NewPartition -> OnlinePartition): the state znode names the first replica as
leader, the whole replica list as ISR, leader epoch 0 and the controller's epoch; each broker
becomes leader or follower of exactly the partitions it is a replica of, and has a log for
them and for no other.
"""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.server.cluster.cluster_clients import metadata_from
from tests.server.cluster.harness import REPO_ROOT, wait_until

pytestmark = pytest.mark.timeout(180)

BROKERS = [1000, 1001, 1002, 1003, 1004]


def replica_index(first: int, shift: int, j: int, n: int) -> int:
    return (first + 1 + (shift + j) % (n - 1)) % n


def assign_rack_unaware(partitions: int, rf: int, brokers: list[int], start: int, shift: int) -> dict[int, list[int]]:
    """Kafka 2.8's assignReplicasToBrokersRackUnaware with a fixed start index and shift."""
    out = {}
    n = len(brokers)
    for p in range(partitions):
        if p > 0 and p % n == 0:
            shift += 1
        first = (p + start) % n
        out[p] = [brokers[first]] + [brokers[replica_index(first, shift, j, n)] for j in range(rf - 1)]
    return out


def test_the_algorithm_gives_the_seeds_worked_example():
    # Seed 000: partition 0 on broker 1002 puts leaders 3,4,0,1,2 / 8,9,5,6,7 on 1000..1004.
    leaders = {p: r[0] for p, r in assign_rack_unaware(10, 2, BROKERS, 2, 0).items()}
    assert [p for p in range(10) if leaders[p] == 1000] == [3, 8]
    assert [p for p in range(10) if leaders[p] == 1002] == [0, 5]


def odradek(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "odradek.cli.main", *args], capture_output=True, text=True,
                          timeout=60, cwd=REPO_ROOT)


def test_seed_topic_on_five_brokers(make_cluster):
    cluster = make_cluster().start(BROKERS)
    controller = cluster.controller_id()
    epoch = cluster.controller_epoch()
    assert controller in BROKERS and epoch >= 1

    done = odradek("topics", "--bootstrap-server", cluster.bootstrap, "--create", "--topic", "topicA",
                   "--partitions", "10", "--replication-factor", "2")
    assert done.returncode == 0, done.stdout + done.stderr

    assignment = cluster.topic_assignment("topicA")
    choices = [(s, k) for s in range(5) for k in range(5)
               if assign_rack_unaware(10, 2, BROKERS, s, k) == assignment]
    assert choices, f"not an assignment Kafka's rack-unaware algorithm gives: {assignment}"
    assert cluster.topic_id("topicA") not in (None, "", "AAAAAAAAAAAAAAAAAAAAAA")

    cluster.wait_topic_ready("topicA", 10)
    for p, replicas in assignment.items():
        state = cluster.partition_state("topicA", p)
        assert state["leader"] == replicas[0], (p, state)
        assert state["isr"] == replicas, (p, state)
        assert state["leader_epoch"] == 0, (p, state)
        assert state["controller_epoch"] == epoch, (p, state)

    # Each broker has a log for exactly the partitions it holds a replica of.
    for broker_id in BROKERS:
        node = cluster[broker_id]
        want = sorted(f"topicA-{p}" for p, r in assignment.items() if broker_id in r)
        wait_until(lambda: sorted(d.name for d in node.partition_dirs("topicA")) == want, 20,
                   f"broker {broker_id}'s logs of topicA to be {want}")

    # Every broker tells clients the same: all five brokers, the real controller, leaders,
    # replicas and ISR as in ZooKeeper.
    for broker_id in BROKERS:
        def agrees() -> bool:
            meta = metadata_from(cluster[broker_id].bootstrap, ["topicA"])
            [topic] = meta.topics
            got = {p.partition_index: (p.leader_id, p.replica_nodes, sorted(p.isr_nodes)) for p in topic.partitions}
            want = {p: (r[0], r, sorted(r)) for p, r in assignment.items()}
            return (sorted(b.node_id for b in meta.brokers) == BROKERS and meta.controller_id == controller
                    and topic.error_code == 0 and got == want)

        wait_until(agrees, 20, f"broker {broker_id}'s Metadata to match ZooKeeper")

    described = odradek("topics", "--bootstrap-server", cluster.bootstrap, "--describe", "--topic", "topicA")
    assert described.returncode == 0, described.stdout + described.stderr
