"""``odradek configs --entity-type users``: SCRAM credentials made and removed with the CLI,
then used (and refused) by confluent-kafka logging in with SCRAM."""

from __future__ import annotations

import pytest
from confluent_kafka import KafkaError as CKError
from confluent_kafka import Producer as CKProducer

from odradek.cli.common import CommandError
from odradek.cli.user_scram_configs import parse_credential
from tests.cli.conftest import run_cli
from tests.server.clients import wait_until
from tests.server.sasl_broker import plain_port, sasl_broker, sasl_port


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    with sasl_broker(tmp_path_factory.mktemp("users") / "data") as b:
        yield b


def test_parse_credential_as_kafkas_config_command():
    assert parse_credential("SCRAM-SHA-256", "iterations=8192,password=a,b=c") == (8192, "a,b=c")
    assert parse_credential("SCRAM-SHA-512", "password=x") == (4096, "x")
    for bad in ("iterations=10,password=x", "pass=x", "iterations=x,password=y"):
        with pytest.raises(CommandError):
            parse_credential("SCRAM-SHA-512", bad)


def _login_error(broker, user, password):
    """None when a SCRAM-SHA-512 producer logs in and sees the cluster; else its error code."""
    errors = []
    producer = CKProducer({"bootstrap.servers": f"127.0.0.1:{sasl_port(broker)}", "security.protocol": "SASL_PLAINTEXT",
                           "sasl.mechanism": "SCRAM-SHA-512", "sasl.username": user, "sasl.password": password,
                           "error_cb": errors.append})
    try:
        def settled():
            producer.poll(0.1)
            if errors:
                return ("error", errors[0].code())
            try:
                return ("ok", None) if producer.list_topics(timeout=0.5).brokers else None
            except Exception:  # noqa: BLE001 - not yet
                return None
        return wait_until(settled, what="a login or its refusal")[1]
    finally:
        producer.flush(0)


def test_alter_describe_delete_then_login(broker):
    bootstrap = f"127.0.0.1:{plain_port(broker)}"
    base = ("configs", "--bootstrap-server", bootstrap, "--entity-type", "users", "--entity-name", "alice")
    added = run_cli(*base, "--alter", "--add-config",
                    "SCRAM-SHA-256=[iterations=8192,password=alice-secret],SCRAM-SHA-512=[password=alice-secret]")
    assert added.code == 0 and added.lines() == ["Completed updating config for user alice."], added.err
    described = run_cli(*base, "--describe")
    assert described.lines() == ["SCRAM credential configs for user-principal 'alice' are "
                                 "SCRAM-SHA-256=iterations=8192, SCRAM-SHA-512=iterations=4096"]
    assert _login_error(broker, "alice", "alice-secret") is None
    assert _login_error(broker, "alice", "wrong") == CKError._AUTHENTICATION

    removed = run_cli(*base, "--alter", "--delete-config", "SCRAM-SHA-512")
    assert removed.code == 0
    assert run_cli(*base, "--describe").lines() == [
        "SCRAM credential configs for user-principal 'alice' are SCRAM-SHA-256=iterations=8192"]
    assert _login_error(broker, "alice", "alice-secret") == CKError._AUTHENTICATION


def test_bad_alterations_are_refused_with_kafkas_words(broker):
    base = ("configs", "--bootstrap-server", f"127.0.0.1:{plain_port(broker)}", "--entity-type", "users",
            "--entity-name", "bob", "--alter")
    refused = run_cli(*base, "--add-config", "bogus=1024")
    assert refused.code != 0 and "Unexpected config names: bogus" in refused.err
    refused = run_cli(*base, "--add-config", "producer_byte_rate=1024,SCRAM-SHA-512=[password=x]")
    assert refused.code != 0 and "Cannot alter both quota and SCRAM credential configs" in refused.err
    refused = run_cli(*base, "--add-config", "SCRAM-SHA-512=[iterations=100,password=x]")
    assert refused.code != 0 and "Iterations 100 is less than the minimum 4096" in refused.err
    refused = run_cli(*base, "--delete-config", "SCRAM-SHA-256")
    assert refused.code != 0 and "RESOURCE_NOT_FOUND" in refused.err


