"""A Kafka administrator's secured broker, end to end: the ``server.properties`` and
``admin.properties`` of README.md's "A secured broker" (PKCS12 stores written by keytool,
SASL_SSL with SCRAM-SHA-512 for clients and between brokers, ACLs, ``super.users=User:admin``,
``allow.everyone.if.no.acl.found=false``), only its paths and port changed for the test.

The admin's credential is written before the start with ``odradek storage format
--add-scram``; the admin then creates alice's and bob's credentials, the topics, the ACLs and
alice's produce quota with ``odradek configs`` / ``odradek topics`` / ``odradek acls`` and
``--command-config admin.properties``. Then Kafka's own clients speak to it as to a secured
Kafka: confluent-kafka as alice writes where she may and is refused elsewhere, and is
throttled by her quota; kcat as bob reads through his group and may not write; a wrong
password is refused; kafka-python and aiokafka log in the same way.
"""

from __future__ import annotations

import asyncio
import ssl
from pathlib import Path

import pytest
from aiokafka import AIOKafkaConsumer
from confluent_kafka import Producer
from kafka import KafkaProducer

from odradek.cli.common import read_properties
from odradek.testing.broker import InProcessBroker
from tests.cli.conftest import run_cli
from tests.server.clients import kcat
from tests.server.tls_certs import keytool_pkcs12, make_pki
from tests.test_readme import _block

pytestmark = pytest.mark.timeout(120)

STORE_PASSWORD = "store-secret"  # the README's
QUOTA = 4096  # alice's producer_byte_rate, bytes/s
# Test-only settings beside the README's: a small offsets topic, no first-join delay.
TEST_OVERRIDES = {"offsets.topic.num.partitions": "2", "group.initial.rebalance.delay.ms": "0",
                  "quota.window.num": "2"}


def _written(marker: str, replacements: dict[str, str], path) -> str:
    """README's block that starts with ``marker``, with the test's paths, written to ``path``."""
    text = _block(marker)
    for old, new in replacements.items():
        text = text.replace(old, new)
    path.write_text(text)
    return str(path)


@pytest.fixture(scope="module")
def secured(tmp_path_factory):
    """``(broker, admin, CA PEM path)``, ``admin(*argv)`` running ``odradek`` as the admin
    and returning its output; topics ``t`` and ``other``, users alice (Write on t, her
    quota) and bob (Read on t and group bobs)."""
    d = tmp_path_factory.mktemp("secured")
    pki = make_pki(d / "pki")
    stores = keytool_pkcs12(pki, d / "ssl", STORE_PASSWORD)
    paths = {"/etc/kafka/ssl/server.keystore.p12": stores["keystore"],
             "/etc/kafka/ssl/server.truststore.p12": stores["truststore"],
             "/var/lib/odradek/data": str(d / "data"), "127.0.0.1:9093": "127.0.0.1:0"}
    server_properties = _written("# server.properties\nbroker.id=0", paths, d / "server.properties")
    written = Path(server_properties).read_text()
    assert all(path not in written for path in paths), "README's paths or port changed: update the test"
    admin_properties = _written("# admin.properties", paths, d / "admin.properties")
    formatted = run_cli("storage", "format", "--config", server_properties,
                        "--add-scram", "SCRAM-SHA-512=[name=admin,password=admin-secret]")
    assert formatted.code == 0, formatted.err
    with InProcessBroker(None, {**read_properties(server_properties), **TEST_OVERRIDES}) as broker:
        def admin(*argv: str) -> str:
            result = run_cli(*argv, "--bootstrap-server", broker.bootstrap, "--command-config", admin_properties)
            assert result.code == 0, f"odradek {' '.join(argv)}: {result.err}"
            return result.out

        for user in ("alice", "bob"):
            admin("configs", "--alter", "--add-config", f"SCRAM-SHA-512=[password={user}-secret]",
                  "--entity-type", "users", "--entity-name", user)
        for topic in ("t", "other"):
            admin("topics", "--create", "--topic", topic, "--partitions", "1", "--replication-factor", "1")
        admin("acls", "--add", "--allow-principal", "User:alice", "--operation", "Write", "--topic", "t")
        admin("acls", "--add", "--allow-principal", "User:bob", "--operation", "Read", "--topic", "t",
              "--group", "bobs")
        admin("configs", "--alter", "--add-config", f"producer_byte_rate={QUOTA}", "--entity-type", "users",
              "--entity-name", "alice")
        yield broker, admin, pki["ca"]


