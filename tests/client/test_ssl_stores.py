"""PKCS12 key stores and trust stores (``client/ssl_stores.py``): stores written by ``openssl
pkcs12 -export`` from the test PKI make a server and a client context that complete a mutual
TLS handshake; a wrong password, a truststore given as a keystore and a missing file are
refused with one message naming the setting; a store typed JKS that is PKCS12 inside (what
keytool writes since Java 9) is read, Java's own JKS format refused with the keytool command
that converts it. (A store written by keytool is served by the broker of
``tests/server/test_secured_server_properties.py``.)"""

from __future__ import annotations

import socket
import threading

import pytest

from odradek.client.ssl_factory import SslConfig
from tests.server.tls_certs import make_pki, pkcs12_keystore, pkcs12_truststore


@pytest.fixture(scope="module")
def stores(tmp_path_factory):
    """PKCS12 files: ``server.p12`` and ``client.p12`` (key and chain, password
    ``store-secret``), ``empty.p12`` (the client's, empty password), ``trust.p12`` (the CA)."""
    d = tmp_path_factory.mktemp("p12")
    pki = make_pki(d / "pki")

    return {
        "server": pkcs12_keystore(pki, "server", d / "server.p12", "store-secret"),
        "client": pkcs12_keystore(pki, "client", d / "client.p12", "store-secret", chain=False),
        "empty": pkcs12_keystore(pki, "client", d / "empty.p12", "", chain=False),
        "trust": pkcs12_truststore(pki, d / "trust.p12", "store-secret"),
    }


def config(**settings: str) -> SslConfig:
    return SslConfig.from_lookup({k.replace("_", "."): v for k, v in settings.items()}.get)


def _handshake(server_ctx, client_ctx) -> dict:
    """Both ends of a socket pair through the TLS handshake; the server's view of the
    client's certificate."""
    a, b = socket.socketpair()
    seen = {}

    def serve():
        with server_ctx.wrap_socket(a, server_side=True) as s:
            seen["cert"] = s.getpeercert()
            s.sendall(b"x")

    thread = threading.Thread(target=serve)
    thread.start()
    with client_ctx.wrap_socket(b, server_hostname="localhost") as c:
        assert c.recv(1) == b"x"
    thread.join(10)
    return seen["cert"]


def test_pkcs12_keystores_and_truststore_make_a_mutual_tls_handshake(stores):
    trust = {"ssl_truststore_type": "PKCS12", "ssl_truststore_location": stores["trust"],
             "ssl_truststore_password": "store-secret"}
    server = config(ssl_keystore_type="PKCS12", ssl_keystore_location=stores["server"],
                    ssl_keystore_password="store-secret", ssl_client_auth="required", **trust)
    client = config(ssl_keystore_type="PKCS12", ssl_keystore_location=stores["empty"], **trust)
    cert = _handshake(server.server_context(), client.client_context())
    assert ("commonName", "Alice") in [pair for rdn in cert["subject"] for pair in rdn]


def test_a_store_password_that_differs_from_the_key_password_falls_back_to_it(stores):
    # a store written by a tool other than keytool may have only the key password set right
    server = config(ssl_keystore_type="PKCS12", ssl_keystore_location=stores["server"],
                    ssl_keystore_password="wrong", ssl_key_password="store-secret")
    assert server.server_context() is not None


@pytest.mark.parametrize("settings, message", [
    ({"ssl_keystore_password": "wrong"}, "wrong ssl.keystore.password, or not a PKCS12 file"),
    ({"ssl_keystore_location": "TRUST", "ssl_keystore_password": "store-secret"}, "holds no private key"),
    ({"ssl_keystore_location": "/nonexistent/server.p12"}, "ssl.keystore: cannot load /nonexistent/server.p12"),
])
def test_a_keystore_that_cannot_be_read_is_one_clear_error(stores, settings, message):
    settings = {"ssl_keystore_type": "PKCS12", "ssl_keystore_location": stores["server"], **settings}
    if settings["ssl_keystore_location"] == "TRUST":
        settings["ssl_keystore_location"] = stores["trust"]
    with pytest.raises(ValueError) as caught:
        config(**settings).server_context()
    assert message in str(caught.value)


def test_a_truststore_with_a_wrong_password_is_refused(stores):
    with pytest.raises(ValueError, match="wrong ssl.truststore.password"):
        config(ssl_truststore_type="PKCS12", ssl_truststore_location=stores["trust"],
               ssl_truststore_password="wrong").client_context()


def test_a_jks_typed_store_that_keytool_wrote_as_pkcs12_is_read_as_java_reads_it(stores):
    """keytool writes PKCS12 since Java 9, whatever the file's name; Kafka's JKS type reads it."""
    for declared in ({"ssl_keystore_type": "JKS"}, {}):
        server = config(ssl_keystore_location=stores["server"], ssl_keystore_password="store-secret", **declared)
        assert server.server_context() is not None
    trust = config(ssl_truststore_location=stores["trust"], ssl_truststore_password="store-secret")
    assert trust.client_context() is not None


def test_a_java_jks_store_is_refused_with_the_command_that_converts_it(tmp_path):
    jks = tmp_path / "kafka.server.keystore.jks"
    jks.write_bytes(b"\xfe\xed\xfe\xed\x00\x00\x00\x02" + bytes(64))  # JKS's magic and version
    for declared in ({"ssl_keystore_type": "JKS"}, {}):
        with pytest.raises(ValueError) as caught:
            config(ssl_keystore_location=str(jks), **declared).server_context()
        assert f"keytool -importkeystore -srckeystore {jks} -srcstoretype JKS" in str(caught.value)
        assert "-deststoretype PKCS12" in str(caught.value)
    with pytest.raises(ValueError, match="ssl.truststore.type=PKCS12"):
        config(ssl_truststore_location=str(jks)).client_context()


def test_a_pem_file_typed_jks_and_an_unknown_type_are_refused(tmp_path):
    pki = make_pki(tmp_path / "pki")
    with pytest.raises(ValueError, match="needs ssl.keystore.type=PEM"):
        config(ssl_keystore_type="JKS", ssl_keystore_location=pki["server"]).server_context()
    with pytest.raises(ValueError, match="PEM and PKCS12"):
        config(ssl_keystore_type="BCFKS")


def test_inline_pem_needs_the_pem_type():
    with pytest.raises(ValueError, match="ssl.keystore.type=PEM"):
        config(ssl_keystore_type="PKCS12", ssl_keystore_key="k", ssl_keystore_certificate_chain="c")
