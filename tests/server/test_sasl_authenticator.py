"""SASL on a broker listener, driven by real clients (kafka-python and aiokafka with PLAIN,
confluent-kafka with SCRAM-SHA-256/512 and its admin client making the credentials) and by
hand on the wire (a v0 handshake's bare tokens, requests before authentication, the session
lifetime of connections.max.reauth.ms)."""

from __future__ import annotations

import asyncio
import logging
import struct
import time

import pytest
from confluent_kafka import Consumer as CKConsumer
from confluent_kafka import KafkaError as CKError
from confluent_kafka import TopicPartition
from confluent_kafka import Producer as CKProducer
from confluent_kafka.admin import AdminClient as CKAdmin
from confluent_kafka.admin import ScramCredentialInfo, ScramMechanism, UserScramCredentialUpsertion
from kafka import KafkaConsumer, KafkaProducer
from kafka.errors import KafkaError as KPError

from odradek.protocol.api_keys import ApiKey
from odradek.protocol.generated.error_codes import ErrorCode
from odradek.protocol.scram import ScramClient
from tests.server.clients import unique_topic, wait_until
from tests.server.group_wire import WireClient
from tests.server.sasl_broker import PLAIN_JAAS, plain_port, sasl_broker, sasl_port
from tests.server.tls_certs import make_pki

REAUTH_MS = 300


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    with sasl_broker(tmp_path_factory.mktemp("sasl") / "data") as b:
        yield b


@pytest.fixture(scope="module")
def reauth_broker(tmp_path_factory):
    with sasl_broker(tmp_path_factory.mktemp("reauth") / "data",
                     **{"connections.max.reauth.ms": str(REAUTH_MS)}) as b:
        yield b


def _kp(port, password="alice-secret"):
    return dict(bootstrap_servers=f"127.0.0.1:{port}", security_protocol="SASL_PLAINTEXT", sasl_mechanism="PLAIN",
                sasl_plain_username="alice", sasl_plain_password=password)


def _errors(caplog):
    return [r.getMessage() for r in caplog.records if r.name.startswith("odradek") and r.levelno >= logging.ERROR]


# --- real clients ---------------------------------------------------------------------------
def test_kafka_python_plain_produce_and_consume(broker, caplog):
    topic = unique_topic("kp-sasl")
    producer = KafkaProducer(**_kp(sasl_port(broker)))
    producer.send(topic, b"v1").get(timeout=20)
    producer.close()
    consumer = KafkaConsumer(topic, **_kp(sasl_port(broker)), auto_offset_reset="earliest")
    batches = wait_until(lambda: consumer.poll(timeout_ms=500), what="a record")
    assert [m.value for records in batches.values() for m in records] == [b"v1"]
    consumer.close()
    assert not _errors(caplog)


def test_kafka_python_wrong_password_refused(broker):
    with pytest.raises(KPError):
        KafkaProducer(**_kp(sasl_port(broker), password="wrong"), max_block_ms=3000, bootstrap_timeout_ms=3000)


