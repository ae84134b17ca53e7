"""Who may use the console (console_auth.py): HTTP Basic with the user's password, a bearer
token, or anybody when neither is configured; secrets never shown in a repr."""

from __future__ import annotations

import base64

import pytest

from odradek.console.console_auth import ConsoleAuth


def basic(text: str) -> str:
    return "Basic " + base64.b64encode(text.encode()).decode()


AUTH = ConsoleAuth(user="ada", password="pässword:with-colon", token="t0ken")


@pytest.mark.parametrize("authorization", [
    basic("ada:pässword:with-colon"),
    "basic " + basic("ada:pässword:with-colon").split()[1],  # the scheme is case-insensitive
    "Bearer t0ken",
])
def test_the_right_credentials_are_admitted(authorization):
    assert AUTH.admits(authorization)


@pytest.mark.parametrize("authorization", [
    None, "", "Basic", "Bearer", "Bearer ", "Bearer t0ke", "Bearer t0kenX", "Bearer T0KEN",
    basic("ada:wrong"), basic("bob:pässword:with-colon"), basic("ada"), basic(":pässword:with-colon"),
    "Basic not-base64!", basic("ada:pässword:with-colon")[:-2], "Digest t0ken",
    "Basic " + base64.b64encode(b"ada:t0ken").decode(),  # the token is no password
])
def test_anything_else_is_refused(authorization):
    assert not AUTH.admits(authorization)


def test_each_scheme_only_when_configured():
    assert not ConsoleAuth(token="t0ken").admits(basic("ada:t0ken"))
    assert not ConsoleAuth(user="ada", password="pw").admits("Bearer pw")
    assert ConsoleAuth(user="ada", password="pw").challenges() == ['Basic realm="odradek console", charset="UTF-8"']
    assert ConsoleAuth(token="t").challenges() == ['Bearer realm="odradek console"']


def test_without_credentials_nobody_is_asked():
    assert not ConsoleAuth().required and ConsoleAuth().admits(None)


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"user": "ada"}, "go together"),
    ({"password": "pw"}, "go together"),
    ({"user": "ada", "password": ""}, "password is empty"),
    ({"token": ""}, "token is empty"),
    ({"user": "a:b", "password": "pw"}, "cannot hold ':'"),
])
def test_half_or_empty_credentials_are_refused(kwargs, message):
    with pytest.raises(ValueError, match=message):
        ConsoleAuth(**kwargs)


def test_the_secrets_stay_out_of_its_repr():
    assert "pässword" not in repr(AUTH) and "t0ken" not in repr(AUTH) and "'ada'" in repr(AUTH)
