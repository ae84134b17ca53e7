"""A console with authentication (console_auth.py, app.py's second check): every route, the
static files included, answers 401 with ``WWW-Authenticate`` to a request without the user's
password or the token, and serves one with them; over TLS with a certificate
(``ssl_certfile``/``ssl_keyfile``). ``check_listener`` refuses a non-loopback console without
authentication (unless told ``insecure_no_auth``) or with credentials over plain HTTP."""

from __future__ import annotations

import json
import ssl

import pytest

from odradek.client import AdminClient
from odradek.console.app import ConsoleConfig
from odradek.console.console_auth import ConsoleAuth
from odradek.console.console_server import ConsoleServer, UnsafeListener, check_listener
from tests.console.http_probe import basic, every_route, host_of, port_of, send
from tests.server.tls_certs import make_pki

AUTH = ConsoleAuth(user="ada", password="correct horse", token="a-token-for-scripts")


@pytest.fixture(scope="module")
def pki(tmp_path_factory):
    return make_pki(tmp_path_factory.mktemp("console-pki"))


@pytest.fixture(scope="module")
def guarded(broker, pki):
    """The console with a password, a token and TLS, on 127.0.0.1."""
    config = ConsoleConfig(broker.bootstrap, auth=AUTH, ssl_certfile=pki["server_cert"], ssl_keyfile=pki["server_key"])
    with ConsoleServer(config) as server:
        yield server


@pytest.fixture(scope="module")
def trust(pki) -> ssl.SSLContext:
    return ssl.create_default_context(cafile=pki["ca"])


def get(console, trust, path: str, headers: dict, method: str = "GET"):
    return send(console.url, method, path, {"Host": host_of(console.url), **headers}, context=trust)


@pytest.mark.parametrize(("method", "path"), every_route(topic="orders-if-refusals-fail"))
@pytest.mark.parametrize("credentials", [{}, basic("ada", "wrong"), basic("eve", "correct horse"),
                                         {"Authorization": "Bearer a-token-for-scripT"},
                                         basic("ada", "a-token-for-scripts")])
def test_every_route_asks_who_you_are(guarded, trust, method, path, credentials):
    answer = get(guarded, trust, path, {**credentials, "Content-Type": "application/json"}, method)
    assert answer.status == 401, answer.body[:200]
    assert answer.headers.get_all("WWW-Authenticate") == ['Basic realm="odradek console", charset="UTF-8"',
                                                          'Bearer realm="odradek console"']
    assert b"orders" not in answer.body


@pytest.mark.parametrize(("method", "path"), [r for r in every_route() if r[0] in ("GET", "HEAD")])
@pytest.mark.parametrize("credentials", [basic("ada", "correct horse"), {"Authorization": "Bearer a-token-for-scripts"}])
def test_every_page_is_served_with_credentials(guarded, trust, method, path, credentials):
    assert get(guarded, trust, path, credentials, method).status == 200


def test_changes_with_credentials(guarded, trust, broker):
    headers = {**basic("ada", "correct horse"), "Content-Type": "application/json",
               "Origin": guarded.url.rstrip("/")}
    body = json.dumps({"name": "made-with-a-password", "partitions": 1}).encode()
    assert send(guarded.url, "POST", "/api/topics", {"Host": host_of(guarded.url), **headers}, body,
                context=trust).status == 200
    assert get(guarded, trust, "/api/topics/made-with-a-password", headers, "DELETE").status == 200
    with AdminClient(broker.bootstrap) as admin:
        assert "made-with-a-password" not in admin.list_topics()


def test_a_foreign_host_is_refused_before_credentials_are_asked(guarded, trust):
    port = port_of(guarded.url)
    answer = send(guarded.url, "GET", "/api/cluster", {"Host": f"evil.example:{port}", **basic("ada", "correct horse")},
                  context=trust)
    assert answer.status == 421 and "WWW-Authenticate" not in answer.headers


def test_served_over_tls_only(guarded):
    assert guarded.url.startswith("https://127.0.0.1:")
    with pytest.raises(ssl.SSLError):
        send(guarded.url, "GET", "/", {}, context=ssl.create_default_context())  # a CA it does not know


def config(**kwargs) -> ConsoleConfig:
    return ConsoleConfig("127.0.0.1:9092", **kwargs)


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"host": "0.0.0.0"}, "--host 0.0.0.0 is not loopback: everyone who reaches it would act with the console's "
                          "Kafka credentials"),
    ({"host": "::"}, "is not loopback"),
    ({"host": "192.168.1.10", "auth": AUTH}, "credentials would cross the network in plain text"),
    ({"host": "0.0.0.0", "auth": ConsoleAuth(token="t")}, "credentials would cross the network in plain text"),
    ({"ssl_certfile": "cert.pem"}, "--ssl-certfile and --ssl-keyfile go together"),
    ({"auth": AUTH, "insecure_no_auth": True}, "--insecure-no-auth contradicts"),
])
def test_unsafe_listeners_are_refused(kwargs, message):
    with pytest.raises(UnsafeListener, match=message):
        check_listener(config(**kwargs))


@pytest.mark.parametrize("kwargs", [
    {}, {"host": "localhost"}, {"host": "::1"}, {"auth": AUTH},
    {"host": "0.0.0.0", "insecure_no_auth": True},
    {"host": "0.0.0.0", "auth": AUTH, "ssl_certfile": "c.pem", "ssl_keyfile": "k.pem"},
])
def test_safe_listeners_start(kwargs):
    check_listener(config(**kwargs))


def test_a_console_server_refuses_an_unsafe_listener(broker):
    server = ConsoleServer(ConsoleConfig(broker.bootstrap, host="0.0.0.0"))
    try:
        with pytest.raises(UnsafeListener):
            server.start()
    finally:
        server.stop()  # should the check ever fail, no console left listening on every address