def test_aiokafka_plain_produce_and_consume(broker):
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer

    topic = unique_topic("aio-sasl")
    settings = dict(bootstrap_servers=f"127.0.0.1:{sasl_port(broker)}", security_protocol="SASL_PLAINTEXT",
                    sasl_mechanism="PLAIN", sasl_plain_username="admin", sasl_plain_password="admin-secret")

    async def run():
        producer = AIOKafkaProducer(**settings)
        await producer.start()
        try:
            await producer.send_and_wait(topic, b"a1")
        finally:
            await producer.stop()
        consumer = AIOKafkaConsumer(topic, auto_offset_reset="earliest", **settings)
        await consumer.start()
        try:
            return (await asyncio.wait_for(consumer.getone(), 20)).value
        finally:
            await consumer.stop()

    assert asyncio.run(run()) == b"a1"


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-512", "SCRAM-SHA-256"])
def test_confluent_scram_credentials_made_by_its_admin_then_used(broker, mechanism):
    user = f"bob-{mechanism[-3:]}"
    admin = CKAdmin({"bootstrap.servers": f"127.0.0.1:{plain_port(broker)}"})
    kind = ScramMechanism.SCRAM_SHA_512 if mechanism.endswith("512") else ScramMechanism.SCRAM_SHA_256
    futures = admin.alter_user_scram_credentials(
        [UserScramCredentialUpsertion(user, ScramCredentialInfo(kind, 4096), b"bob-pw")])
    futures[user].result(timeout=20)
    described = admin.describe_user_scram_credentials([user])[user].result(timeout=20)
    assert [(i.mechanism, i.iterations) for i in described.scram_credential_infos] == [(kind, 4096)]

    topic = unique_topic("ck-scram")
    conf = {"bootstrap.servers": f"127.0.0.1:{sasl_port(broker)}", "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": mechanism, "sasl.username": user, "sasl.password": "bob-pw"}
    producer = CKProducer(conf)
    producer.produce(topic, b"c1")
    assert producer.flush(20) == 0
    consumer = CKConsumer({**conf, "group.id": "g-" + topic, "enable.auto.commit": False})
    consumer.assign([TopicPartition(topic, 0, 0)])
    message = wait_until(lambda: consumer.poll(0.5), what="a record")
    assert message.error() is None and message.value() == b"c1"
    consumer.close()

    errors = []
    bad = CKProducer({**conf, "sasl.password": "not-bob-pw", "error_cb": errors.append})
    wait_until(lambda: bad.poll(0.2) is not None and errors, what="an error")
    assert any(e.code() == CKError._AUTHENTICATION for e in errors), errors


def test_kcat_scram_sha_512_produce_and_consume(broker):
    from odradek.client.admin_scram import UserScramCredentialUpsertion as Upsert
    from odradek.client.sync import AdminClient
    from tests.server.clients import kcat

    admin = AdminClient(f"127.0.0.1:{plain_port(broker)}")
    assert admin.alter_user_scram_credentials([Upsert("kc", "SCRAM-SHA-512", "kc-pw")]) == {"kc": None}
    admin.close()
    topic = unique_topic("kcat-scram")
    login = ("-X", "security.protocol=SASL_PLAINTEXT", "-X", "sasl.mechanism=SCRAM-SHA-512",
             "-X", "sasl.username=kc", "-X", "sasl.password=kc-pw")
    bootstrap = f"127.0.0.1:{sasl_port(broker)}"
    kcat(bootstrap, *login, "-P", "-t", topic, input=b"one\ntwo\n")
    assert kcat(bootstrap, *login, "-C", "-t", topic, "-o", "beginning", "-e", "-q").stdout.split() == [b"one", b"two"]
    refused = kcat(bootstrap, "-X", "security.protocol=SASL_PLAINTEXT", "-X", "sasl.mechanism=SCRAM-SHA-512",
                   "-X", "sasl.username=kc", "-X", "sasl.password=bad", "-L", "-m", "3", check=False)
    assert refused.returncode != 0 and b"Authentication failed" in refused.stderr


def test_plaintext_kafka_client_on_the_sasl_port_is_closed_without_a_traceback(broker, caplog):
    caplog.set_level(logging.INFO, logger="odradek.server")
    with pytest.raises(KPError):
        KafkaProducer(bootstrap_servers=f"127.0.0.1:{sasl_port(broker)}", max_block_ms=2000,
                      bootstrap_timeout_ms=2000)
    with WireClient(sasl_port(broker)) as wire:
        wire.send(ApiKey.METADATA, 1, topics=None)
        with pytest.raises(ConnectionError):
            wire.receive(ApiKey.METADATA, 1)
    assert not _errors(caplog)
    assert any("before authentication" in r.getMessage() for r in caplog.records)


