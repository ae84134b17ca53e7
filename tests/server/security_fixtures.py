"""Fixtures and helpers of the security tests: one TLS broker for the client and listener tests
(tests/client/test_client_security.py, tests/server/test_listener_security.py), and the
secured clusters of the inter-broker tests (tests/server/cluster/test_inter_broker_sasl.py,
test_inter_broker_tls.py, test_txn_verification_across_brokers.py). The certificates are
``tls_certs.py``'s.

Fixtures (a test module imports them by name):

- ``pki``: ``tls_certs.make_pki``'s files, made once per module.
- ``tls_broker``: an in-process broker, once per module, with ``tls_certs.ssl_listeners``: SSL
  (no client certificate; ``tls_broker.port``) and MTLS (a client certificate required;
  ``mtls_port(tls_broker)``), whose certificate subjects map to principals by
  ``MTLS_PRINCIPAL_RULES`` (``CN=Alice,OU=Eng,...`` is ``User:alice``).

``client_ssl(pki, **extra)``: a client's settings (Kafka's names) trusting ``pki``'s CA.

Secured clusters keep a PLAINTEXT listener for the tests' clients and add ``INTERNAL``, the
inter-broker listener (``inter.broker.listener.name``):

- ``scram_inter_broker(protocol)``: a cluster's properties for ``INTERNAL`` on ``protocol``
  (SASL_PLAINTEXT or SASL_SSL), the brokers logging in to each other with SCRAM-SHA-512 as
  ``admin`` (``ADMIN_JAAS``; their credential must be in ZooKeeper before they start).
- ``add_internal_listeners(cluster, broker_ids)``: adds the brokers (not started), each on
  PLAINTEXT at its node's port and on INTERNAL at a free port; returns the INTERNAL ports.
"""

from __future__ import annotations

from collections.abc import Iterable

import pytest

from odradek.testing import broker as testing_broker
from odradek.testing.broker import InProcessBroker
from tests.server.cluster.broker_node import free_port
from tests.server.tls_certs import make_pki, ssl_listeners

MTLS_PRINCIPAL_RULES = "RULE:^CN=([^,]+),OU=Eng,.*$/$1/L,DEFAULT"
ADMIN_PASSWORD = "admin-secret"
ADMIN_JAAS = ('org.apache.kafka.common.security.scram.ScramLoginModule required username="admin" '
              f'password="{ADMIN_PASSWORD}";')


@pytest.fixture(scope="module")
def pki(tmp_path_factory):
    return make_pki(tmp_path_factory.mktemp("pki"))


@pytest.fixture(scope="module")
def tls_broker(tmp_path_factory, pki):
    props = testing_broker.test_config(tmp_path_factory.mktemp("tls") / "data")
    props.update(ssl_listeners(pki, **{"listener.name.mtls.ssl.principal.mapping.rules": MTLS_PRINCIPAL_RULES}))
    with InProcessBroker(None, props) as b:
        yield b


def mtls_port(b) -> int:
    return b.broker.bound["MTLS"][1]


def client_ssl(pki: dict[str, str], **extra: str) -> dict[str, str]:
    return {"security.protocol": "SSL", "ssl.truststore.type": "PEM", "ssl.truststore.location": pki["ca"], **extra}


def scram_inter_broker(protocol: str) -> dict[str, str]:
    return {
        "listener.security.protocol.map": f"PLAINTEXT:PLAINTEXT,INTERNAL:{protocol}",
        "inter.broker.listener.name": "INTERNAL",
        "sasl.mechanism.inter.broker.protocol": "SCRAM-SHA-512",
        "listener.name.internal.sasl.enabled.mechanisms": "SCRAM-SHA-512",
        "listener.name.internal.scram-sha-512.sasl.jaas.config": ADMIN_JAAS,
    }


def add_internal_listeners(cluster, broker_ids: Iterable[int]) -> dict[int, int]:
    internal = {}
    for broker_id in broker_ids:
        node = cluster.add_broker(broker_id)
        internal[broker_id] = free_port()
        node.props["listeners"] = f"PLAINTEXT://127.0.0.1:{node.port},INTERNAL://127.0.0.1:{internal[broker_id]}"
    return internal
