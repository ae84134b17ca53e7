"""SASL PLAIN (RFC 4616) on the broker: Kafka's ``PlainSaslServer`` with the users of
``PlainServerCallbackHandler`` (``user_<name>="<password>"`` options of the listener's JAAS
``plain.sasl.jaas.config``, or of the JAAS login file, ``server/jaas_login_file.py``).

The client's one token is ``authzid NUL authcid NUL password``. Passwords are compared in
constant time (``hmac.compare_digest`` on their UTF-8 bytes, as Kafka's
``Utils.isEqualConstantTime``), and an unknown user is compared against an empty password
the same way, so the answer's timing tells neither how much of a password matched nor
whether the user exists.
"""

from __future__ import annotations

import functools
import hmac
import logging

from odradek.protocol.jaas_config import JaasConfigError, plain_users

log = logging.getLogger("odradek.server")


class SaslAuthenticationError(Exception):
    """The client did not prove who it is; the message is what the client is told."""


@functools.lru_cache(maxsize=16)
def users_of(jaas: str | None) -> dict[str, str]:
    """The ``user_<name>`` passwords of a JAAS setting (empty, with one error line, if it
    does not parse)."""
    if not jaas:
        return {}
    try:
        return plain_users(jaas)
    except JaasConfigError as e:
        log.error("%s; PLAIN logins on this listener will fail", e)
        return {}


class PlainServer:
    """One PLAIN exchange: ``receive(token)`` once, then ``complete`` and ``username``;
    ``attempted`` is the user name the token gave (for the failed-authentication log line)."""

    def __init__(self, users: dict[str, str]) -> None:
        self._users = users
        self.username: str | None = None
        self.attempted: str | None = None
        self.complete = False

    def receive(self, token: bytes) -> bytes:
        parts = token.split(b"\0")
        if len(parts) != 3:
            raise SaslAuthenticationError("Invalid SASL/PLAIN response: expected 3 tokens")
        try:
            authzid, user, password = (p.decode("utf-8") for p in parts)
        except UnicodeDecodeError:
            raise SaslAuthenticationError("Invalid SASL/PLAIN response: not UTF-8") from None
        self.attempted = user or None
        if not user or not password:
            raise SaslAuthenticationError("Authentication failed: username or password not specified")
        expected = self._users.get(user)
        matches = hmac.compare_digest((expected or "").encode(), password.encode())
        if expected is None or not matches:
            raise SaslAuthenticationError("Authentication failed: Invalid username or password")
        if authzid and authzid != user:
            raise SaslAuthenticationError(
                "Authentication failed: Client requested an authorization id that is different from username")
        self.username, self.complete = user, True
        return b""
