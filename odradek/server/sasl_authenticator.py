"""SASL on a broker connection: Kafka's ``SaslServerAuthenticator``, one per connection of a
SASL_PLAINTEXT or SASL_SSL listener.

States (KIP-43, KIP-152, KIP-368)::

    unauthenticated ──SaslHandshake v1──▶ authenticate ──SaslAuthenticate ...──▶ authenticated
          │   (ApiVersions is answered)     (tokens wrapped in SaslAuthenticate requests)
          └──────SaslHandshake v0──────▶ raw tokens ──frames of bare SASL tokens──▶ authenticated
    authenticated ──SaslHandshake──▶ re-authentication ──SaslAuthenticate ...──▶ authenticated
                                     (same mechanism, same principal)

Before authentication only ApiVersions, SaslHandshake and SaslAuthenticate are served; any
other request closes the connection (a client speaking plain Kafka to a SASL port). During a
re-authentication (from its SaslHandshake to its last SaslAuthenticate) only SaslHandshake and
SaslAuthenticate are; any other request fails it and closes the connection at once, as
Kafka's authenticator, which alone reads the connection then. (Requests that came before the
SaslHandshake are still answered.) After a v0 handshake the client sends its tokens as bare
size-prefixed frames, answered the same way.

A failed exchange answers SASL_AUTHENTICATION_FAILED (a bad mechanism
UNSUPPORTED_SASL_MECHANISM, a request out of turn ILLEGAL_SASL_STATE), logs one INFO line and
closes, the answer held for ``connection.failed.authentication.delay.ms``
(``server/failed_authentication.py``); nothing else is served meanwhile.

Receive size: until the client has authenticated, and again during a re-authentication, a
size prefix above ``sasl.server.max.receive.size`` (default 524288: Kafka's
``BrokerSecurityConfigs``) fails the authentication and closes the connection, so a client
that has not logged in cannot make the broker buffer a ``socket.request.max.bytes`` request
(100 MiB by default). Prefixes read before a re-authentication's SaslHandshake was handled
(frames the same read brought in behind it) keep the larger limit: they come from a client
that had logged in.

Mechanisms are ``listener.name.<listener>.sasl.enabled.mechanisms`` or else
``sasl.enabled.mechanisms``, of those odradek implements: PLAIN (``server/plain_sasl_server.py``)
and SCRAM-SHA-256/512 (credentials from ``/config/users/<name>``,
``server/scram_credentials.py``).

``connections.max.reauth.ms`` (> 0): SaslAuthenticate v1+ tells the client its session
lifetime; once it passes without a re-authentication the connection is closed (at once, and
any request but a re-authentication's is refused by closing).

Memory: the authenticator holds its connection through a weak reference, and the connection
cancels its timers when it is lost (``release``), so a closed connection is freed as soon as
nothing else refers to it, with no wait for the cyclic garbage collector.
"""

from __future__ import annotations

import logging
import time
import weakref

from odradek.protocol.api_keys import ApiKey
from odradek.protocol.generated.error_codes import ErrorCode
from odradek.protocol.generated.sasl_authenticate_response import SaslAuthenticateResponse
from odradek.protocol.generated.sasl_handshake_response import SaslHandshakeResponse
from odradek.client.sasl_authenticator import SaslClientConfig
from odradek.protocol.jaas_config import JaasConfigError, client_credentials
from odradek.server.failed_authentication import delayed_response, log_failure
from odradek.server.jaas_login_file import JaasFileError, server_login
from odradek.server.plain_sasl_server import PlainServer, SaslAuthenticationError, users_of
from odradek.protocol.scram import MECHANISMS as SCRAM_MECHANISMS
from odradek.protocol.scram import ScramError, ScramServer
from odradek.server import scram_credentials
from odradek.server.principal import KafkaPrincipal

log = logging.getLogger("odradek.server")

IMPLEMENTED = ("PLAIN", *SCRAM_MECHANISMS)
_BEFORE_AUTH = (ApiKey.API_VERSIONS, ApiKey.SASL_HANDSHAKE, ApiKey.SASL_AUTHENTICATE)
_EXCHANGE = (ApiKey.SASL_HANDSHAKE, ApiKey.SASL_AUTHENTICATE)


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


def _api_name(api_key: int) -> str:
    return ApiKey(api_key).name if api_key in ApiKey._value2member_map_ else f"api key {api_key}"


