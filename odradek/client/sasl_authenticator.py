"""SASL for odradek's client: Kafka's ``SaslClientAuthenticator`` for PLAIN and SCRAM.

Settings (Kafka's client names: a client's ``security`` properties, ``client/client_security.py``,
what a ``--command-config`` file holds)::

    security.protocol=SASL_PLAINTEXT          (or SASL_SSL; PLAINTEXT and SSL use no SASL)
    sasl.mechanism=SCRAM-SHA-512              (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512; Kafka's default GSSAPI is refused)
    sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required username="alice" password="pw";
    # or librdkafka's pair:
    sasl.username=alice
    sasl.password=pw

``sasl_config(protocol, props)`` turns them into a ``SaslClientConfig`` (None without SASL) or raises
``ValueError`` naming what is wrong. ``authenticate(conn, config, timeout)`` runs on a fresh
connection after ApiVersions: SaslHandshake v1 (the mechanism), then the mechanism's tokens in
SaslAuthenticate requests (KIP-152). A refusal raises ``BrokerError`` with the broker's code
(UNSUPPORTED_SASL_MECHANISM, SASL_AUTHENTICATION_FAILED, ILLEGAL_SASL_STATE): not retriable,
a wrong password does not get better by trying again.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from odradek.client.errors import BrokerError
from odradek.protocol.generated import ApiKey
from odradek.protocol.generated.error_codes import ErrorCode
from odradek.protocol.generated.sasl_authenticate_request import SaslAuthenticateRequest
from odradek.protocol.generated.sasl_handshake_request import SaslHandshakeRequest
from odradek.protocol.jaas_config import JaasConfigError, client_credentials
from odradek.protocol.scram import MECHANISMS as SCRAM_MECHANISMS
from odradek.protocol.scram import ScramClient, ScramError

SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
MECHANISMS = ("PLAIN", *SCRAM_MECHANISMS)
SASL_KEYS = ("sasl.mechanism", "sasl.jaas.config", "sasl.username", "sasl.password")


@dataclass(frozen=True)
class SaslClientConfig:
    mechanism: str
    username: str
    password: str = field(repr=False)


def sasl_config(security_protocol: str, props: Mapping[str, str]) -> SaslClientConfig | None:
    """The SASL settings of a client from its ``sasl.*`` properties (``SASL_KEYS``), checked;
    None when ``security_protocol`` has no SASL. ValueError names what is wrong."""
    protocol = (security_protocol or "PLAINTEXT").strip().upper()
    if protocol not in SECURITY_PROTOCOLS:
        raise ValueError(f"security.protocol must be one of {', '.join(SECURITY_PROTOCOLS)}, not {security_protocol!r}")
    unknown = sorted(k for k in props if k not in SASL_KEYS)
    if unknown:
        raise ValueError(f"unknown SASL property {unknown[0]!r} (known: {', '.join(SASL_KEYS)})")
    if not protocol.startswith("SASL_"):
        return None
    mechanism = props.get("sasl.mechanism", "GSSAPI").strip().upper()
    if mechanism not in MECHANISMS:
        raise ValueError(f"sasl.mechanism={mechanism} is not supported by odradek's client "
                         f"(supported: {', '.join(MECHANISMS)})")
    if props.get("sasl.jaas.config"):
        try:
            username, password = client_credentials(props["sasl.jaas.config"])
        except JaasConfigError as e:
            raise ValueError(str(e)) from None
    elif props.get("sasl.username") is not None and props.get("sasl.password") is not None:
        username, password = props["sasl.username"], props["sasl.password"]
    else:
        raise ValueError(f"security.protocol={protocol} needs sasl.jaas.config, or sasl.username and sasl.password")
    return SaslClientConfig(mechanism, username, password)


async def authenticate(conn, config: SaslClientConfig, timeout: float) -> None:
    """Authenticate ``conn`` (ApiVersions done) as ``config`` says; BrokerError if refused."""
    if not conn.supports(ApiKey.SASL_AUTHENTICATE, 0) or not conn.supports(ApiKey.SASL_HANDSHAKE, 1):
        raise BrokerError(ErrorCode.ILLEGAL_SASL_STATE, "the broker does not offer SaslHandshake v1 and SaslAuthenticate")
    handshake = await conn.send(ApiKey.SASL_HANDSHAKE, SaslHandshakeRequest(mechanism=config.mechanism),
                                version=1, timeout=timeout)
    if handshake.error_code != ErrorCode.NONE:
        raise BrokerError(handshake.error_code, f"{config.mechanism} not enabled; the broker offers "
                                                f"{', '.join(handshake.mechanisms) or 'none'}")
    if config.mechanism == "PLAIN":
        await _exchange(conn, b"\0" + config.username.encode() + b"\0" + config.password.encode(), timeout)
        return
    scram = ScramClient(config.mechanism, config.username, config.password)
    server_first = await _exchange(conn, scram.first_message(), timeout)
    try:
        final = scram.final_message(server_first)
    except ScramError as e:
        raise BrokerError(ErrorCode.SASL_AUTHENTICATION_FAILED, str(e)) from None
    server_final = await _exchange(conn, final, timeout)
    try:
        scram.verify(server_final)
    except ScramError as e:
        raise BrokerError(ErrorCode.SASL_AUTHENTICATION_FAILED, str(e)) from None


async def _exchange(conn, token: bytes, timeout: float) -> bytes:
    response = await conn.send(ApiKey.SASL_AUTHENTICATE, SaslAuthenticateRequest(auth_bytes=token), timeout=timeout)
    if response.error_code != ErrorCode.NONE:
        raise BrokerError(response.error_code, response.error_message)
    return bytes(response.auth_bytes)