@pytest.mark.parametrize("login", ["scram-jaas", "plain-username"])
def test_command_config_speaks_sasl(broker, tmp_path, login):
    assert run_cli("configs", "--bootstrap-server", f"127.0.0.1:{plain_port(broker)}", "--entity-type", "users",
                   "--entity-name", "carol", "--alter", "--add-config", "SCRAM-SHA-512=[password=carol-pw]").code == 0
    if login == "scram-jaas":
        lines = ["security.protocol=SASL_PLAINTEXT", "sasl.mechanism=SCRAM-SHA-512",
                 'sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required '
                 'username="carol" password="carol-pw";']
    else:
        lines = ["security.protocol=SASL_PLAINTEXT", "sasl.mechanism=PLAIN", "sasl.username=alice",
                 "sasl.password=alice-secret"]
    config = tmp_path / "client.properties"
    config.write_text("\n".join(lines) + "\n")
    base = ("configs", "--bootstrap-server", f"127.0.0.1:{sasl_port(broker)}", "--command-config", str(config),
            "--entity-type", "users", "--entity-name", "carol", "--describe")
    described = run_cli(*base)
    assert described.code == 0, described.err
    assert described.lines() == ["SCRAM credential configs for user-principal 'carol' are SCRAM-SHA-512=iterations=4096"]
    config.write_text("\n".join(lines).replace("carol-pw", "wrong").replace("alice-secret", "wrong") + "\n")
    refused = run_cli(*base)
    assert refused.code != 0 and "SASL_AUTHENTICATION_FAILED" in refused.err


def test_zookeeper_alters_credentials_before_any_broker_runs(zookeeper, chroot):
    """``--zookeeper``, as Kafka's operators create the brokers' own credential."""
    from odradek.metadata.zookeeper_store import ZooKeeperStore
    from odradek.protocol.scram import credential_from_salted, salted_password
    from odradek.server import scram_credentials

    connect = zookeeper.hosts + chroot
    made = run_cli("configs", "--zookeeper", connect, "--alter", "--entity-type", "users", "--entity-name", "admin",
                   "--add-config", "SCRAM-SHA-512=[password=admin-secret],SCRAM-SHA-256=[iterations=8192,password=x]")
    assert made.code == 0, made.err
    assert made.lines()[-1] == "Completed updating config for entity: user-principal 'admin'."
    removed = run_cli("configs", "--zookeeper", connect, "--alter", "--entity-type", "users", "--entity-name", "admin",
                      "--delete-config", "SCRAM-SHA-256")
    assert removed.code == 0, removed.err
    store = ZooKeeperStore(zookeeper.hosts, chroot=chroot)
    try:
        assert set(scram_credentials.user_config(store, "admin")) == {"SCRAM-SHA-512"}
        stored = scram_credentials.lookup(store, "SCRAM-SHA-512", "admin")
    finally:
        store.close()
    salted = salted_password("SCRAM-SHA-512", b"admin-secret", stored.salt, stored.iterations)
    assert credential_from_salted("SCRAM-SHA-512", salted, stored.salt, stored.iterations) == stored

    again = run_cli("configs", "--zookeeper", connect, "--alter", "--entity-type", "users", "--entity-name", "admin",
                    "--delete-config", "SCRAM-SHA-256")
    assert again.code == 1 and "Invalid config(s): SCRAM-SHA-256" in again.err
    topics = run_cli("configs", "--zookeeper", connect, "--alter", "--entity-type", "topics", "--entity-name", "t",
                     "--add-config", "retention.ms=1")
    assert topics.code == 1 and "use --bootstrap-server" in topics.err
