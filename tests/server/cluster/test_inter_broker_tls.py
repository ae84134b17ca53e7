"""Three brokers secured as Kafka's administrators secure them: the inter-broker listener
``INTERNAL://`` is SASL_SSL (``inter.broker.listener.name=INTERNAL``) with client certificates
required (``listener.name.internal.ssl.client.auth=required``; PKCS12 stores) and the brokers log
in to each other with SCRAM-SHA-512 (``sasl.mechanism.inter.broker.protocol``) as ``User:admin``,
their only super user; ACLs are on with ``allow.everyone.if.no.acl.found=false``. The brokers'
credential goes into ZooKeeper before they start with ``odradek storage format --add-scram``;
the admin then grants the test's clients (User:ANONYMOUS on a PLAINTEXT listener) what they
need with ``odradek acls`` over the SASL_SSL listener, and nothing more: a topic without ACLs
is refused to them.

Replica fetchers, the controller's channel (LeaderAndIsr, UpdateMetadata) and the requests to
the controller can only work over TLS with the broker's own certificate and a SCRAM login that
the authorizer lets do CLUSTER_ACTION, so a topic with three replicas that fill their ISR and
end identical shows they do. Then the leader is killed: the survivors elect a new one over the
same listener and nothing acknowledged is lost.
"""

from __future__ import annotations

import pytest
from confluent_kafka import Producer

from tests.cli.conftest import run_cli
from tests.server.cluster.cluster_clients import create_topic, read_partition
from tests.server.cluster.harness import wait_until
from tests.server.security_fixtures import ADMIN_JAAS, ADMIN_PASSWORD, add_internal_listeners, scram_inter_broker
from tests.server.tls_certs import make_pki, pkcs12_keystore, pkcs12_truststore

pytestmark = pytest.mark.timeout(180)

BROKERS = [1, 2, 3]


def _properties(path, props: dict[str, str]) -> str:
    path.write_text("".join(f"{k}={v}\n" for k, v in props.items()))
    return str(path)


def test_replication_and_failover_over_a_sasl_ssl_inter_broker_listener_with_acls(make_cluster, tmp_path):
    pki = make_pki(tmp_path / "pki")
    stores = {"keystore": pkcs12_keystore(pki, "server", tmp_path / "server.keystore.p12", "store-secret"),
              "truststore": pkcs12_truststore(pki, tmp_path / "truststore.p12", "store-secret")}
    cluster = make_cluster({
        **scram_inter_broker("SASL_SSL"),
        "ssl.keystore.type": "PKCS12", "ssl.keystore.location": stores["keystore"],
        "ssl.keystore.password": "store-secret",
        "ssl.truststore.type": "PKCS12", "ssl.truststore.location": stores["truststore"],
        "ssl.truststore.password": "store-secret",
        "listener.name.internal.ssl.client.auth": "required",
        "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
        "super.users": "User:admin",
        "allow.everyone.if.no.acl.found": "false",
    })
    internal = add_internal_listeners(cluster, BROKERS)
    formatted = run_cli("storage", "format", "--config", _properties(tmp_path / "server.properties", cluster[1].props),
                        "--add-scram", f"SCRAM-SHA-512=[name=admin,password={ADMIN_PASSWORD}]")
    assert formatted.code == 0, formatted.err
    cluster.start(BROKERS)
    registration = cluster.read_json("/brokers/ids/1")
    assert registration["listener_security_protocol_map"] == {"PLAINTEXT": "PLAINTEXT", "INTERNAL": "SASL_SSL"}

    admin_properties = _properties(tmp_path / "admin.properties", {
        "security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-512", "sasl.jaas.config": ADMIN_JAAS,
        "ssl.truststore.location": pki["ca"], "ssl.keystore.location": pki["client"]})
    for grant in (("--operation", "Create", "--cluster"),
                  ("--operation", "Write", "--operation", "Read", "--topic", "tls-replicated"),
                  ("--operation", "Read", "--group", "reader-", "--resource-pattern-type", "prefixed")):
        granted = run_cli("acls", "--bootstrap-server", f"127.0.0.1:{internal[2]}", "--command-config",
                          admin_properties, "--add", "--allow-principal", "User:ANONYMOUS", *grant)
        assert granted.code == 0, granted.err

    create_topic(cluster.bootstrap, "tls-replicated", 1, 3)
    cluster.wait_for_isr("tls-replicated", 0, BROKERS)
    refused = []
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all"})
    producer.produce("not-granted", b"x", on_delivery=lambda err, msg: refused.append(err))
    for i in range(100):
        producer.produce("tls-replicated", f"v{i}".encode() * 50, partition=0)
    assert producer.flush(30) == 0
    assert [e.name() for e in refused] == ["TOPIC_AUTHORIZATION_FAILED"]
    cluster.wait_replicas_identical("tls-replicated", 0, BROKERS)

    leader = cluster.leader("tls-replicated", 0)
    cluster[leader].kill()
    new_leader = cluster.wait_for_leader("tls-replicated", 0, other_than=leader)
    assert new_leader in BROKERS and new_leader != leader
    expected = [f"v{i}".encode() * 50 for i in range(100)]
    # The new leader's high watermark moves up once a follower fetched from it: read until then.
    wait_until(lambda: [v for _, v in read_partition(cluster[new_leader].bootstrap, "tls-replicated", 0)]
               == expected, 30, "every record readable from the new leader")
