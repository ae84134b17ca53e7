"""Each listener's security protocol and TLS, from the broker's configuration.

``listener.security.protocol.map`` names each listener's protocol (``INTERNAL:SSL,EXTERNAL:
SASL_SSL``; Kafka's default maps PLAINTEXT, SSL, SASL_PLAINTEXT and SASL_SSL to themselves). A
listener on SSL or SASL_SSL gets a TLS server context from the ``ssl.*`` keys, each of which
``listener.name.<listener>.ssl.*`` (listener name in lower case, as Kafka writes it) overrides
for that listener alone. ``inter.broker.listener.name``, else the first listener whose protocol
is ``security.inter.broker.protocol``, else the first listener, is the one brokers reach each
other on; when it is secured, ``inter_broker_ssl_context`` is what their connections present
and verify (the same listener's keystore for mutual TLS, its truststore for the peer).

The principal of a TLS connection is made of the client certificate's subject, written as
RFC 2253 writes a distinguished name (``CN=alice,OU=Eng,O=Example,C=US``: most specific first,
the reverse of the certificate's order) and mapped by ``ssl.principal.mapping.rules``.
"""

from __future__ import annotations

import logging
import ssl
from dataclasses import dataclass

from odradek.client.ssl_factory import SslConfig
from odradek.server.config import ConfigError
from odradek.server.principal import ANONYMOUS, KafkaPrincipal
from odradek.server.ssl_principal_mapper import NoMatchingRule, SslPrincipalMapper

log = logging.getLogger("odradek.server")

PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
TLS_PROTOCOLS = ("SSL", "SASL_SSL")
# getpeercert()'s attribute names -> RFC 2253's (Java's X500Principal) keywords
_KEYWORDS = {"commonName": "CN", "organizationalUnitName": "OU", "organizationName": "O",
             "localityName": "L", "stateOrProvinceName": "ST", "countryName": "C",
             "streetAddress": "STREET", "domainComponent": "DC", "userId": "UID"}


@dataclass(frozen=True)
class ListenerSecurity:
    """What a connection accepted on a listener needs: its protocol and, for TLS, the server
    context and the principal mapper."""

    name: str
    security_protocol: str
    ssl_context: ssl.SSLContext | None = None
    principal_mapper: SslPrincipalMapper | None = None


def protocol_map(config) -> dict[str, str]:
    """``listener.security.protocol.map`` as a dict; ConfigError for a bad entry."""
    out = {}
    for entry in (config["listener.security.protocol.map"] or "").split(","):
        if not entry.strip():
            continue
        name, sep, protocol = entry.strip().partition(":")
        if not sep or protocol.strip().upper() not in PROTOCOLS:
            raise ConfigError(f"listener.security.protocol.map: bad entry {entry!r} "
                              f"(expected NAME:protocol, protocol one of {', '.join(PROTOCOLS)})")
        out[name.strip().upper()] = protocol.strip().upper()
    return out


def security_protocol(config, listener_name: str) -> str:
    protocol = protocol_map(config).get(listener_name.upper())
    if protocol is None:
        raise ConfigError(f"listener {listener_name}: no security protocol for it in listener.security.protocol.map")
    return protocol


def connection_protocol(config, listener_name: str) -> str:
    """The protocol of a connection accepted on ``listener_name``: its entry in
    ``listener.security.protocol.map`` (``NAME:PROTOCOL,...``), else the name itself
    (PLAINTEXT, SSL, ...), as in Kafka. Never raises: the broker checked the map when it bound
    the listener, and a test's plain dict of settings may have none."""
    try:
        mapping = config["listener.security.protocol.map"]
    except KeyError:
        mapping = None
    for entry in (mapping or "").split(","):
        name, _, protocol = entry.strip().partition(":")
        if name == listener_name and protocol:
            return protocol
    return listener_name


