"""SASL PLAIN on the broker (``server/plain_sasl_server.py``): who logs in, and passwords
compared in constant time."""

from __future__ import annotations

import hmac
from types import SimpleNamespace

import pytest

from odradek.server import plain_sasl_server
from odradek.server.plain_sasl_server import PlainServer, SaslAuthenticationError

USERS = {"alice": "alice-secret"}


def test_the_right_password_logs_in_and_others_do_not():
    server = PlainServer(USERS)
    assert server.receive(b"\0alice\0alice-secret") == b"" and server.complete and server.username == "alice"
    for token in (b"\0alice\0alice-secreT", b"\0alice\0alice-secret\0", b"\0alice\0", b"\0nobody\0alice-secret",
                  b"bob\0alice\0alice-secret", b"\0alice\0alice"):
        server = PlainServer(USERS)
        with pytest.raises(SaslAuthenticationError):
            server.receive(token)
        assert not server.complete


def test_passwords_are_compared_with_hmac_compare_digest(monkeypatch):
    """Constant time: the comparison is ``hmac.compare_digest``'s, for known and unknown users
    alike (an ``==`` would stop at the first differing byte)."""
    compared = []

    def compare_digest(a, b):
        compared.append((a, b))
        return hmac.compare_digest(a, b)
    monkeypatch.setattr(plain_sasl_server, "hmac", SimpleNamespace(compare_digest=compare_digest))
    with pytest.raises(SaslAuthenticationError):
        PlainServer(USERS).receive(b"\0alice\0guess")
    with pytest.raises(SaslAuthenticationError):
        PlainServer(USERS).receive(b"\0nobody\0guess")
    assert PlainServer(USERS).receive(b"\0alice\0alice-secret") == b""
    assert compared == [(b"alice-secret", b"guess"), (b"", b"guess"), (b"alice-secret", b"alice-secret")]


def test_the_attempted_user_is_kept_for_the_failure_log_line():
    server = PlainServer(USERS)
    with pytest.raises(SaslAuthenticationError):
        server.receive(b"\0mallory\0pw")
    assert server.attempted == "mallory" and server.username is None