# --- on the wire ----------------------------------------------------------------------------
def _authenticate(wire, version=2, user="alice", password="alice-secret"):
    handshake = wire.call(ApiKey.SASL_HANDSHAKE, 1, mechanism="PLAIN")
    assert handshake.error_code == ErrorCode.NONE and "SCRAM-SHA-512" in handshake.mechanisms
    token = b"\0" + user.encode() + b"\0" + password.encode()
    return wire.call(ApiKey.SASL_AUTHENTICATE, version, auth_bytes=token)


def test_bad_password_answers_sasl_authentication_failed_then_closes(broker):
    with WireClient(sasl_port(broker)) as wire:
        response = _authenticate(wire, password="wrong")
        assert response.error_code == ErrorCode.SASL_AUTHENTICATION_FAILED
        assert "Invalid username or password" in response.error_message
        with pytest.raises((ConnectionError, OSError)):
            wire.call(ApiKey.METADATA, 1, topics=None)


def test_unknown_mechanism_is_refused_with_the_enabled_ones(broker):
    with WireClient(sasl_port(broker)) as wire:
        response = wire.call(ApiKey.SASL_HANDSHAKE, 1, mechanism="GSSAPI")
        assert response.error_code == ErrorCode.UNSUPPORTED_SASL_MECHANISM
        assert response.mechanisms == ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"]


def test_authenticate_before_handshake_is_illegal_state_then_closed(broker):
    with WireClient(sasl_port(broker)) as wire:
        assert wire.call(ApiKey.API_VERSIONS, 3, client_software_name="t", client_software_version="1").api_keys
        response = wire.call(ApiKey.SASL_AUTHENTICATE, 2, auth_bytes=b"\0alice\0alice-secret")
        assert response.error_code == ErrorCode.ILLEGAL_SASL_STATE
        with pytest.raises((ConnectionError, OSError)):
            wire.call(ApiKey.METADATA, 1, topics=None)


def test_sasl_requests_on_a_plaintext_listener_are_illegal_state(broker):
    with WireClient(plain_port(broker)) as wire:
        assert wire.call(ApiKey.SASL_HANDSHAKE, 1, mechanism="PLAIN").error_code == ErrorCode.ILLEGAL_SASL_STATE


def test_v0_handshake_then_bare_scram_tokens(broker):
    """Before KIP-152 a client sent its tokens as bare size-prefixed frames."""
    from odradek.client.admin_scram import UserScramCredentialUpsertion as Upsert
    from odradek.client.sync import AdminClient

    admin = AdminClient(f"127.0.0.1:{plain_port(broker)}")
    assert admin.alter_user_scram_credentials([Upsert("raw", "SCRAM-SHA-512", "raw-pw")]) == {"raw": None}
    admin.close()
    client = ScramClient("SCRAM-SHA-512", "raw", "raw-pw")
    with WireClient(sasl_port(broker)) as wire:
        assert wire.call(ApiKey.SASL_HANDSHAKE, 0, mechanism="SCRAM-SHA-512").error_code == ErrorCode.NONE

        def exchange(token: bytes) -> bytes:
            wire.sock.sendall(struct.pack(">i", len(token)) + token)
            return wire._read(struct.unpack(">i", wire._read(4))[0])

        client.verify(exchange(client.final_message(exchange(client.first_message()))))
        assert wire.call(ApiKey.METADATA, 1, topics=None).brokers[0].node_id == 1


def test_session_lifetime_then_reauthentication_then_expiry(reauth_broker):
    with WireClient(sasl_port(reauth_broker)) as wire:
        assert _authenticate(wire, version=0).session_lifetime_ms == 0  # v0 has no such field
    with WireClient(sasl_port(reauth_broker)) as wire:
        response = _authenticate(wire)
        assert response.error_code == ErrorCode.NONE and response.session_lifetime_ms == REAUTH_MS
        assert wire.call(ApiKey.METADATA, 1, topics=None).brokers
        # Re-authenticating as someone else is refused.
        assert _authenticate(wire, user="admin", password="admin-secret").error_code == \
            ErrorCode.SASL_AUTHENTICATION_FAILED
    with WireClient(sasl_port(reauth_broker)) as wire:
        _authenticate(wire)
        started = time.monotonic()
        assert _authenticate(wire).session_lifetime_ms == REAUTH_MS  # renewed, same principal
        # Past the lifetime without re-authenticating, the broker closes the connection.
        time.sleep(max(0.0, started + 2 * REAUTH_MS / 1000 - time.monotonic()))
        with pytest.raises((ConnectionError, OSError)):
            wire.call(ApiKey.METADATA, 1, topics=None)


