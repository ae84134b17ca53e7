"""The JAAS login file of Kafka's documentation (``server/jaas_login_file.py``): named by
``-Djava.security.auth.login.config`` in ``KAFKA_OPTS``, its ``KafkaServer`` section (or the
listener's ``<listener>.KafkaServer``) gives a broker its PLAIN users and its inter-broker
SCRAM login when server.properties has no ``listener.name.*.sasl.jaas.config``."""

from __future__ import annotations

import pytest
from confluent_kafka import Producer

from odradek.server.config import BrokerConfig, ConfigError
from odradek.server.jaas_login_file import JaasFileError, login_file_path, sections, server_login
from odradek.server.sasl_authenticator import inter_broker_sasl
from odradek.testing.broker import InProcessBroker
from odradek.testing.broker import test_config as broker_props

JAAS_FILE = '''
// as in Kafka's documentation
KafkaServer {
    org.apache.kafka.common.security.plain.PlainLoginModule required
        username="admin"
        password="admin-secret"
        user_admin="admin-secret"
        user_alice="alice;//secret";
    org.apache.kafka.common.security.scram.ScramLoginModule required
        username="admin" password="admin-secret";
};
/* the internal listener logs in as another user */
internal.KafkaServer {
    org.apache.kafka.common.security.scram.ScramLoginModule required username="broker" password="b";
};
Client {
    org.apache.zookeeper.server.auth.DigestLoginModule required username="zk" password="zk-secret";
};
'''


@pytest.fixture
def login_file(tmp_path, monkeypatch):
    path = tmp_path / "kafka_server_jaas.conf"
    path.write_text(JAAS_FILE)
    monkeypatch.setenv("KAFKA_OPTS", f"-Xmx1G -Djava.security.auth.login.config={path} -Dother=x")
    return path


def test_kafka_opts_names_the_file():
    assert login_file_path({"KAFKA_OPTS": "-Djava.security.auth.login.config=/etc/kafka/jaas.conf"}) == \
        "/etc/kafka/jaas.conf"
    assert login_file_path({"KAFKA_OPTS": "-Xmx1G"}) is None
    assert login_file_path({}) is None


def test_sections_and_the_module_of_each_mechanism(login_file):
    assert set(sections(JAAS_FILE)) == {"KafkaServer", "internal.KafkaServer", "Client"}
    plain = server_login("SASL_PLAINTEXT", "PLAIN")
    assert plain.startswith("org.apache.kafka.common.security.plain.PlainLoginModule required")
    assert 'user_alice="alice;//secret";' in plain and "ScramLoginModule" not in plain
    assert 'username="broker"' in server_login("INTERNAL", "SCRAM-SHA-512")
    assert 'username="admin"' in server_login("EXTERNAL", "SCRAM-SHA-256")
    with pytest.raises(JaasFileError, match="no section"):
        sections("KafkaServer = broken")


def test_the_inter_broker_login_comes_from_the_file(login_file, tmp_path, monkeypatch):
    props = {**broker_props(tmp_path), "listeners": "PLAINTEXT://127.0.0.1:0,INTERNAL://127.0.0.1:0",
             "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,INTERNAL:SASL_PLAINTEXT",
             "inter.broker.listener.name": "INTERNAL", "sasl.mechanism.inter.broker.protocol": "SCRAM-SHA-512"}
    login = inter_broker_sasl(BrokerConfig.from_props(props))
    assert (login.mechanism, login.username, login.password) == ("SCRAM-SHA-512", "broker", "b")
    monkeypatch.setenv("KAFKA_OPTS", f"-Djava.security.auth.login.config={tmp_path / 'missing.conf'}")
    with pytest.raises(ConfigError, match="missing.conf"):
        inter_broker_sasl(BrokerConfig.from_props(props))


def test_plain_users_of_the_file_log_in(login_file, tmp_path):
    props = {**broker_props(tmp_path / "data"), "listeners": "SASL_PLAINTEXT://127.0.0.1:0",
             "sasl.enabled.mechanisms": "PLAIN", "sasl.mechanism.inter.broker.protocol": "PLAIN"}
    with InProcessBroker(None, props) as broker:
        def login(password: str) -> str:
            """"delivered", or the name of the first error the producer reports."""
            outcome = []
            producer = Producer({"bootstrap.servers": broker.bootstrap, "security.protocol": "SASL_PLAINTEXT",
                                 "sasl.mechanism": "PLAIN", "sasl.username": "alice", "sasl.password": password,
                                 "error_cb": lambda e: outcome.append(e.name())})
            producer.produce("jaas-file", b"x", on_delivery=lambda err, msg: outcome.append(err or "delivered"))
            for _ in range(100):
                producer.poll(0.1)
                if outcome:
                    break
            producer.purge()
            return outcome[0] if outcome else "nothing"

        assert login("alice;//secret") == "delivered"
        assert login("wrong") == "_AUTHENTICATION"