class SaslServerAuthenticator:
    """The SASL state of one connection; the connection asks ``intercept(frame)`` first."""

    def __init__(self, connection) -> None:
        self._connection = weakref.ref(connection)
        config = connection.broker.config
        self.listener_name = connection.listener_name
        self.enabled = enabled_mechanisms(config, self.listener_name)
        self.max_reauth_ms = int(listener_setting(config, self.listener_name, "connections.max.reauth.ms") or 0)
        self.max_receive_size = int(listener_setting(config, self.listener_name, "sasl.server.max.receive.size"))
        self.failed_delay_ms = int(config["connection.failed.authentication.delay.ms"])
        self.mechanism_name: str | None = None
        self._mechanism = None  # PlainServer | ScramServer of the exchange in progress
        self.raw_tokens = False  # a v0 handshake: bare tokens follow
        self.authenticated = False
        self.reauthentications = 0  # completed re-authentications (KIP-368) of this connection
        self._expires_at: float | None = None  # time.monotonic() deadline of the session
        self._timer = None
        self._close_timer = None  # a failed v0 exchange's delayed close
        self._failed = False  # refused: closing once the answer is written, nothing more served
        self._limited = False  # the parser's limit is sasl.server.max.receive.size
        self._limit_receives(True)

    @property
    def connection(self):
        """The connection, or None once it is gone."""
        return self._connection()

    @property
    def reauthenticating(self) -> bool:
        """A re-authentication's SaslHandshake was accepted and its exchange is not complete."""
        return self.authenticated and self._mechanism is not None and not self._mechanism.complete

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
            if self.reauthenticating and api_key not in _EXCHANGE:
                self._failed = True
                reason = f"Unexpected Kafka request of type {_api_name(api_key)} during SASL re-authentication"
                self._log_failure(reason)
                self._close(reason, logging.DEBUG)
                return True
            if self._expired() and api_key not in _EXCHANGE:
                self._close("SASL session expired (connections.max.reauth.ms) without re-authentication",
                            logging.INFO)
                return True
            return False
        if api_key in _BEFORE_AUTH:
            return False
        self._close(f"unexpected {_api_name(api_key)} request on a SASL listener before authentication",
                    logging.INFO)
        return True

    def frame_too_large(self, error) -> bool:
        """A size prefix above the parser's limit: if the limit is ``sasl.server.max.receive.size``
        the authentication fails (logged, the connection closed at once; the parser reads no
        more) and True is returned; False leaves it to the connection."""
        if not self._limited:
            return False
        self._failed = True
        reason = f"Failing SASL authentication due to invalid receive size ({error}, sasl.server.max.receive.size)"
        self._log_failure(reason)
        self._close(reason, logging.DEBUG)
        return True

    def _limit_receives(self, limited: bool) -> None:
        """Size prefixes read from now on are bounded by ``sasl.server.max.receive.size``
        (``limited``; never above ``socket.request.max.bytes``) or by ``socket.request.max.bytes``."""
        connection = self.connection
        self._limited = limited
        most = connection.broker.config["socket.request.max.bytes"]
        connection.parser.max_size = min(self.max_receive_size, most) if limited else most

    # --- SaslHandshake --------------------------------------------------------------------
    def handshake(self, version: int, mechanism: str):
        if self._mechanism is not None and not self._mechanism.complete or self.raw_tokens:
            return self._fail_handshake(ErrorCode.ILLEGAL_SASL_STATE, "SaslHandshake during an exchange", mechanism)
        if self.authenticated and (version == 0 or mechanism != self.mechanism_name):
            return self._fail_handshake(ErrorCode.ILLEGAL_SASL_STATE,
                                        "re-authentication must use SaslHandshake v1 and the same mechanism",
                                        mechanism)
        if mechanism not in self.enabled:
            return self._fail_handshake(ErrorCode.UNSUPPORTED_SASL_MECHANISM,
                                        f"Unsupported SASL mechanism {mechanism}", mechanism)
        self.mechanism_name = mechanism
        self._mechanism = self._new_mechanism(mechanism)
        self.raw_tokens = version == 0
        if self.authenticated:
            self._limit_receives(True)
        return SaslHandshakeResponse(error_code=ErrorCode.NONE, mechanisms=list(self.enabled))

    def _fail_handshake(self, code: ErrorCode, reason: str, mechanism: str):
        return self._refuse(SaslHandshakeResponse(error_code=code, mechanisms=list(self.enabled)), reason, mechanism)

    def _new_mechanism(self, mechanism: str):
        broker = self.connection.broker
        if mechanism == "PLAIN":
            jaas = broker.config.props.get(f"listener.name.{self.listener_name.lower()}.plain.sasl.jaas.config")
            if not jaas:  # Kafka's fallback: the JAAS login file named in KAFKA_OPTS
                try:
                    jaas = server_login(self.listener_name, "PLAIN")
                except JaasFileError as e:
                    log.error("%s; PLAIN logins on this listener will fail", e)
            return PlainServer(users_of(jaas))
        store = broker.metadata.store
        return ScramServer(mechanism, lambda user: scram_credentials.lookup(store, mechanism, user))

    # --- SaslAuthenticate -----------------------------------------------------------------
    def authenticate(self, version: int, token: bytes):
        """The response, or (refused) a coroutine that answers after the failure delay."""
        if self._mechanism is None or self._mechanism.complete or self.raw_tokens:
            return self._refuse(SaslAuthenticateResponse(error_code=ErrorCode.ILLEGAL_SASL_STATE,
                                                         error_message="Unexpected SaslAuthenticate request"),
                                "SaslAuthenticate out of turn")
        try:
            challenge = self._step(token)
        except SaslAuthenticationError as e:
            return self._refuse(SaslAuthenticateResponse(error_code=ErrorCode.SASL_AUTHENTICATION_FAILED,
                                                         error_message=str(e)), str(e))
        lifetime = self.max_reauth_ms if self._mechanism.complete and version >= 1 else 0
        return SaslAuthenticateResponse(error_code=ErrorCode.NONE, error_message=None, auth_bytes=challenge,
                                        session_lifetime_ms=lifetime)

    def _raw_token(self, token: bytes) -> None:
        try:
            challenge = self._step(token)
        except SaslAuthenticationError as e:
            # No Kafka response carries a bare token's failure: the connection just closes,
            # after the same delay.
            self._failed = True
            self._log_failure(str(e))
            loop = self.connection._loop
            if loop is not None:
                self._close_timer = loop.call_later(self.failed_delay_ms / 1000, self._close,
                                                    f"SASL authentication failed: {e}", logging.DEBUG)
            return
        if self._mechanism.complete:
            self.raw_tokens = False
        self.connection._queue(None, len(challenge).to_bytes(4, "big") + challenge)

    def _step(self, token: bytes) -> bytes:
        """Feed one token to the mechanism; on completion, the connection's principal."""
        mechanism = self._mechanism
        connection = self.connection
        try:
            challenge = mechanism.receive(token)
        except ScramError:
            raise SaslAuthenticationError("Authentication failed during authentication due to invalid "
                                          f"credentials with SASL mechanism {self.mechanism_name}") from None
        if mechanism.complete:
            principal = KafkaPrincipal.user(mechanism.username)
            if self.authenticated and principal != connection.principal:
                raise SaslAuthenticationError(f"Cannot change principals during re-authentication from "
                                              f"{connection.principal}: {principal}")
            self.reauthentications += self.authenticated
            connection.principal = principal
            self.authenticated = True
            self._limit_receives(False)
            self._start_session()
        return challenge

    # --- failures -------------------------------------------------------------------------
    def _refuse(self, response, reason: str, mechanism: str | None = None):
        """Fail the authentication: log it, serve nothing more, and answer ``response`` after
        ``connection.failed.authentication.delay.ms`` (a coroutine for the connection to await;
        it then writes the response and closes)."""
        self._failed = True
        self._log_failure(reason, mechanism)
        return delayed_response(response, f"SASL authentication failed: {reason}", self.failed_delay_ms)

    def _log_failure(self, reason: str, mechanism: str | None = None) -> None:
        connection = self.connection
        log_failure(connection.peer if connection is not None else "?", mechanism or self.mechanism_name,
                    getattr(self._mechanism, "attempted", None), reason, self.authenticated)

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
        connection = self.connection
        if self._expired() and connection is not None and not connection.closed:
            self._close("SASL session expired (connections.max.reauth.ms) without re-authentication",
                        logging.DEBUG)

    # --- closing --------------------------------------------------------------------------
    def _close(self, reason: str, level: int = logging.WARNING) -> None:
        connection = self.connection
        if connection is not None:
            connection.close(reason, level)

    def release(self) -> None:
        """The connection is lost: cancel the timers (they would keep this object alive)."""
        for timer in (self._timer, self._close_timer):
            if timer is not None:
                timer.cancel()
        self._timer = self._close_timer = None


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