# --- SASL_SSL -------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def sasl_ssl(tmp_path_factory):
    pki = make_pki(tmp_path_factory.mktemp("pki"))
    with sasl_broker(tmp_path_factory.mktemp("sasl-ssl") / "data", **{
            "listeners": "PLAINTEXT://127.0.0.1:0,SASL_SSL://127.0.0.1:0",
            "listener.name.sasl_ssl.plain.sasl.jaas.config": PLAIN_JAAS,
            "ssl.keystore.type": "PEM", "ssl.keystore.location": pki["server"]}) as b:
        yield b, pki


def test_sasl_ssl_scram_with_confluent_kafka_and_odradeks_client(sasl_ssl):
    from odradek.client.admin_scram import UserScramCredentialUpsertion as Upsert
    from odradek.client.sync import AdminClient, Producer

    broker, pki = sasl_ssl
    admin = AdminClient(f"127.0.0.1:{plain_port(broker)}")
    assert admin.alter_user_scram_credentials([Upsert("tls-user", "SCRAM-SHA-512", "tls-pw")]) == {"tls-user": None}
    admin.close()
    bootstrap = f"127.0.0.1:{broker.broker.bound['SASL_SSL'][1]}"
    topic = unique_topic("sasl-ssl")
    producer = CKProducer({"bootstrap.servers": bootstrap, "security.protocol": "SASL_SSL", "ssl.ca.location": pki["ca"],
                           "sasl.mechanism": "SCRAM-SHA-512", "sasl.username": "tls-user", "sasl.password": "tls-pw"})
    producer.produce(topic, b"over tls")
    assert producer.flush(20) == 0
    ours = Producer(bootstrap, security={"security.protocol": "SASL_SSL", "ssl.truststore.type": "PEM",
                                         "ssl.truststore.location": pki["ca"], "sasl.mechanism": "PLAIN",
                                         "sasl.username": "alice", "sasl.password": "alice-secret"})
    assert ours.send(topic, b"also over tls").result(20).offset == 1
    principals = broker.call(lambda: {str(c.principal) for c in broker.broker.connections
                                      if c.listener_name == "SASL_SSL"})
    ours.close()
    assert {"User:tls-user", "User:alice"} <= principals


def test_confluent_kafka_reauthenticates_and_keeps_producing(reauth_broker):
    """librdkafka re-authenticates before connections.max.reauth.ms passes (KIP-368), so its
    connection outlives several session lifetimes."""
    producer = CKProducer({"bootstrap.servers": f"127.0.0.1:{sasl_port(reauth_broker)}",
                           "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN",
                           "sasl.username": "alice", "sasl.password": "alice-secret"})
    topic = unique_topic("reauth")

    def reauthenticated():
        producer.produce(topic, b"r")
        producer.poll(0.05)
        return reauth_broker.call(lambda: max([c.sasl.reauthentications for c in reauth_broker.broker.connections
                                               if c.sasl is not None] + [0])) >= 2
    wait_until(reauthenticated, what="two re-authentications")
    assert producer.flush(20) == 0


