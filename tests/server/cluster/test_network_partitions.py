"""Network partitions under idempotent ``acks=all`` writers, as Jepsen tests Kafka: no
acknowledged record may be lost, duplicated or reordered, and the cluster must recover.

Each test is one round of tests/server/cluster/partition_scenarios.py on a fresh cluster of
three brokers and a ZooKeeper in network namespaces of their own (netns_cluster.py), the
controller leading every partition: confluent-kafka and odradek's own producer write while
the fault cuts the network for a while, then the network heals, and the checker reads every
partition back and compares each replica's segment files. The faults: the controller (and
leader) cut from the other brokers and ZooKeeper while clients still reach it (three rounds,
each on a new topic: see `CONTROLLER_ROUNDS`); a follower cut from everything; ZooKeeper cut
from the controller only; the followers unable to send to the leader (one way); the clients
cut from the leader.

Namespaces need root and iproute2 (CI runs as root): elsewhere the tests are skipped, with
the reason. Every namespace, veth and the bridge are removed at the end of each test, pass or
fail, and leftovers of crashed runs at the start of the next.
"""

from __future__ import annotations

import pytest

from odradek.server.local_cluster.zookeeper_server import environment_note
from tests.server.cluster import partition_scenarios as scenarios
from tests.server.cluster.netns_cluster import netns_cluster
from tests.server.cluster.network import unavailable

pytestmark = pytest.mark.timeout(240)

# Longer than a ZooKeeper session (6 s, partition_scenarios.PROPS) and an election: the other
# side moves on meanwhile.
FAULT_S = 10.0
CONTROLLER_FAULT_S = 12.0
# Before the controller's fixes, a round of that scenario lost acknowledged records about two
# times in three (the deposed controller answered its leader's ISR shrink from memory if that
# came before it learned of its new session, a race of ~100 ms after the heal): three rounds.
CONTROLLER_ROUNDS = 3


@pytest.fixture
def cluster(tmp_path):
    reason = unavailable() or environment_note()
    if reason:
        pytest.skip(reason)
    with netns_cluster(tmp_path, scenarios.BROKERS, scenarios.PROPS) as cluster:
        cluster.start(scenarios.BROKERS)
        cluster.roles = scenarios.arrange(cluster)
        yield cluster


def check_round(cluster, fault, fault_s: float = FAULT_S, roles=None, topic: str = scenarios.TOPIC) -> None:
    roles = roles or cluster.roles
    outcome = scenarios.run(cluster, roles, fault, fault_s, topic=topic)
    assert outcome.ok, (f"{fault.__name__} on {topic} ({roles}):\n{outcome.describe()}\n{cluster.describe()}\n"
                        f"broker and ZooKeeper output in {cluster.directory}")


def test_controller_and_leader_cut_from_brokers_and_zookeeper(cluster):
    """Round after round, each on a new topic led by the controller of the moment."""
    roles, topic = cluster.roles, scenarios.TOPIC
    for round_ in range(CONTROLLER_ROUNDS):
        if round_:
            topic = f"{scenarios.TOPIC}-{round_}"
            roles = scenarios.arrange(cluster, topic)
        check_round(cluster, scenarios.controller_cut_from_brokers_and_zookeeper, CONTROLLER_FAULT_S, roles, topic)


def test_follower_cut_from_everything(cluster):
    check_round(cluster, scenarios.follower_cut_from_everything)


def test_zookeeper_cut_from_controller(cluster):
    check_round(cluster, scenarios.zookeeper_cut_from_controller)


def test_followers_cannot_send_to_leader(cluster):
    check_round(cluster, scenarios.followers_cannot_send_to_leader)


def test_clients_cut_from_leader(cluster):
    check_round(cluster, scenarios.clients_cut_from_leader)