def _confluent(broker, ca: str, user: str, password: str, **extra) -> dict:
    return {"bootstrap.servers": broker.bootstrap, "security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-512",
            "sasl.username": user, "sasl.password": password, "ssl.ca.location": ca, **extra}


def _kcat_login(ca: str, user: str, password: str) -> tuple[str, ...]:
    return ("-X", "security.protocol=SASL_SSL", "-X", "sasl.mechanisms=SCRAM-SHA-512", "-X", f"sasl.username={user}",
            "-X", f"sasl.password={password}", "-X", f"ssl.ca.location={ca}")


def test_alice_writes_to_t_is_refused_elsewhere_and_held_to_her_quota(secured):
    broker, _, ca = secured
    throttles, errors = [], {}
    producer = Producer(_confluent(broker, ca, "alice", "alice-secret", **{
        "message.send.max.retries": 0, "linger.ms": 0,
        "throttle_cb": lambda event: throttles.append(event.throttle_time)}))

    def on_delivery(err, msg):
        errors.setdefault(msg.topic(), []).append(err)

    # 20 KB in one go against a 4 KB/s quota: the broker answers with a throttle time
    for _ in range(20):
        producer.produce("t", b"a" * 1024, on_delivery=on_delivery)
    producer.produce("other", b"not hers", on_delivery=on_delivery)
    assert producer.flush(30) == 0
    producer.poll(0)
    assert errors["t"] == [None] * 20
    assert [e.name() for e in errors["other"]] == ["TOPIC_AUTHORIZATION_FAILED"]
    assert any(t > 0 for t in throttles), throttles


def test_bob_reads_t_through_his_group_and_may_not_write(secured):
    broker, _, ca = secured
    producer = Producer(_confluent(broker, ca, "admin", "admin-secret"))
    producer.produce("t", b"for bob")
    assert producer.flush(30) == 0
    login = _kcat_login(ca, "bob", "bob-secret")
    read = kcat(broker.bootstrap, *login, "-G", "bobs", "-X", "auto.offset.reset=earliest", "-e", "-c", "1",
                "-f", "%s\\n", "t", timeout=60)
    assert read.stdout.splitlines()[0] in (b"for bob", b"a" * 1024)
    refused = kcat(broker.bootstrap, *login, "-P", "-t", "t", input=b"bob writes\n", check=False)
    assert b"Topic authorization failed" in refused.stderr, refused.stderr


def test_a_wrong_password_is_refused(secured):
    broker, _, ca = secured
    failures = []
    producer = Producer(_confluent(broker, ca, "alice", "wrong", error_cb=failures.append))
    for _ in range(100):
        producer.poll(0.1)
        if failures:
            break
    assert failures and failures[0].name() == "_AUTHENTICATION", failures
    assert "invalid credentials with SASL mechanism SCRAM-SHA-512" in failures[0].str()


def test_the_admin_lists_the_acls(secured):
    _, admin, _ = secured
    out = admin("acls", "--list")
    assert "(principal=User:alice, host=*, operation=WRITE, permissionType=ALLOW)" in out
    assert "(principal=User:bob, host=*, operation=READ, permissionType=ALLOW)" in out
    assert "ResourcePattern(resourceType=GROUP, name=bobs, patternType=LITERAL)" in out


def test_kafka_python_and_aiokafka_speak_sasl_ssl_scram_too(secured):
    """kafka-python as alice writes to t; aiokafka as bob reads t through his group."""
    broker, _, ca = secured
    login = dict(security_protocol="SASL_SSL", sasl_mechanism="SCRAM-SHA-512")
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap, ssl_cafile=ca, sasl_plain_username="alice",
                             sasl_plain_password="alice-secret", **login)
    try:
        producer.send("t", b"from kafka-python").get(20)
    finally:
        producer.close()

    async def read_as_bob() -> set[bytes]:
        consumer = AIOKafkaConsumer("t", bootstrap_servers=broker.bootstrap, group_id="bobs",
                                    ssl_context=ssl.create_default_context(cafile=ca), sasl_plain_username="bob",
                                    sasl_plain_password="bob-secret", auto_offset_reset="earliest", **login)
        await consumer.start()
        try:
            seen = set()
            while b"from kafka-python" not in seen:
                batches = await asyncio.wait_for(consumer.getmany(timeout_ms=500), 20)
                seen.update(r.value for records in batches.values() for r in records)
            return seen
        finally:
            await consumer.stop()

    assert b"from kafka-python" in asyncio.run(read_as_bob())
