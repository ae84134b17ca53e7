"""Who may use the console: HTTP Basic (a user name and password, RFC 7617) and/or a bearer
token (RFC 6750), or nobody asked at all (the default, for a console on loopback).

A browser asks for the user name and password itself when a page answers 401 with
``WWW-Authenticate: Basic``, then sends them with every request to the console, the pages'
own API calls included: the pages need no login form. A bearer token is for scripts
(``Authorization: Bearer <token>``); a browser cannot send one.

Secrets are compared with ``hmac.compare_digest`` over their UTF-8 bytes, the user name and
the password both, whichever is wrong, so the time taken does not say how much matched.
"""

from __future__ import annotations

import base64
import binascii
import hmac
from dataclasses import dataclass

REALM = "odradek console"


@dataclass(frozen=True)
class ConsoleAuth:
    """The credentials a console accepts; ``user`` and ``password`` go together. With none
    given, everyone is let in (``required`` is False)."""

    user: str | None = None
    password: str | None = None
    token: str | None = None

    def __post_init__(self) -> None:
        if (self.user is None) != (self.password is None):
            raise ValueError("a user name and a password go together")
        for what, value in (("user name", self.user), ("password", self.password), ("token", self.token)):
            if value is not None and not value:
                raise ValueError(f"the console's {what} is empty")
        if self.user is not None and ":" in self.user:
            raise ValueError("the console's user name cannot hold ':' (HTTP Basic joins name and password with it)")

    def __repr__(self) -> str:  # never the secrets, in a log or a traceback
        return f"ConsoleAuth(user={self.user!r}, password={'***' if self.password else None}, " \
               f"token={'***' if self.token else None})"

    @property
    def required(self) -> bool:
        return self.password is not None or self.token is not None

    def challenges(self) -> list[str]:
        """The ``WWW-Authenticate`` values of a 401: one per scheme offered."""
        offered = []
        if self.password is not None:
            offered.append(f'Basic realm="{REALM}", charset="UTF-8"')
        if self.token is not None:
            offered.append(f'Bearer realm="{REALM}"')
        return offered

    def admits(self, authorization: str | None) -> bool:
        """Whether an ``Authorization`` header value carries credentials this console takes."""
        if not self.required:
            return True
        scheme, _, credentials = (authorization or "").strip().partition(" ")
        scheme, credentials = scheme.lower(), credentials.strip()
        if scheme == "basic" and self.password is not None:
            return self._basic(credentials)
        if scheme == "bearer" and self.token is not None:
            return hmac.compare_digest(credentials.encode("utf-8", "replace"), self.token.encode())
        return False

    def _basic(self, credentials: str) -> bool:
        try:
            decoded = base64.b64decode(credentials.encode("ascii"), validate=True)
        except (binascii.Error, UnicodeEncodeError):
            return False
        user, sep, password = decoded.partition(b":")
        if not sep:
            return False
        user_ok = hmac.compare_digest(user, self.user.encode())
        password_ok = hmac.compare_digest(password, self.password.encode())
        return user_ok & password_ok
