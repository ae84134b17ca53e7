"""SASL on a broker connection: Kafka's ``SaslServerAuthenticator``, one per connection of a
SASL_PLAINTEXT or SASL_SSL listener.

States (KIP-43, KIP-152, KIP-368)::

    unauthenticated ──SaslHandshake v1──▶ authenticate ──SaslAuthenticate ...──▶ authenticated
          │   (ApiVersions is answered)     (tokens wrapped in SaslAuthenticate requests)
          └──────SaslHandshake v0──────▶ raw tokens ──frames of bare SASL tokens──▶ authenticated
    authenticated ──SaslHandshake──▶ re-authentication (same mechanism, same principal)

Before authentication only ApiVersions, SaslHandshake and SaslAuthenticate are served; any
other request closes the connection (a client speaking plain Kafka to a SASL port). After a
v0 handshake the client sends its tokens as bare size-prefixed frames, answered the same way.
A failed exchange answers SASL_AUTHENTICATION_FAILED (a bad mechanism
UNSUPPORTED_SASL_MECHANISM, a request out of turn ILLEGAL_SASL_STATE) and closes.

Mechanisms are ``listener.name.<listener>.sasl.enabled.mechanisms`` or else
``sasl.enabled.mechanisms``, of those odradek implements: PLAIN (users from
``listener.name.<listener>.plain.sasl.jaas.config``'s ``user_<name>="<password>"`` options, or
the JAAS login file's, ``server/jaas_login_file.py``)
and SCRAM-SHA-256/512 (credentials from ``/config/users/<name>``,
``server/scram_credentials.py``).

``connections.max.reauth.ms`` (> 0): SaslAuthenticate v1+ tells the client its session
lifetime; once it passes without a re-authentication the connection is closed (at once, and
any request but a re-authentication's is refused by closing).
"""

from __future__ import annotations

import functools
import logging
import time

from odradek.protocol.api_keys import ApiKey
from odradek.protocol.generated.error_codes import ErrorCode
from odradek.protocol.generated.sasl_authenticate_response import SaslAuthenticateResponse
from odradek.protocol.generated.sasl_handshake_response import SaslHandshakeResponse
from odradek.client.sasl_authenticator import SaslClientConfig
from odradek.protocol.jaas_config import JaasConfigError, client_credentials, plain_users
from odradek.server.jaas_login_file import JaasFileError, server_login
from odradek.protocol.scram import MECHANISMS as SCRAM_MECHANISMS
from odradek.protocol.scram import ScramError, ScramServer
from odradek.server import scram_credentials
from odradek.server.principal import KafkaPrincipal

log = logging.getLogger("odradek.server")

IMPLEMENTED = ("PLAIN", *SCRAM_MECHANISMS)
_BEFORE_AUTH = (ApiKey.API_VERSIONS, ApiKey.SASL_HANDSHAKE, ApiKey.SASL_AUTHENTICATE)


class SaslAuthenticationError(Exception):
    """The client did not prove who it is; the message is what the client is told."""


def listener_setting(config, listener_name: str, key: str):
    """A listener's ``listener.name.<listener>.<key>`` if set, else the broker's ``key``."""
    prefixed = config.props.get(f"listener.name.{listener_name.lower()}.{key}")
    if prefixed is not None:
        return prefixed
    try:
        return config[key]
    except KeyError:
        return config.props.get(key)


def enabled_mechanisms(config, listener_name: str) -> list[str]:
    value = listener_setting(config, listener_name, "sasl.enabled.mechanisms") or []
    names = value if isinstance(value, list) else [v.strip() for v in value.split(",")]
    return [n for n in names if n in IMPLEMENTED]


@functools.lru_cache(maxsize=16)
def _plain_users(jaas: str | None) -> dict[str, str]:
    if not jaas:
        return {}
    try:
        return plain_users(jaas)
    except JaasConfigError as e:
        log.error("%s; PLAIN logins on this listener will fail", e)
        return {}


class PlainServer:
    """SASL PLAIN (RFC 4616): one token ``authzid NUL authcid NUL password``."""

    def __init__(self, users: dict[str, str]) -> None:
        self._users = users
        self.username: str | None = None
        self.complete = False

    def receive(self, token: bytes) -> bytes:
        parts = token.split(b"\0")
        if len(parts) != 3:
            raise SaslAuthenticationError("Invalid SASL/PLAIN response: expected 3 tokens")
        try:
            authzid, user, password = (p.decode("utf-8") for p in parts)
        except UnicodeDecodeError:
            raise SaslAuthenticationError("Invalid SASL/PLAIN response: not UTF-8") from None
        if not user or not password:
            raise SaslAuthenticationError("Authentication failed: username or password not specified")
        expected = self._users.get(user)
        if expected is None or expected != password:
            raise SaslAuthenticationError("Authentication failed: Invalid username or password")
        if authzid and authzid != user:
            raise SaslAuthenticationError(
                "Authentication failed: Client requested an authorization id that is different from username")
        self.username, self.complete = user, True
        return b""


