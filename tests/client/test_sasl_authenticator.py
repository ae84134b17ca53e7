"""odradek's client authenticating with SASL PLAIN and SCRAM against a real broker, and the
admin client's SCRAM credential calls."""

from __future__ import annotations

import asyncio

import pytest

from odradek.client.admin_scram import UserScramCredentialDeletion, UserScramCredentialUpsertion
from odradek.client.cluster import ClusterClient
from odradek.client.errors import BrokerError
from odradek.client.sasl_authenticator import SaslClientConfig, sasl_config
from odradek.client.sync import AdminClient
from odradek.protocol.generated.error_codes import ErrorCode
from tests.server.sasl_broker import plain_port, sasl_broker, sasl_port


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    with sasl_broker(tmp_path_factory.mktemp("sasl") / "data") as b:
        yield b


def test_sasl_config_from_kafka_properties():
    jaas = 'org.apache.kafka.common.security.scram.ScramLoginModule required username="bob" password="pw";'
    assert sasl_config("SASL_SSL", {"sasl.mechanism": "SCRAM-SHA-512", "sasl.jaas.config": jaas}) == \
        SaslClientConfig("SCRAM-SHA-512", "bob", "pw")
    assert sasl_config("SASL_PLAINTEXT", {"sasl.mechanism": "PLAIN", "sasl.username": "a", "sasl.password": "b"}) == \
        SaslClientConfig("PLAIN", "a", "b")
    assert sasl_config("PLAINTEXT", {}) is None
    for protocol, props in [("SASL_PLAINTEXT", {"sasl.mechanism": "PLAIN"}),
                            ("SASL_PLAINTEXT", {}),  # Kafka's default GSSAPI
                            ("SASL_PLAINTEXT", {"sasl.mechanism": "PLAIN", "sasl.jaas.config": "x required"}),
                            ("SASL_PLAINTEXT", {"sasl.kerberos.service.name": "kafka"}),
                            ("TLS", {})]:
        with pytest.raises(ValueError):
            sasl_config(protocol, props)


async def _brokers(port: int, sasl: SaslClientConfig):
    cluster = ClusterClient(f"127.0.0.1:{port}", sasl=sasl, retry_backoff_max_ms=100)
    try:
        snapshot = await cluster.refresh([])
        return sorted(snapshot.brokers)
    finally:
        await cluster.close()


def test_plain_login_and_wrong_password(broker):
    port = sasl_port(broker)
    assert asyncio.run(_brokers(port, SaslClientConfig("PLAIN", "alice", "alice-secret"))) == [1]
    with pytest.raises(BrokerError) as e:
        asyncio.run(_brokers(port, SaslClientConfig("PLAIN", "alice", "wrong")))
    assert e.value.code == ErrorCode.SASL_AUTHENTICATION_FAILED


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_scram_credentials_made_by_the_admin_client_then_used(broker, mechanism):
    user = f"carol-{mechanism[-3:]}"
    admin = AdminClient(f"127.0.0.1:{plain_port(broker)}")
    try:
        assert admin.alter_user_scram_credentials(
            [UserScramCredentialUpsertion(user, mechanism, "carol-pw", iterations=4096)]) == {user: None}
        assert admin.describe_user_scram_credentials([user]) == {user: {mechanism: 4096}}
        port = sasl_port(broker)
        assert asyncio.run(_brokers(port, SaslClientConfig(mechanism, user, "carol-pw"))) == [1]
        with pytest.raises(BrokerError) as e:
            asyncio.run(_brokers(port, SaslClientConfig(mechanism, user, "nope")))
        assert e.value.code == ErrorCode.SASL_AUTHENTICATION_FAILED
        # Too few iterations and deleting what is not there: errors per user, nothing changed.
        result = admin.alter_user_scram_credentials([UserScramCredentialUpsertion("dave", mechanism, "x", iterations=100),
                                                     UserScramCredentialDeletion("erin", mechanism)])
        assert result["dave"].code == ErrorCode.UNACCEPTABLE_CREDENTIAL
        assert result["erin"].code == ErrorCode.RESOURCE_NOT_FOUND
        assert admin.alter_user_scram_credentials([UserScramCredentialDeletion(user, mechanism)]) == {user: None}
        assert admin.describe_user_scram_credentials([user])[user].code == ErrorCode.RESOURCE_NOT_FOUND
        with pytest.raises(BrokerError):
            asyncio.run(_brokers(port, SaslClientConfig(mechanism, user, "carol-pw")))
    finally:
        admin.close()


@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-512"])
def test_producer_and_consumer_with_security_properties(broker, mechanism):
    from odradek.client.sync import Consumer, Producer
    from odradek.client.topic_partition import TopicPartition
    from tests.server.clients import unique_topic, wait_until

    if mechanism == "PLAIN":
        security = {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN",
                    "sasl.username": "alice", "sasl.password": "alice-secret", "sasl.jaas.config": ""}
    else:
        admin = AdminClient(f"127.0.0.1:{plain_port(broker)}")
        admin.alter_user_scram_credentials([UserScramCredentialUpsertion("frank", mechanism, "frank-pw")])
        admin.close()
        security = {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": mechanism,
                    "sasl.jaas.config": 'org.apache.kafka.common.security.scram.ScramLoginModule required '
                                        'username="frank" password="frank-pw";'}
    topic = unique_topic("own-sasl")
    bootstrap = f"127.0.0.1:{sasl_port(broker)}"
    producer = Producer(bootstrap, security=security)
    producer.send(topic, b"s1").result(20)
    producer.close()
    consumer = Consumer(bootstrap, security=security, auto_offset_reset="earliest")
    consumer.assign([TopicPartition(topic, 0)])
    batches = wait_until(lambda: consumer.poll(500), what="a record")
    assert [r.value for records in batches.values() for r in records] == [b"s1"]
    consumer.close()
    wrong = {**security, "sasl.password": "x", "sasl.jaas.config": security.get("sasl.jaas.config", "").replace(
        'password="frank-pw"', 'password="x"')}
    with pytest.raises(BrokerError) as e:  # refused when it starts, not retried
        Producer(bootstrap, security=wrong)
    assert e.value.code == ErrorCode.SASL_AUTHENTICATION_FAILED
