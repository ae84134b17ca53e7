"""Two brokers whose inter-broker listener is SASL_PLAINTEXT with SCRAM-SHA-512 only:
``INTERNAL://`` (``inter.broker.listener.name=INTERNAL``,
``sasl.mechanism.inter.broker.protocol=SCRAM-SHA-512``) beside a PLAINTEXT listener for the
test's clients. The brokers' own credential is written to ZooKeeper before they start, as
Kafka's operators do (``/config/users/admin``, Kafka's ScramCredentialUtils form), and each
broker logs in with its ``listener.name.internal.scram-sha-512.sasl.jaas.config``. Replica
fetchers, the controller's channel and the requests to the controller can only work if those
logins succeed, so a topic with two replicas that fill their ISR and end identical shows
they do."""

from __future__ import annotations

import pytest
from confluent_kafka import Producer

from odradek.metadata import layout
from odradek.protocol.scram import make_credential
from tests.server.cluster.cluster_clients import create_topic
from tests.server.security_fixtures import ADMIN_PASSWORD, add_internal_listeners, scram_inter_broker

pytestmark = pytest.mark.timeout(120)

BROKERS = [1, 2]


def test_replication_over_a_scram_inter_broker_listener(make_cluster):
    cluster = make_cluster(scram_inter_broker("SASL_PLAINTEXT"))
    cluster._connect_zk()
    credential = make_credential("SCRAM-SHA-512", ADMIN_PASSWORD)
    cluster.zk.create("/config/users/admin", layout.encode_config({"SCRAM-SHA-512": credential.to_string()}),
                      makepath=True)
    add_internal_listeners(cluster, BROKERS)
    cluster.start(BROKERS)

    create_topic(cluster.bootstrap, "sasl-replicated", 1, 2)
    cluster.wait_for_isr("sasl-replicated", 0, BROKERS)
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all"})
    for i in range(50):
        producer.produce("sasl-replicated", f"v{i}".encode() * 20, partition=0)
    assert producer.flush(30) == 0
    cluster.wait_replicas_identical("sasl-replicated", 0, BROKERS)