def test_inter_broker_login_settings():
    from odradek.client.sasl_authenticator import SaslClientConfig
    from odradek.server.config import BrokerConfig, ConfigError
    from odradek.server.sasl_authenticator import inter_broker_sasl

    base = {"listeners": "PLAINTEXT://127.0.0.1:0,INTERNAL://127.0.0.1:0",
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,INTERNAL:SASL_PLAINTEXT"}
    assert inter_broker_sasl(BrokerConfig.from_props(base)) is None  # the first listener, PLAINTEXT
    internal = {**base, "inter.broker.listener.name": "INTERNAL"}
    with pytest.raises(ConfigError, match="GSSAPI"):  # Kafka's default mechanism
        inter_broker_sasl(BrokerConfig.from_props(internal))
    plain = {**internal, "sasl.mechanism.inter.broker.protocol": "PLAIN"}
    with pytest.raises(ConfigError, match="listener.name.internal.plain.sasl.jaas.config"):
        inter_broker_sasl(BrokerConfig.from_props(plain))
    config = BrokerConfig.from_props({**plain, "listener.name.internal.plain.sasl.jaas.config": PLAIN_JAAS})
    assert inter_broker_sasl(config) == SaslClientConfig("PLAIN", "admin", "admin-secret")


@pytest.fixture(scope="module")
def acl_broker(tmp_path_factory):
    with sasl_broker(tmp_path_factory.mktemp("sasl-acl") / "data", **{
            "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
            "super.users": "User:admin;User:ANONYMOUS"}) as b:
        yield b


def test_scram_credential_apis_need_the_cluster_permissions(acl_broker):
    """Kafka: DescribeUserScramCredentials needs DESCRIBE, AlterUserScramCredentials ALTER, on
    the cluster; alice has neither, the super user admin both."""
    from odradek.client.admin_scram import UserScramCredentialUpsertion as Upsert
    from odradek.client.errors import BrokerError
    from odradek.client.sync import AdminClient

    def admin_as(user):
        return AdminClient(f"127.0.0.1:{sasl_port(acl_broker)}", security={
            "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN",
            "sasl.username": user, "sasl.password": f"{user}-secret"})

    alice = admin_as("alice")
    try:
        refused = alice.alter_user_scram_credentials([Upsert("mallory", "SCRAM-SHA-512", "pw")])
        assert refused["mallory"].code == ErrorCode.CLUSTER_AUTHORIZATION_FAILED
        with pytest.raises(BrokerError) as e:
            alice.describe_user_scram_credentials()
        assert e.value.code == ErrorCode.CLUSTER_AUTHORIZATION_FAILED
    finally:
        alice.close()
    admin = admin_as("admin")
    try:
        assert admin.alter_user_scram_credentials([Upsert("mallory", "SCRAM-SHA-512", "pw")]) == {"mallory": None}
        assert admin.describe_user_scram_credentials() == {"mallory": {"SCRAM-SHA-512": 4096}}
    finally:
        admin.close()


def test_random_frames_in_every_sasl_state_never_disturb_the_broker(broker, caplog):
    """Garbage before the handshake, after a v1 handshake (as SaslAuthenticate bodies and as
    frames) and after a v0 handshake (as bare tokens): the connection is answered or closed,
    the broker logs no error and still logs clients in."""
    import random

    rng = random.Random(21)
    for i in range(90):
        garbage = rng.randbytes(rng.randrange(0, 64))
        with WireClient(sasl_port(broker), timeout=5) as wire:
            state = i % 3
            if state:
                wire.call(ApiKey.SASL_HANDSHAKE, 2 - state, mechanism=rng.choice(["PLAIN", "SCRAM-SHA-256"]))
            if state == 1 and rng.random() < 0.5:
                wire.send(ApiKey.SASL_AUTHENTICATE, rng.choice([0, 1, 2]), auth_bytes=garbage)
            else:
                wire.sock.sendall(struct.pack(">i", len(garbage)) + garbage)
            try:
                wire.sock.recv(1024)
            except OSError:
                pass
    assert not _errors(caplog)
    with WireClient(sasl_port(broker)) as wire:
        assert _authenticate(wire).error_code == ErrorCode.NONE
        assert wire.call(ApiKey.METADATA, 1, topics=None).brokers
