"""A broker with a SASL_PLAINTEXT listener next to its PLAINTEXT one (inter-broker traffic and
admin set-up go over PLAINTEXT), PLAIN users from the listener's JAAS setting as Kafka writes it,
and SCRAM-SHA-256/512 enabled."""

from __future__ import annotations

from odradek.testing.broker import InProcessBroker, test_config

PLAIN_JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" '
              'password="admin-secret" user_admin="admin-secret" user_alice="alice-secret";')
MECHANISMS = "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512"


def sasl_broker(data_dir, **extra) -> InProcessBroker:
    """Not started; ``extra`` are more broker properties (names with dots, as Kafka's)."""
    props = test_config(data_dir)
    props.update({
        "listeners": "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0",
        "inter.broker.listener.name": "PLAINTEXT",
        "sasl.enabled.mechanisms": MECHANISMS,
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": PLAIN_JAAS,
    })
    props.update(extra)
    return InProcessBroker(data_dir, props)


def sasl_port(broker: InProcessBroker) -> int:
    return broker.broker.bound["SASL_PLAINTEXT"][1]


def plain_port(broker: InProcessBroker) -> int:
    return broker.broker.bound["PLAINTEXT"][1]
