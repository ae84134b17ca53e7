"""Dynamic password configs at rest (server/dynamic_broker_config.py's DynamicPasswords):
encoded with password.encoder.secret in ZooKeeper, refused without one, re-encoded when the
secret is rotated, decoded when the broker reads its configs back; unencoded in the embedded
store's owner-only files."""

from __future__ import annotations

import os
import socket
import ssl
import stat

import pytest
from kazoo.client import KazooClient

from odradek.metadata import layout
from odradek.protocol.generated.alter_configs_request import (
    AlterableConfig, AlterConfigsRequest, AlterConfigsResource,
)
from odradek.server.password_encoder import PasswordDecodeError, PasswordEncoder
from odradek.testing.broker import InProcessBroker
from tests.server.clients import wait_until
from tests.server.test_dynamic_broker_config import alter_raw, describe_raw
from tests.server.tls_certs import make_pki
from tests.server.wire import WireClient

KEY_PASSWORD = "listener.name.sasl_ssl.ssl.key.password"
CLEARTEXT = "k3ypass-in-clear"
SECRET_NOT_CONFIGURED = ("[Error 42] InvalidRequestError: Invalid config value for resource "
                         "ConfigResource(type=BROKER, name='1'): Password encoder secret not configured")


def alter_whole(broker, name: str, configs: dict) -> str:
    """AlterConfigs (not incremental: the whole set replaced) in raw frames."""
    wire = WireClient(broker.bootstrap)
    try:
        _, response = wire.request("AlterConfigs", 1, AlterConfigsRequest(resources=[AlterConfigsResource(
            resource_type=4, resource_name=name, configs=[AlterableConfig(k, v) for k, v in configs.items()])]))
    finally:
        wire.close()
    result = response.responses[0]
    return "OK" if result.error_code == 0 else f"[Error {result.error_code}]: {result.error_message}"


def znode(zookeeper, chroot, path: str) -> bytes:
    """The znode's bytes as any ZooKeeper client reads them."""
    zk = KazooClient(hosts=zookeeper.hosts + chroot)
    zk.start(timeout=10)
    try:
        return zk.get(path)[0]
    finally:
        zk.stop()
        zk.close()


def zk_broker(path, zookeeper, chroot, **overrides) -> InProcessBroker:
    return InProcessBroker(path, node_id=1, zookeeper_connect=zookeeper.hosts + chroot, **overrides)


@pytest.mark.parametrize("api", ["IncrementalAlterConfigs", "AlterConfigs"])
def test_a_password_is_stored_encoded_in_zookeeper_and_described_as_sensitive(zookeeper, chroot, tmp_path, api):
    with zk_broker(tmp_path, zookeeper, chroot, password_encoder_secret="secret-A") as b:
        alter = alter_raw if api == "IncrementalAlterConfigs" else alter_whole
        assert alter(b, "1", {KEY_PASSWORD: CLEARTEXT, "log.retention.ms": "123456"}) == "OK"
        data = znode(zookeeper, chroot, layout.broker_config_path(1))
        assert CLEARTEXT.encode() not in data
        stored = layout.decode_config(data)
        assert stored["log.retention.ms"] == "123456"
        assert PasswordEncoder("secret-A").decode(stored[KEY_PASSWORD]) == CLEARTEXT
        # The broker reads it back decoded; DescribeConfigs shows neither form.
        assert b.call(b.broker.dynamic_broker_config)[KEY_PASSWORD] == CLEARTEXT
        described = describe_raw(b, "1")
        assert described[KEY_PASSWORD] == (None, 2)  # DYNAMIC_BROKER_CONFIG
        assert described["password.encoder.secret"] == (None, 4)  # STATIC_BROKER_CONFIG, a password too
        # An unrelated change keeps the password, still encoded (not encoded twice).
        assert alter_raw(b, "1", {"log.retention.ms": "654321"}) == "OK"
        stored = layout.decode_config(znode(zookeeper, chroot, layout.broker_config_path(1)))
        assert PasswordEncoder("secret-A").decode(stored[KEY_PASSWORD]) == CLEARTEXT


@pytest.mark.parametrize("api", ["IncrementalAlterConfigs", "AlterConfigs"])
def test_a_password_is_refused_on_zookeeper_without_a_secret(zookeeper, chroot, tmp_path, api):
    with zk_broker(tmp_path, zookeeper, chroot) as b:
        alter = alter_raw if api == "IncrementalAlterConfigs" else alter_whole
        answer = alter(b, "1", {KEY_PASSWORD: CLEARTEXT})
        assert answer.startswith("[Error 42]") and answer.endswith("Password encoder secret not configured")
        if api == "IncrementalAlterConfigs":
            assert answer == SECRET_NOT_CONFIGURED
        assert alter(b, "1", {"log.retention.ms": "123456"}) == "OK"  # what holds no password is stored
        assert CLEARTEXT.encode() not in znode(zookeeper, chroot, layout.broker_config_path(1))


def encrypted_keystore(tmp_path, password: str) -> str:
    """A PEM keystore whose private key is encrypted with ``password`` (ssl.key.password)."""
    from cryptography.hazmat.primitives import serialization

    pki = make_pki(tmp_path / "pki")
    key = serialization.load_pem_private_key(open(pki["server_key"], "rb").read(), None)
    encrypted = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                  serialization.BestAvailableEncryption(password.encode()))
    path = tmp_path / "keystore.pem"
    path.write_bytes(encrypted + open(pki["server_cert"], "rb").read())
    return str(path)


