"""Leadership on a real cluster: preferred elections (``odradek leader-election``,
confluent-kafka's ``elect_leaders``, ElectLeaders sent to a broker that is not the
controller), the automatic rebalance (``auto.leader.rebalance.enable``), an unclean election
that brings back a partition whose only in-sync replica is dead, and ``odradek topics
--describe``'s replication reports with a broker down. Leaders are read from Metadata (the
clients' view) as well as from the state znodes."""

from __future__ import annotations

import pytest
from confluent_kafka import ElectionType as CkElectionType
from confluent_kafka import TopicPartition as CkTopicPartition
from kafka import KafkaAdminClient

from odradek.protocol.generated.elect_leaders_request import ElectLeadersRequest, TopicPartitions
from odradek.protocol.generated.error_codes import ErrorCode
from tests.cli.conftest import run_cli
from tests.server.cluster.cluster_clients import admin
from tests.server.cluster.harness import SESSION_TIMEOUT_MS, wait_until
from tests.server.wire import WireClient

pytestmark = pytest.mark.timeout(150)

FAILOVER_S = SESSION_TIMEOUT_MS / 1000 + 10
# preferred replicas 1, 2, 3, 1: broker 1 is preferred for partitions 0 and 3
ASSIGNMENT = {0: [1, 2, 3], 1: [2, 3, 1], 2: [3, 1, 2], 3: [1, 3, 2]}


def create(bootstrap: str, topic: str, assignment, *configs: str) -> None:
    """``odradek topics --create --replica-assignment`` (confluent-kafka refuses to send an
    assignment: "a default partition count and a replica assignment are mutually exclusive")."""
    text = ",".join(":".join(str(b) for b in replicas) for replicas in assignment)
    flags = [arg for c in configs for arg in ("--config", c)]
    result = run_cli("topics", "--bootstrap-server", bootstrap, "--create", "--topic", topic,
                     "--replica-assignment", text, *flags)
    assert result.code == 0, result.err


def metadata_leaders(bootstrap: str, topic: str) -> dict[int, int]:
    """``{partition: leader}`` as confluent-kafka's Metadata shows them."""
    md = admin(bootstrap).list_topics(topic, timeout=10)
    return {p: info.leader for p, info in md.topics[topic].partitions.items()}


def wait_metadata_leaders(bootstrap: str, topic: str, expected: dict[int, int], timeout: float = 30) -> None:
    wait_until(lambda: metadata_leaders(bootstrap, topic) == expected, timeout,
               f"Metadata leaders {expected} of {topic}")


def reported(bootstrap: str, pattern: str, report: str) -> list[str]:
    """The partition lines ``odradek topics --describe --output text REPORT`` prints."""
    result = run_cli("topics", "--bootstrap-server", bootstrap, "--describe", "--topic", pattern,
                     "--output", "text", report)
    assert result.code == 0, result.err
    return [line.split("\tLeader:")[0].strip() for line in result.lines()]


def lines(topic: str, partitions: list[int]) -> list[str]:
    return [f"Topic: {topic}\tPartition: {p}" for p in partitions]


