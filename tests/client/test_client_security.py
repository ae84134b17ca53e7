"""odradek's own clients and CLI over TLS: ``security.protocol=SSL`` with a PEM truststore,
mutual TLS with a keystore, against an in-process broker with an SSL listener and a second one
that requires client certificates; bad settings refused with the key's name."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from odradek.client import AdminClient, Consumer, Producer
from odradek.client.client_security import client_ssl_context
from tests.server.security_fixtures import client_ssl, mtls_port, pki, tls_broker  # noqa: F401 - fixtures
from tests.server.tls_certs import pkcs12_keystore, pkcs12_truststore

REPO_ROOT = Path(__file__).resolve().parents[2]


def test_producer_consumer_admin_over_ssl(tls_broker, pki):
    with AdminClient(tls_broker.bootstrap, security=client_ssl(pki)) as admin:
        admin.create_topics(["client-ssl"])
    with Producer(tls_broker.bootstrap, security=client_ssl(pki)) as producer:
        for i in range(200):
            producer.send("client-ssl", b"v" * 1000, key=str(i).encode())
        producer.flush()
    with Consumer(tls_broker.bootstrap, security=client_ssl(pki), group_id="client-ssl",
                  auto_offset_reset="earliest") as consumer:
        consumer.subscribe(["client-ssl"])
        got = []
        for _ in range(100):
            for records in consumer.poll(1000).values():
                got.extend(records)
            if len(got) >= 200:
                break
    assert [r.key for r in got] == [str(i).encode() for i in range(200)]


def test_mutual_tls_with_the_keystore(tls_broker, pki):
    mtls = f"127.0.0.1:{mtls_port(tls_broker)}"
    with Producer(mtls, security=client_ssl(pki, **{"ssl.keystore.location": pki["client"]})) as producer:
        producer.send("client-mtls", b"hello").result(30)


def test_mutual_tls_with_pkcs12_stores(tls_broker, pki, tmp_path):
    """The client's keystore and truststore as keytool or ``openssl pkcs12 -export`` write them."""
    stores = {"keystore": pkcs12_keystore(pki, "client", tmp_path / "client.keystore.p12", "client-pw", chain=False),
              "truststore": pkcs12_truststore(pki, tmp_path / "client.truststore.p12", "client-pw")}
    settings = {"security.protocol": "SSL", "ssl.keystore.type": "PKCS12", "ssl.keystore.location": stores["keystore"],
                "ssl.keystore.password": "client-pw", "ssl.truststore.type": "PKCS12",
                "ssl.truststore.location": stores["truststore"], "ssl.truststore.password": "client-pw"}
    mtls = f"127.0.0.1:{mtls_port(tls_broker)}"
    with Producer(mtls, security=settings) as producer:
        producer.send("client-mtls-p12", b"hello").result(30)


def test_unknown_or_bad_settings_are_refused(pki):
    with pytest.raises(ValueError, match="ssl.trustore.location"):
        client_ssl_context({"security.protocol": "SSL", "ssl.trustore.location": pki["ca"]})
    with pytest.raises(ValueError, match="security.protocol"):
        client_ssl_context({"security.protocol": "TLS"})
    with pytest.raises(ValueError, match="PEM"):
        client_ssl_context(client_ssl(pki, **{"ssl.truststore.type": "JKS"}))
    assert client_ssl_context({"security.protocol": "PLAINTEXT"}) is None


def odradek(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "odradek.cli.main", *args], capture_output=True, text=True,
                          input=stdin, timeout=60, cwd=REPO_ROOT)


def test_cli_command_config_with_ssl(tls_broker, pki, tmp_path):
    config = tmp_path / "client.properties"
    config.write_text("security.protocol=SSL\nssl.truststore.type=PEM\n"
                      f"ssl.truststore.location={pki['ca']}\n")
    server = ["--bootstrap-server", tls_broker.bootstrap]
    created = odradek("topics", "--create", "--topic", "cli-ssl", *server, "--command-config", str(config))
    assert created.returncode == 0, created.stderr
    produced = odradek("produce", "--topic", "cli-ssl", *server, "--producer.config", str(config), stdin="a\nb\n")
    assert produced.returncode == 0, produced.stderr
    consumed = odradek("consume", "--topic", "cli-ssl", "--from-beginning", "--max-messages", "2", *server,
                       "--consumer.config", str(config))
    assert consumed.returncode == 0, consumed.stderr
    assert consumed.stdout.split() == ["a", "b"]
    config.write_text(f"security.protocol=SSL\nssl.truststore.location={pki['other_ca']}\n")
    refused = odradek("topics", "--list", *server, "--command-config", str(config))
    assert refused.returncode == 1 and "CERTIFICATE_VERIFY_FAILED" in refused.stderr


def test_security_mapping_carries_sasl_too():
    from odradek.client.client_security import connection_settings

    settings = connection_settings({"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN",
                                    "sasl.username": "alice", "sasl.password": "pw"})
    assert settings["ssl_context"] is None and settings["sasl"].username == "alice"
    with pytest.raises(ValueError, match="sasl.username"):
        connection_settings({"security.protocol": "SASL_SSL", "sasl.mechanism": "PLAIN"})