class SaslServerAuthenticator:
    """The SASL state of one connection; the connection asks ``intercept(frame)`` first."""

    def __init__(self, connection) -> None:
        self.connection = connection
        config = connection.broker.config
        self.listener_name = connection.listener_name
        self.enabled = enabled_mechanisms(config, self.listener_name)
        self.max_reauth_ms = int(listener_setting(config, self.listener_name, "connections.max.reauth.ms") or 0)
        self.mechanism_name: str | None = None
        self._mechanism = None  # PlainServer | ScramServer of the exchange in progress
        self.raw_tokens = False  # a v0 handshake: bare tokens follow
        self.authenticated = False
        self.reauthentications = 0  # completed re-authentications (KIP-368) of this connection
        self._expires_at: float | None = None  # time.monotonic() deadline of the session
        self._timer = None
        self._failed = False  # refused: closing once the answer is written, nothing more served

    # --- the gate -------------------------------------------------------------------------
    def intercept(self, frame) -> bool:
        """Handle ``frame`` here (a bare token, or a request that closes the connection) and
        say True; False lets the connection handle it as a request."""
        if self._failed:
            return True  # pipelined behind a refusal: dropped, the connection is closing
        if self.raw_tokens:
            self._raw_token(bytes(frame))
            return True
        api_key = int.from_bytes(frame[0:2], "big", signed=True) if len(frame) >= 2 else -1
        if self.authenticated:
            if self._expired() and api_key not in (ApiKey.SASL_HANDSHAKE, ApiKey.SASL_AUTHENTICATE):
                self._close("SASL session expired (connections.max.reauth.ms) without re-authentication",
                            logging.INFO)
                return True
            return False
        if api_key in _BEFORE_AUTH:
            return False
        name = ApiKey(api_key).name if api_key in ApiKey._value2member_map_ else f"api key {api_key}"
        self._close(f"unexpected {name} request on a SASL listener before authentication", logging.INFO)
        return True

    # --- SaslHandshake --------------------------------------------------------------------
    def handshake(self, version: int, mechanism: str) -> SaslHandshakeResponse:
        if self._mechanism is not None and not self._mechanism.complete or self.raw_tokens:
            return self._fail_handshake(ErrorCode.ILLEGAL_SASL_STATE, "SaslHandshake during an exchange")
        if self.authenticated and (version == 0 or mechanism != self.mechanism_name):
            return self._fail_handshake(ErrorCode.ILLEGAL_SASL_STATE,
                                        "re-authentication must use SaslHandshake v1 and the same mechanism")
        if mechanism not in self.enabled:
            return self._fail_handshake(ErrorCode.UNSUPPORTED_SASL_MECHANISM,
                                        f"unsupported SASL mechanism {mechanism}")
        self.mechanism_name = mechanism
        self._mechanism = self._new_mechanism(mechanism)
        self.raw_tokens = version == 0
        return SaslHandshakeResponse(error_code=ErrorCode.NONE, mechanisms=list(self.enabled))

    def _fail_handshake(self, code: ErrorCode, reason: str) -> SaslHandshakeResponse:
        self._close_after_response(reason)
        return SaslHandshakeResponse(error_code=code, mechanisms=list(self.enabled))

    def _new_mechanism(self, mechanism: str):
        if mechanism == "PLAIN":
            jaas = self.connection.broker.config.props.get(
                f"listener.name.{self.listener_name.lower()}.plain.sasl.jaas.config")
            if not jaas:  # Kafka's fallback: the JAAS login file named in KAFKA_OPTS
                try:
                    jaas = server_login(self.listener_name, "PLAIN")
                except JaasFileError as e:
                    log.error("%s; PLAIN logins on this listener will fail", e)
            return PlainServer(_plain_users(jaas))
        store = self.connection.broker.metadata.store
        return ScramServer(mechanism, lambda user: scram_credentials.lookup(store, mechanism, user))

    # --- SaslAuthenticate -----------------------------------------------------------------
    def authenticate(self, version: int, token: bytes) -> SaslAuthenticateResponse:
        if self._mechanism is None or self._mechanism.complete or self.raw_tokens:
            self._close_after_response("SaslAuthenticate out of turn")
            return SaslAuthenticateResponse(error_code=ErrorCode.ILLEGAL_SASL_STATE,
                                            error_message="Unexpected SaslAuthenticate request")
        try:
            challenge = self._step(token)
        except SaslAuthenticationError as e:
            self._close_after_response(f"SASL authentication failed: {e}", logging.INFO)
            return SaslAuthenticateResponse(error_code=ErrorCode.SASL_AUTHENTICATION_FAILED, error_message=str(e))
        lifetime = self.max_reauth_ms if self._mechanism.complete and version >= 1 else 0
        return SaslAuthenticateResponse(error_code=ErrorCode.NONE, error_message=None, auth_bytes=challenge,
                                        session_lifetime_ms=lifetime)

    def _raw_token(self, token: bytes) -> None:
        try:
            challenge = self._step(token)
        except SaslAuthenticationError as e:
            self._close(f"SASL authentication failed: {e}", logging.INFO)
            return
        if self._mechanism.complete:
            self.raw_tokens = False
        self.connection._queue(None, len(challenge).to_bytes(4, "big") + challenge)

    def _step(self, token: bytes) -> bytes:
        """Feed one token to the mechanism; on completion, the connection's principal."""
        mechanism = self._mechanism
        try:
            challenge = mechanism.receive(token)
        except ScramError:
            raise SaslAuthenticationError("Authentication failed during authentication due to invalid "
                                          f"credentials with SASL mechanism {self.mechanism_name}") from None
        if mechanism.complete:
            principal = KafkaPrincipal.user(mechanism.username)
            if self.authenticated and principal != self.connection.principal:
                raise SaslAuthenticationError(f"Cannot change principals during re-authentication from "
                                              f"{self.connection.principal}: {principal}")
            self.reauthentications += self.authenticated
            self.connection.principal = principal
            self.authenticated = True
            self._start_session()
        return challenge

    # --- session lifetime -----------------------------------------------------------------
    def _start_session(self) -> None:
        if self.max_reauth_ms <= 0:
            return
        if self._timer is not None:
            self._timer.cancel()
        self._expires_at = time.monotonic() + self.max_reauth_ms / 1000
        loop = self.connection._loop
        if loop is not None:
            self._timer = loop.call_later(self.max_reauth_ms / 1000, self._on_expiry)

    def _expired(self) -> bool:
        return self._expires_at is not None and time.monotonic() >= self._expires_at

    def _on_expiry(self) -> None:
        self._timer = None
        if self._expired() and not self.connection.closed:
            self._close("SASL session expired (connections.max.reauth.ms) without re-authentication",
                        logging.DEBUG)

    # --- closing --------------------------------------------------------------------------
    def _close(self, reason: str, level: int = logging.WARNING) -> None:
        self.connection.close(reason, level)

    def _close_after_response(self, reason: str, level: int = logging.WARNING) -> None:
        """Close once the response being made is written: the connection writes it in this
        loop iteration or the next (a deferred flush), and asyncio's close flushes what the
        transport holds; so close in the iteration after the next."""
        self._failed = True
        loop = self.connection._loop
        if loop is not None:
            loop.call_soon(loop.call_soon, self._close, reason, level)


