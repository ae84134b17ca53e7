"""TLS listeners end to end: kafka-python, aiokafka, confluent-kafka and odradek's own client
produce and consume over SSL; a wrong CA and a plaintext client are refused without harm;
``ssl.client.auth=required`` on a second listener (``listener.name.mtls.ssl.*``) gives the
connection the principal that ``ssl.principal.mapping.rules`` makes of the certificate."""

from __future__ import annotations

import asyncio
import socket
import ssl
import struct

import pytest

from odradek.client.connection import BrokerConnection
from odradek.client.errors import KafkaConnectionError, SslAuthenticationError
from odradek.client.ssl_factory import SslConfig
from odradek.server.config import BrokerConfig, ConfigError
from odradek.server.listener_security import distinguished_name, listener_security
from odradek.server.principal import KafkaPrincipal
from tests.server.security_fixtures import client_ssl, mtls_port, pki, tls_broker  # noqa: F401 - fixtures
from tests.server.tls_certs import CLIENT_SUBJECT

VALUE = b"v" * 1000  # 300 of these: fetch responses well over sendfile's threshold


def test_kafka_python_over_ssl(tls_broker, pki):
    from kafka import KafkaConsumer, KafkaProducer

    producer = KafkaProducer(bootstrap_servers=tls_broker.bootstrap, security_protocol="SSL",
                             ssl_cafile=pki["ca"], acks="all")
    for i in range(300):
        producer.send("kp-ssl", VALUE, key=str(i).encode())
    producer.flush()
    producer.close()
    consumer = KafkaConsumer("kp-ssl", bootstrap_servers=tls_broker.bootstrap, security_protocol="SSL",
                             ssl_cafile=pki["ca"], auto_offset_reset="earliest", consumer_timeout_ms=10000)
    got = [m for _, m in zip(range(300), consumer)]
    consumer.close()
    assert [m.key for m in got] == [str(i).encode() for i in range(300)]
    assert all(m.value == VALUE for m in got)


def test_aiokafka_over_ssl(tls_broker, pki):
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
    from aiokafka.helpers import create_ssl_context

    async def run():
        context = create_ssl_context(cafile=pki["ca"])
        producer = AIOKafkaProducer(bootstrap_servers=tls_broker.bootstrap, security_protocol="SSL",
                                    ssl_context=context)
        await producer.start()
        try:
            for i in range(300):
                await producer.send("aio-ssl", VALUE, key=str(i).encode())
            await producer.flush()
        finally:
            await producer.stop()
        consumer = AIOKafkaConsumer("aio-ssl", bootstrap_servers=tls_broker.bootstrap, security_protocol="SSL",
                                    ssl_context=context, auto_offset_reset="earliest")
        await consumer.start()
        try:
            got = []
            while len(got) < 300:
                batch = await consumer.getmany(timeout_ms=10000)
                assert batch, "no records within 10 s"
                got.extend(m for records in batch.values() for m in records)
        finally:
            await consumer.stop()
        return got

    got = asyncio.run(run())
    assert [m.key for m in got] == [str(i).encode() for i in range(300)]


def test_confluent_kafka_mutual_tls(tls_broker, pki):
    """librdkafka with a client certificate on the listener that requires one."""
    from confluent_kafka import Consumer, Producer

    common = {"bootstrap.servers": f"127.0.0.1:{mtls_port(tls_broker)}", "security.protocol": "SSL",
              "ssl.ca.location": pki["ca"], "ssl.certificate.location": pki["client_cert"],
              "ssl.key.location": pki["client_key"]}
    producer = Producer(common)
    for i in range(300):
        producer.produce("ck-ssl", VALUE, key=str(i).encode())
    assert producer.flush(30) == 0
    consumer = Consumer({**common, "group.id": "ck-ssl", "auto.offset.reset": "earliest"})
    consumer.subscribe(["ck-ssl"])
    got = []
    try:
        while len(got) < 300:
            msg = consumer.poll(10)
            assert msg is not None, "no record within 10 s"
            assert msg.error() is None, msg.error()
            got.append(msg)
    finally:
        consumer.close()
    assert [m.key() for m in got] == [str(i).encode() for i in range(300)]
    principals = tls_broker.call(lambda: {str(c.principal) for c in tls_broker.broker.connections
                                          if c.listener_name == "MTLS"})
    assert "User:alice" in principals  # RULE:^CN=([^,]+),OU=Eng,.*$/$1/L


async def _connect(port, props) -> BrokerConnection:
    context = SslConfig.from_lookup(props.get).client_context()
    return await BrokerConnection("127.0.0.1", port, ssl_context=context).connect(timeout=10)


