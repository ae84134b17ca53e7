"""Rack awareness on a real cluster: brokers 1 and 2 in rack ``r1``, broker 3 in ``r2``.

Each broker's ``broker.rack`` is in its ``/brokers/ids/<id>`` registration, and in what
Metadata and DescribeCluster tell confluent-kafka and kafka-python; topics created by
clients get Kafka's rack-aware assignment (every partition's replicas on both racks); once a
broker without a rack joins, creation without ``--disable-rack-aware`` is refused
(INVALID_REPLICA_ASSIGNMENT, kafka-topics.sh's hint) and ``--disable-rack-aware`` computes
a rack-unaware assignment, also for ``--alter --partitions``."""

from __future__ import annotations

from collections import Counter

import pytest
from kafka import KafkaAdminClient, KafkaConsumer

from tests.cli.conftest import run_cli
from tests.server.cluster.cluster_clients import admin, create_topic

pytestmark = pytest.mark.timeout(150)

RACKS = {1: "r1", 2: "r1", 3: "r2"}


def assignment(bootstrap: str, topic: str) -> dict[int, list[int]]:
    md = admin(bootstrap).list_topics(topic, timeout=10)
    return {p: list(info.replicas) for p, info in md.topics[topic].partitions.items()}


def topics_cli(bootstrap: str, *args: str):
    return run_cli("topics", "--bootstrap-server", bootstrap, *args)


def test_racks_reach_clients_and_place_replicas(make_cluster):
    cluster = make_cluster()
    for broker_id, rack in RACKS.items():  # nodes made here get their own rack; start() launches them together
        cluster.add_broker(broker_id, {"broker.rack": rack})
    cluster.start(RACKS)
    bootstrap = cluster.bootstrap

    # the registration znodes, as Kafka writes them
    assert {b: cluster.read_json(f"/brokers/ids/{b}")["rack"] for b in RACKS} == RACKS
    # Metadata (confluent-kafka's DescribeCluster, kafka-python's Metadata and DescribeCluster)
    client = admin(bootstrap)  # referenced until the result: its futures fail once it is collected
    described = client.describe_cluster().result(30)
    assert {n.id: n.rack for n in described.nodes} == RACKS
    consumer = KafkaConsumer(bootstrap_servers=bootstrap)
    try:
        consumer.topics()  # a Metadata round trip fills the cluster view
        assert {b.node_id: b.rack for b in consumer._client.cluster.brokers()} == RACKS
    finally:
        consumer.close()
    kp_admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        brokers = kp_admin.describe_cluster()["brokers"]
        assert {b["broker_id"]: b["rack"] for b in brokers} == RACKS
    finally:
        kp_admin.close()

    # a client's creation: rack-aware; each partition on both racks, leaders even
    create_topic(bootstrap, "spread", 6, 2)
    replicas = assignment(bootstrap, "spread")
    assert all({RACKS[b] for b in r} == {"r1", "r2"} for r in replicas.values()), replicas
    assert set(Counter(r[0] for r in replicas.values()).values()) == {2}
    # so is a growth by CreatePartitions
    assert topics_cli(bootstrap, "--alter", "--topic", "spread", "--partitions", "9").code == 0
    grown = assignment(bootstrap, "spread")
    assert len(grown) == 9 and all({RACKS[b] for b in r} == {"r1", "r2"} for r in grown.values()), grown

    # broker 4 joins without a rack: rack-aware placement is refused, as Kafka refuses it
    cluster.start([4], controller=False)
    cluster.wait_brokers_known([1, 2, 3, 4])
    refused = topics_cli(bootstrap, "--create", "--topic", "mixed", "--partitions", "4", "--replication-factor", "2")
    assert refused.code == 1
    assert refused.err == ("odradek topics: Not all brokers have rack information. Add --disable-rack-aware in "
                           "command line to make replica assignment without rack information.\n")
    accepted = topics_cli(bootstrap, "--create", "--topic", "mixed", "--partitions", "4", "--replication-factor", "2",
                          "--disable-rack-aware")
    assert (accepted.code, accepted.err) == (0, ""), accepted.err
    mixed = assignment(bootstrap, "mixed")
    # rack-unaware: leaders go round the brokers in id order (a rack-aware list would alternate racks)
    leaders = [mixed[p][0] for p in range(4)]
    start = leaders[0] - 1
    assert leaders == [1 + (start + i) % 4 for i in range(4)], mixed
    assert topics_cli(bootstrap, "--alter", "--topic", "mixed", "--partitions", "6").code == 1
    grown = topics_cli(bootstrap, "--alter", "--topic", "mixed", "--partitions", "6", "--disable-rack-aware")
    assert grown.code == 0, grown.err
    assert len(assignment(bootstrap, "mixed")) == 6