def ssl_config(config, listener_name: str, protocol: str = "SSL") -> SslConfig:
    """The ``ssl.*`` settings of a listener, its ``listener.name.<name>.ssl.*`` first. On a
    SASL_SSL listener ``ssl.client.auth`` counts only when set for that listener (Kafka's
    ``ChannelBuilders``: the broker-wide value is for SSL listeners)."""
    prefix = f"listener.name.{listener_name.lower()}."
    props = config.props

    def get(key: str):
        if key == "ssl.client.auth" and protocol == "SASL_SSL":
            return props.get(prefix + key)
        return props.get(prefix + key, props.get(key))

    try:
        return SslConfig.from_lookup(get)
    except ValueError as e:
        raise ConfigError(f"listener {listener_name}: {e}") from None


def listener_security(config, listener_name: str) -> ListenerSecurity:
    """ConfigError for a bad setting, a missing or unreadable keystore, a bad rule."""
    protocol = security_protocol(config, listener_name)
    if protocol not in TLS_PROTOCOLS:
        return ListenerSecurity(listener_name, protocol)
    settings = ssl_config(config, listener_name, protocol)
    try:
        return ListenerSecurity(listener_name, protocol, settings.server_context(),
                                SslPrincipalMapper(settings.principal_mapping_rules))
    except ValueError as e:
        raise ConfigError(f"listener {listener_name}: {e}") from None


def inter_broker_listener(config) -> str:
    """``inter.broker.listener.name``; else the first listener on
    ``security.inter.broker.protocol``; else the first listener."""
    name = config["inter.broker.listener.name"]
    if name:
        return name.upper()
    wanted = config["security.inter.broker.protocol"]
    listeners = config.listeners
    if wanted:
        for listener in listeners:
            if security_protocol(config, listener.name) == wanted.upper():
                return listener.name
        raise ConfigError(f"security.inter.broker.protocol={wanted}: no listener uses it")
    return listeners[0].name


def inter_broker_ssl_context(config) -> ssl.SSLContext | None:
    """The client context of this broker's connections to other brokers (replica fetchers,
    the controller's channel, transaction markers, requests to the controller); None when the
    inter-broker listener is not secured with TLS."""
    name = inter_broker_listener(config)
    try:
        protocol = security_protocol(config, name)
    except ConfigError:
        return None  # a listener only other brokers have: Kafka defaults it to PLAINTEXT
    if protocol not in TLS_PROTOCOLS:
        return None
    try:
        return ssl_config(config, name).client_context()
    except ValueError as e:
        raise ConfigError(f"inter-broker listener {name}: {e}") from None


def principal_of(transport, security: ListenerSecurity) -> KafkaPrincipal:
    """The principal of a connection: from the client certificate on a TLS listener (when
    one was sent), else User:ANONYMOUS. NoMatchingRule when no mapping rule applies."""
    if security.principal_mapper is None:
        return ANONYMOUS
    cert = transport.get_extra_info("peercert")
    if not cert or not cert.get("subject"):
        return ANONYMOUS
    return KafkaPrincipal.user(security.principal_mapper.name(distinguished_name(cert["subject"])))


def authenticate_tls(connection, transport) -> None:
    """Set ``connection.principal`` from its client certificate (Kafka's ``SslAuthenticator``),
    once the TLS handshake is done: a subject that no ``ssl.principal.mapping.rules`` rule maps
    fails authentication, and the connection is closed."""
    try:
        connection.principal = principal_of(transport, connection.security)
    except NoMatchingRule as e:
        connection.close(f"SSL authentication failed: {e}")
        return
    log.debug("TLS connection from %s on %s: %s, principal %s", connection.peer, connection.listener_name,
              transport.get_extra_info("cipher"), connection.principal)


def distinguished_name(subject) -> str:
    """``getpeercert()['subject']`` (RDNs in certificate order) as RFC 2253 writes it."""
    rdns = ["+".join(f"{_KEYWORDS.get(k, k)}={_escape(v)}" for k, v in rdn) for rdn in subject]
    return ",".join(reversed(rdns))


def _escape(value: str) -> str:
    out = "".join("\\" + c if c in ',+"\\<>;' else c for c in value)
    if out.startswith(("#", " ")):
        out = "\\" + out
    if out.endswith(" ") and not out.endswith("\\ "):
        out = out[:-1] + "\\ "
    return out