def test_odradek_client_ssl_and_wrong_ca(tls_broker, pki):
    async def run():
        conn = await _connect(tls_broker.port, client_ssl(pki))
        assert conn.versions  # ApiVersions answered over TLS
        await conn.close()
        with pytest.raises(SslAuthenticationError, match="CERTIFICATE_VERIFY_FAILED"):
            await _connect(tls_broker.port, client_ssl(pki, **{"ssl.truststore.location": pki["other_ca"]}))

    asyncio.run(run())


def test_required_client_auth(tls_broker, pki):
    """No certificate, no connection; with one, the principal is the mapped subject."""
    async def run():
        with pytest.raises(KafkaConnectionError):  # SslAuthenticationError, or closed at the first read
            conn = await _connect(mtls_port(tls_broker), client_ssl(pki))
            await conn.send(18, None)  # TLS 1.3 may report the refusal only at the first read
        conn = await _connect(mtls_port(tls_broker), client_ssl(pki, **{"ssl.keystore.location": pki["client"]}))
        client_port = conn._transport.get_extra_info("sockname")[1]
        principal = tls_broker.call(lambda: next(c.principal for c in tls_broker.broker.connections
                                                 if c.peer.endswith(f":{client_port}")))
        await conn.close()
        return principal

    assert asyncio.run(run()) == KafkaPrincipal("User", "alice")


def test_requested_client_auth_without_certificate_is_anonymous(tls_broker, pki):
    """On the SSL listener (``ssl.client.auth=none``) every client is User:ANONYMOUS."""
    async def run():
        conn = await _connect(tls_broker.port, client_ssl(pki, **{"ssl.keystore.location": pki["client"]}))
        client_port = conn._transport.get_extra_info("sockname")[1]
        found = tls_broker.call(lambda: [(c.security_protocol, str(c.principal)) for c in tls_broker.broker.connections
                                         if c.peer.endswith(f":{client_port}")])
        await conn.close()
        return found

    assert asyncio.run(run()) == [("SSL", "User:ANONYMOUS")]


def test_plaintext_client_on_ssl_port_is_closed(tls_broker, pki):
    """An ApiVersions request in the clear: the handshake fails, the socket is closed, the
    broker serves the next (TLS) client as before."""
    request = struct.pack(">hhi", 18, 0, 1) + struct.pack(">h", 4) + b"test"
    with socket.create_connection(("127.0.0.1", tls_broker.port), timeout=10) as sock:
        sock.sendall(struct.pack(">i", len(request)) + request)
        received = b""
        while chunk := sock.recv(4096):
            received += chunk
    assert received == b"" or received[0] == 0x15, received[:16]  # nothing, or a TLS alert record
    test_odradek_client_ssl_and_wrong_ca(tls_broker, pki)


def test_distinguished_name_is_rfc2253():
    subject = ((("countryName", "US"),), (("organizationName", "Odradek Tests"),),
               (("organizationalUnitName", "Eng"),), (("commonName", "Alice"),))
    assert distinguished_name(subject) == CLIENT_SUBJECT
    assert distinguished_name(((("commonName", "Tkac, Adam"),),)) == "CN=Tkac\\, Adam"


def test_bad_tls_settings_are_config_errors(tmp_path, pki):
    base = {"listeners": "SSL://127.0.0.1:0", "log.dirs": str(tmp_path)}
    cases = [({}, "ssl.keystore.location"),
             ({"ssl.keystore.location": pki["server"], "ssl.keystore.type": "JKS"}, "PEM"),
             ({"ssl.keystore.location": pki["server"], "ssl.client.auth": "maybe"}, "ssl.client.auth"),
             ({"ssl.keystore.location": str(tmp_path / "missing.pem")}, "cannot load"),
             ({"ssl.keystore.location": pki["server"], "ssl.enabled.protocols": "TLSv9"}, "ssl.enabled.protocols"),
             ({"ssl.keystore.location": pki["server"], "ssl.principal.mapping.rules": "RULE:^CN=(.*)/$1"}, "invalid rule")]
    for extra, message in cases:
        with pytest.raises(ConfigError, match=message):
            listener_security(BrokerConfig.from_props({**base, **extra}), "SSL")


