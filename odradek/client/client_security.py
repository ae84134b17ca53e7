"""How odradek's clients secure their connections: ``security.protocol`` and ``ssl.*``.

The clients (``AsyncProducer``, ``AsyncConsumer``, ``AsyncAdminClient`` and their synchronous
wrappers) take one ``security`` mapping of Kafka-named properties, ``security.protocol``,
``ssl.*`` and ``sasl.*`` (what a ``client.properties`` file or a Spark source's
``kafka.security.protocol`` / ``kafka.ssl.*`` options hold)::

    AsyncConsumer("broker:9093", security={"security.protocol": "SSL",
                                           "ssl.truststore.type": "PEM",
                                           "ssl.truststore.location": "/etc/kafka/ca.pem"})

With SSL and SASL_SSL every connection is TLS, built by ``client/ssl_factory.py``: the
truststore verifies the broker (the system's CAs without one), the host name is checked unless
``ssl.endpoint.identification.algorithm`` is empty, the keystore (``ssl.keystore.location``, PEM
or PKCS12, or ``ssl.keystore.key`` + ``ssl.keystore.certificate.chain``) is presented for mutual TLS. An
key of the mapping that odradek does not know is a ValueError naming it, never silently
ignored; with PLAINTEXT or SASL_PLAINTEXT the ``ssl.*`` keys are not used, as in Kafka. The
``sasl.*`` keys are the SASL exchange's (``client/sasl_authenticator.py``).
"""

from __future__ import annotations

import ssl
from collections.abc import Mapping

from odradek.client.ssl_factory import SSL_KEYS, SslConfig

PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
# broker-side settings: a client has no use for them
_SERVER_ONLY = frozenset({"ssl.client.auth", "ssl.principal.mapping.rules"})
CLIENT_SSL_KEYS = tuple(k for k in SSL_KEYS if k not in _SERVER_ONLY)


def _as_dict(security) -> dict[str, str]:
    """A ``security`` mapping, or its items as pairs (a picklable, hashable form)."""
    return {str(k): str(v) for k, v in dict(security or {}).items()}


def security_protocol(security: Mapping[str, str] | None) -> str:
    """``security.protocol`` of a client's ``security`` mapping (PLAINTEXT when unset)."""
    protocol = _as_dict(security).get("security.protocol", "PLAINTEXT").strip().upper()
    if protocol not in PROTOCOLS:
        raise ValueError(f"security.protocol={protocol}: expected one of {', '.join(PROTOCOLS)}")
    return protocol


def client_ssl_context(security: Mapping[str, str] | None) -> ssl.SSLContext | None:
    """The TLS context of a client's connections; None unless ``security.protocol`` is SSL
    or SASL_SSL. ValueError for an unknown protocol or key, a bad value, a file that cannot
    be read."""
    protocol = security_protocol(security)
    props = _as_dict(security)
    unknown = sorted(k for k in props if not is_security_property(k)
                     or k.startswith("ssl.") and k not in CLIENT_SSL_KEYS)
    if unknown:
        raise ValueError(f"unknown security properties {', '.join(unknown)} (known: security.protocol, "
                         f"sasl.*, {', '.join(CLIENT_SSL_KEYS)})")
    if protocol not in ("SSL", "SASL_SSL"):
        return None
    return SslConfig.from_lookup(props.get).client_context()


def connection_settings(security: Mapping[str, str] | None) -> dict:
    """``ClusterClient``'s ``ssl_context`` and ``sasl`` (``client/sasl_authenticator.py``) from
    a client's ``security`` mapping; ValueError names a bad setting."""
    from odradek.client.sasl_authenticator import sasl_config

    sasl = {k: v for k, v in _as_dict(security).items() if k.startswith("sasl.")}
    return {"ssl_context": client_ssl_context(security), "sasl": sasl_config(security_protocol(security), sasl)}


def is_security_property(name: str) -> bool:
    """A property that belongs in a client's ``security`` mapping."""
    return name == "security.protocol" or name.startswith(("ssl.", "sasl."))