def inter_broker_sasl(config) -> SaslClientConfig | None:
    """How this broker logs in to the others when the inter-broker listener is SASL_PLAINTEXT or
    SASL_SSL (Kafka's inter-broker client): ``sasl.mechanism.inter.broker.protocol`` with the
    ``username`` and ``password`` of that listener's
    ``listener.name.<listener>.<mechanism>.sasl.jaas.config``, else of the JAAS login file's
    ``KafkaServer`` section (``server/jaas_login_file.py``). None when the listener has no
    SASL; ConfigError when the settings cannot log in (the broker then does not start)."""
    from odradek.server.config import ConfigError
    from odradek.server.listener_security import inter_broker_listener, security_protocol

    name = inter_broker_listener(config)
    try:
        protocol = security_protocol(config, name)
    except ConfigError:
        return None  # a listener only other brokers have: PLAINTEXT, as in Kafka
    if not protocol.startswith("SASL_"):
        return None
    mechanism = config["sasl.mechanism.inter.broker.protocol"]
    if mechanism not in IMPLEMENTED:
        raise ConfigError(f"sasl.mechanism.inter.broker.protocol={mechanism}: the inter-broker listener {name} "
                          f"is {protocol}, and odradek speaks {', '.join(IMPLEMENTED)}")
    key = f"listener.name.{name.lower()}.{mechanism.lower()}.sasl.jaas.config"
    try:
        text = config.props.get(key) or server_login(name, mechanism)
        username, password = client_credentials(text or "")
    except JaasFileError as e:
        raise ConfigError(str(e)) from None
    except JaasConfigError as e:
        raise ConfigError(f"{key} (or the KafkaServer section of the JAAS login file): the inter-broker "
                          f"login needs username and password ({e})") from None
    return SaslClientConfig(mechanism, username, password)