def tls_handshake(port: int) -> str:
    """The TLS version a handshake with the listener on ``port`` agrees on (no verification:
    what matters is that the broker could open its key)."""
    context = ssl.create_default_context()
    context.check_hostname, context.verify_mode = False, ssl.CERT_NONE
    with socket.create_connection(("127.0.0.1", port), timeout=10) as raw:
        with context.wrap_socket(raw) as tls:
            return tls.version()


def ssl_port(b) -> int:
    return wait_until(lambda: b.broker.bound.get("SSL", (None, None))[1], what="the SSL listener bound")


def test_a_rotated_secret_re_encodes_and_the_listener_still_opens_its_key(zookeeper, chroot, tmp_path):
    """Secret A encodes the key password of an SSL listener added at run time; a restart with
    secret A opens the key again (decoded from the znode); a restart with secret B and old
    secret A re-encodes the znode with B, and the key still opens."""
    keystore = encrypted_keystore(tmp_path, CLEARTEXT)
    data_dir = tmp_path / "data"
    with zk_broker(data_dir, zookeeper, chroot, password_encoder_secret="secret-A") as b:
        assert alter_raw(b, "1", {"listeners": "PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0",
                                  "listener.name.ssl.ssl.keystore.location": keystore,
                                  "listener.name.ssl.ssl.key.password": CLEARTEXT}) == "OK"
        assert tls_handshake(ssl_port(b))
    with zk_broker(data_dir, zookeeper, chroot, password_encoder_secret="secret-A") as b:
        assert tls_handshake(ssl_port(b))  # the key password decoded at start
    with zk_broker(data_dir, zookeeper, chroot, password_encoder_secret="secret-B",
                   password_encoder_old_secret="secret-A") as b:
        assert tls_handshake(ssl_port(b))
    stored = layout.decode_config(znode(zookeeper, chroot, layout.broker_config_path(1)))
    assert PasswordEncoder("secret-B").decode(stored["listener.name.ssl.ssl.key.password"]) == CLEARTEXT
    with pytest.raises(PasswordDecodeError):
        PasswordEncoder("secret-A").decode(stored["listener.name.ssl.ssl.key.password"])
    with zk_broker(data_dir, zookeeper, chroot, password_encoder_secret="secret-B") as b:  # old secret gone
        assert tls_handshake(ssl_port(b))


def test_the_embedded_store_keeps_passwords_in_owner_only_files(tmp_path):
    """As Kafka in KRaft mode: no secret needed, the password unencoded in the metadata
    journal, which only the broker's user may read."""
    with InProcessBroker(tmp_path) as b:
        assert alter_raw(b, "1", {KEY_PASSWORD: CLEARTEXT}) == "OK"
        assert b.call(b.broker.dynamic_broker_config)[KEY_PASSWORD] == CLEARTEXT
        assert describe_raw(b, "1")[KEY_PASSWORD] == (None, 2)
        metadata_dir = tmp_path / "__metadata"
        files = [p for p in metadata_dir.iterdir() if p.name.startswith(("journal-", "snapshot"))]
        assert any(CLEARTEXT.encode() in p.read_bytes() for p in files)
        for path in files:
            assert stat.S_IMODE(os.stat(path).st_mode) == 0o600, path


def test_dynamic_passwords_without_a_broker():
    """The store-side rules alone: what is encoded, what a wrong secret reads, what rotates."""
    from odradek.server.config import BrokerConfig, ConfigError
    from odradek.server.dynamic_broker_config import DynamicConfigError, DynamicPasswords

    a, b = PasswordEncoder("secret-A"), PasswordEncoder("secret-B")
    plain = {KEY_PASSWORD: CLEARTEXT, "listener.name.x.scram-sha-256.sasl.jaas.config": "LoginModule required;", "num.io.threads": "9"}
    stored = DynamicPasswords(True, a).to_persistent(plain)
    assert stored["num.io.threads"] == "9" and CLEARTEXT not in str(stored) and "LoginModule" not in str(stored)
    assert DynamicPasswords(True, a).from_persistent(stored) == plain
    # A broker with another secret (or none) reads the other configs and leaves the passwords out.
    assert DynamicPasswords(True, b).from_persistent(stored) == {"num.io.threads": "9"}
    assert DynamicPasswords(True).from_persistent(stored) == {"num.io.threads": "9"}
    with pytest.raises(DynamicConfigError, match="Password encoder secret not configured"):
        DynamicPasswords(True).check(plain, 1)
    DynamicPasswords(True).check({"num.io.threads": "9"}, 1)
    DynamicPasswords(False).check(plain, 1)  # the embedded store: kept as they are
    assert DynamicPasswords(False).to_persistent(plain) == plain
    # Rotation: what the old secret encoded is encoded again with the new one, once.
    rotating = DynamicPasswords(True, b, old_encoder=a)
    rotated = rotating.re_encoded(stored)
    assert DynamicPasswords(True, b).from_persistent(rotated) == plain
    assert rotating.re_encoded(rotated) is None
    with pytest.raises(ConfigError, match="password.encoder"):
        DynamicPasswords.from_config(BrokerConfig.from_props({"password.encoder.secret": "s",
                                                              "password.encoder.cipher.algorithm": "DES"}))