def test_preferred_election_after_a_broker_returns(make_cluster):
    cluster = make_cluster().start([1, 2, 3])
    topic = "prefs"
    create(cluster.bootstrap, topic, ASSIGNMENT.values(), "min.insync.replicas=2")
    cluster.wait_topic_ready(topic, 4)
    for p in ASSIGNMENT:
        cluster.wait_for_isr(topic, p, [1, 2, 3])

    cluster[1].kill()
    for p in (0, 3):
        cluster.wait_for_leader(topic, p, other_than=1, timeout=FAILOVER_S)
    for p in ASSIGNMENT:
        cluster.wait_for_isr(topic, p, [2, 3])
    # broker 1 down: every ISR is [2, 3], at min.insync.replicas=2; every partition has a leader
    live = ",".join(cluster[b].bootstrap for b in (2, 3))
    # the ISR znodes change before the brokers' metadata (UpdateMetadata follows): wait for it
    wait_until(lambda: reported(live, topic, "--under-replicated-partitions") == lines(topic, [0, 1, 2, 3]),
               30, "the brokers' metadata to show every partition under-replicated")
    assert reported(live, topic, "--at-min-isr-partitions") == lines(topic, [0, 1, 2, 3])
    assert reported(live, topic, "--under-min-isr-partitions") == []
    assert reported(live, topic, "--unavailable-partitions") == []

    cluster.restart(1)
    for p in ASSIGNMENT:
        cluster.wait_for_isr(topic, p, [1, 2, 3])
    wait_until(lambda: reported(cluster.bootstrap, topic, "--under-replicated-partitions") == [], 30,
               "the brokers' metadata to show no partition under-replicated")
    assert cluster.leader(topic, 0) != 1 and cluster.leader(topic, 3) != 1  # no automatic move

    # confluent-kafka's elect_leaders moves partition 3 back
    ck = admin(cluster.bootstrap)  # referenced until the result: its futures fail once it is collected
    results = ck.elect_leaders(CkElectionType.PREFERRED, [CkTopicPartition(topic, 3)]).result(timeout=60)
    assert [e for e in results.values()] == [None]
    assert cluster.leader(topic, 3) == 1
    # odradek leader-election moves the rest (only partition 0 needed it)
    result = run_cli("leader-election", "--bootstrap-server", cluster.bootstrap,
                     "--election-type", "PREFERRED", "--all-topic-partitions")
    assert (result.code, result.out, result.err) == (
        0, f"Successfully completed leader election (PREFERRED) for partitions {topic}-0\n", "")
    wait_metadata_leaders(cluster.bootstrap, topic, {p: r[0] for p, r in ASSIGNMENT.items()})
    result = run_cli("leader-election", "--bootstrap-server", cluster.bootstrap,
                     "--election-type", "PREFERRED", "--topic", topic, "--partition", "0")
    assert result.out == f"Valid replica already elected for partitions {topic}-0\n"

    # a broker that is not the controller forwards ElectLeaders to it
    other = next(b for b in (1, 2, 3) if b != cluster.controller_id())
    client = WireClient(cluster[other].bootstrap, timeout=30)
    try:
        body = ElectLeadersRequest(election_type=0, topic_partitions=[TopicPartitions(topic, [1, 9])],
                                   timeout_ms=10_000)
        _, response = client.request("ElectLeaders", 2, body)
    finally:
        client.close()
    codes = {p.partition_id: p.error_code for r in response.replica_election_results for p in r.partition_result}
    assert (response.error_code, codes) == (
        0, {1: ErrorCode.ELECTION_NOT_NEEDED, 9: ErrorCode.UNKNOWN_TOPIC_OR_PARTITION})


def test_automatic_rebalance_returns_leadership(make_cluster):
    cluster = make_cluster({"auto.leader.rebalance.enable": "true",
                            "leader.imbalance.check.interval.seconds": "1"}).start([1, 2])
    topic = "balanced"
    create(cluster.bootstrap, topic, [[1, 2], [2, 1]])
    cluster.wait_topic_ready(topic, 2)
    cluster.wait_for_isr(topic, 0, [1, 2])
    cluster[1].terminate()  # controlled shutdown: broker 2 takes partition 0 at once
    assert cluster.wait_for_leader(topic, 0, other_than=1) == 2
    cluster.restart(1)
    cluster.wait_for_isr(topic, 0, [1, 2])
    # no command: the controller's imbalance check gives partition 0 back to broker 1
    wait_until(lambda: cluster.leader(topic, 0) == 1, 30, "partition 0 back on broker 1")
    wait_metadata_leaders(cluster.bootstrap, topic, {0: 1, 1: 2})


def test_unclean_election_brings_back_a_partition_without_live_isr(make_cluster):
    cluster = make_cluster().start([1, 2])
    topic = "fragile"
    create(cluster.bootstrap, topic, [[1, 2]], "min.insync.replicas=1")
    cluster.wait_topic_ready(topic, 1)
    cluster.wait_for_isr(topic, 0, [1, 2])
    cluster[2].terminate()
    cluster.wait_for_isr(topic, 0, [1])
    cluster[1].terminate()  # the only in-sync replica
    cluster.restart(2)
    cluster.wait_for_controller()
    bootstrap = cluster[2].bootstrap
    wait_until(lambda: reported(bootstrap, topic, "--unavailable-partitions") == lines(topic, [0]),
               30, "partition 0 reported unavailable")
    assert reported(bootstrap, topic, "--under-min-isr-partitions") == lines(topic, [0])

    preferred = run_cli("leader-election", "--bootstrap-server", bootstrap,
                        "--election-type", "PREFERRED", "--topic", topic, "--partition", "0")
    assert preferred.code == 1
    assert preferred.out.startswith(f"Error completing leader election (PREFERRED) for partition: {topic}-0: "
                                    "PREFERRED_LEADER_NOT_AVAILABLE")
    unclean = run_cli("leader-election", "--bootstrap-server", bootstrap,
                      "--election-type", "UNCLEAN", "--topic", topic, "--partition", "0")
    assert (unclean.code, unclean.out) == (0, f"Successfully completed leader election (UNCLEAN) for partitions {topic}-0\n")
    assert cluster.partition_state(topic, 0)["isr"] == [2]
    kp = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        [described] = kp.describe_topics([topic])
        assert [(p["partition_index"], p["leader_id"]) for p in described["partitions"]] == [(0, 2)]
    finally:
        kp.close()
    assert reported(bootstrap, topic, "--unavailable-partitions") == []
