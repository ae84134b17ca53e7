"""Three brokers whose inter-broker listener is TLS with client certificates required:
``INTERNAL://`` on SSL (``inter.broker.listener.name=INTERNAL``,
``listener.name.internal.ssl.client.auth=required``) beside a PLAINTEXT listener for the test's
clients. Replica fetchers, the controller's channel (LeaderAndIsr, UpdateMetadata) and the
requests to the controller can only work over TLS with the broker's own certificate, so a
topic with three replicas that fill their ISR and end identical shows they do. Then the leader
is killed: the survivors elect a new one over the same listener and nothing acknowledged is
lost."""

from __future__ import annotations

import pytest
from confluent_kafka import Producer

from tests.server.cluster.broker_node import BrokerNode, free_port
from tests.server.cluster.cluster_clients import create_topic, read_partition
from tests.server.cluster.harness import wait_until
from tests.server.tls_certs import make_pki

pytestmark = pytest.mark.timeout(180)

BROKERS = [1, 2, 3]


def test_replication_over_tls_inter_broker_listener(make_cluster, tmp_path):
    pki = make_pki(tmp_path / "pki")
    cluster = make_cluster({
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,INTERNAL:SSL",
        "inter.broker.listener.name": "INTERNAL",
        "ssl.keystore.type": "PEM", "ssl.keystore.location": pki["server"],
        "ssl.truststore.type": "PEM", "ssl.truststore.location": pki["ca"],
        "listener.name.internal.ssl.client.auth": "required",
    })
    for broker_id in BROKERS:
        node = BrokerNode(broker_id, cluster.root / f"broker-{broker_id}", cluster.zookeeper.hosts + cluster.chroot,
                          cluster.props)
        node.props["listeners"] = f"PLAINTEXT://127.0.0.1:{node.port},INTERNAL://127.0.0.1:{free_port()}"
        cluster.nodes[broker_id] = node
    cluster.start(BROKERS)
    registration = cluster.read_json("/brokers/ids/1")
    assert registration["listener_security_protocol_map"] == {"PLAINTEXT": "PLAINTEXT", "INTERNAL": "SSL"}

    create_topic(cluster.bootstrap, "tls-replicated", 1, 3)
    cluster.wait_for_isr("tls-replicated", 0, BROKERS)
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all"})
    for i in range(100):
        producer.produce("tls-replicated", f"v{i}".encode() * 50, partition=0)
    assert producer.flush(30) == 0
    cluster.wait_replicas_identical("tls-replicated", 0, BROKERS)

    leader = cluster.leader("tls-replicated", 0)
    cluster[leader].kill()
    new_leader = cluster.wait_for_leader("tls-replicated", 0, other_than=leader)
    assert new_leader in BROKERS and new_leader != leader
    expected = [f"v{i}".encode() * 50 for i in range(100)]
    # The new leader's high watermark moves up once a follower fetched from it: read until then.
    wait_until(lambda: [v for _, v in read_partition(cluster[new_leader].bootstrap, "tls-replicated", 0)]
               == expected, 30, "every record readable from the new leader")