def test_inline_pem_keystore_and_truststore(pki):
    """``ssl.keystore.key`` + ``ssl.keystore.certificate.chain`` and ``ssl.truststore.certificates``,
    line breaks lost as in a one-line properties value."""
    def one_line(path):
        return " ".join(open(path).read().split("\n"))

    server = SslConfig.from_lookup({"ssl.keystore.key": one_line(pki["server_key"]),
                                    "ssl.keystore.certificate.chain": one_line(pki["server_cert"])}.get)
    client = SslConfig.from_lookup({"ssl.truststore.certificates": one_line(pki["ca"])}.get)
    server_ctx, client_ctx = server.server_context(), client.client_context()
    assert isinstance(server_ctx, ssl.SSLContext) and client_ctx.get_ca_certs()


def test_kcat_over_ssl(tls_broker, pki):
    """kcat (librdkafka) produces lines and reads them back over TLS."""
    import subprocess

    tls = ["-b", tls_broker.bootstrap, "-X", "security.protocol=ssl", "-X", f"ssl.ca.location={pki['ca']}"]
    produced = subprocess.run(["kcat", *tls, "-P", "-t", "kcat-ssl"], input="one\ntwo\nthree\n", text=True,
                              capture_output=True, timeout=60)
    assert produced.returncode == 0, produced.stderr
    consumed = subprocess.run(["kcat", *tls, "-C", "-t", "kcat-ssl", "-o", "beginning", "-e", "-q"], text=True,
                              capture_output=True, timeout=60)
    assert consumed.returncode == 0, consumed.stderr
    assert consumed.stdout.split() == ["one", "two", "three"]


def _handshake(server_ctx: ssl.SSLContext, client_ctx: ssl.SSLContext) -> tuple[str, str]:
    """A TLS handshake in memory; the (version, cipher) both sides agreed on."""
    c_in, c_out, s_in, s_out = ssl.MemoryBIO(), ssl.MemoryBIO(), ssl.MemoryBIO(), ssl.MemoryBIO()
    client = client_ctx.wrap_bio(c_in, c_out, server_hostname="localhost")
    server = server_ctx.wrap_bio(s_in, s_out, server_side=True)
    done = {"client": False, "server": False}
    for _ in range(10):
        for name, side, out, peer_in in (("client", client, c_out, s_in), ("server", server, s_out, c_in)):
            if not done[name]:
                try:
                    side.do_handshake()
                    done[name] = True
                except ssl.SSLWantReadError:
                    pass
            peer_in.write(out.read())
        if all(done.values()):
            return client.version(), client.cipher()[0]
    raise AssertionError("handshake did not finish")


def test_protocols_ciphers_and_an_encrypted_key(tmp_path, pki):
    """ssl.enabled.protocols=TLSv1.2 with one Java-named suite; a key encrypted with
    ssl.key.password."""
    from cryptography.hazmat.primitives import serialization

    key = serialization.load_pem_private_key(open(pki["server_key"], "rb").read(), None)
    encrypted = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                  serialization.BestAvailableEncryption(b"s3cret"))
    keystore = tmp_path / "encrypted.pem"
    keystore.write_bytes(encrypted + open(pki["server_cert"], "rb").read())
    server = SslConfig.from_lookup({"ssl.keystore.location": str(keystore), "ssl.key.password": "s3cret",
                                    "ssl.enabled.protocols": "TLSv1.2",
                                    "ssl.cipher.suites": "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256"}.get)
    client = SslConfig.from_lookup({"ssl.truststore.location": pki["ca"]}.get)
    assert _handshake(server.server_context(), client.client_context()) == \
        ("TLSv1.2", "ECDHE-ECDSA-AES128-GCM-SHA256")
    wrong = SslConfig.from_lookup({"ssl.keystore.location": str(keystore), "ssl.key.password": "nope"}.get)
    with pytest.raises(ValueError, match="ssl.keystore"):
        wrong.server_context()


def test_sasl_ssl_takes_ssl_client_auth_only_per_listener(tmp_path, pki):
    """As Kafka: the broker-wide ssl.client.auth is for SSL listeners; a SASL_SSL listener
    asks for certificates only when its own listener.name.<l>.ssl.client.auth says so."""
    base = {"listeners": "SSL://127.0.0.1:0,SASL_SSL://127.0.0.1:0", "log.dirs": str(tmp_path),
            "ssl.keystore.location": pki["server"], "ssl.truststore.location": pki["ca"],
            "ssl.client.auth": "required"}
    config = BrokerConfig.from_props(base)
    assert listener_security(config, "SSL").ssl_context.verify_mode == ssl.CERT_REQUIRED
    assert listener_security(config, "SASL_SSL").ssl_context.verify_mode == ssl.CERT_NONE
    config = BrokerConfig.from_props({**base, "listener.name.sasl_ssl.ssl.client.auth": "requested"})
    assert listener_security(config, "SASL_SSL").ssl_context.verify_mode == ssl.CERT_OPTIONAL
