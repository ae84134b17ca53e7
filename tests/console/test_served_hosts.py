"""The console answers only requests naming a host it serves (host_check.py, app.py's first
check): DNS rebinding, where another site's name is pointed at 127.0.0.1 and its page sends
``Host`` and ``Origin`` of that name, gets 421 on every route and changes nothing."""

from __future__ import annotations

import json
import socket

import pytest

from odradek.client import AdminClient, ConfigResource, NewTopic, Producer, ResourceType
from odradek.console.app import ConsoleConfig
from odradek.console.console_server import ConsoleServer
from tests.console.http_probe import every_route, host_of, port_of, send

TARGET = "rebinding-target"


@pytest.fixture(scope="module")
def target(broker):
    """A topic with a record the attacker's page is after."""
    with AdminClient(broker.bootstrap) as admin:
        admin.create_topics([NewTopic(TARGET, 1, 1)])
    with Producer(broker.bootstrap) as producer:
        producer.send(TARGET, key=b"card", value=b"4111-1111-1111-1111", partition=0)
        producer.flush()
    return TARGET


def rebound(console) -> dict:
    """The headers of a page on evil.example whose name now resolves to 127.0.0.1."""
    port = port_of(console.url)
    return {"Host": f"evil.example:{port}", "Origin": f"http://evil.example:{port}"}


def topics(broker) -> list[str]:
    with AdminClient(broker.bootstrap) as admin:
        return admin.list_topics()


def test_the_rebinding_attack_deletes_nothing(console, broker, target):
    answer = send(console.url, "DELETE", f"/api/topics/{target}", rebound(console))
    assert answer.status == 421 and answer.json()["error"] == "INVALID_REQUEST"
    assert target in topics(broker)


def test_the_rebinding_attack_reads_no_record(console, target):
    answer = send(console.url, "GET", f"/api/topics/{target}/messages?partition=0&offset=0", rebound(console))
    assert answer.status == 421
    assert b"4111" not in answer.body and "records" not in answer.json()


def test_the_rebinding_attack_creates_and_configures_nothing(console, broker, target):
    headers = {**rebound(console), "Content-Type": "application/json"}
    body = json.dumps({"name": "made-by-evil", "partitions": 1}).encode()
    assert send(console.url, "POST", "/api/topics", headers, body).status == 421
    body = json.dumps({"set": {"retention.ms": "1"}}).encode()
    assert send(console.url, "POST", f"/api/topics/{target}/configs", headers, body).status == 421
    assert "made-by-evil" not in topics(broker)
    with AdminClient(broker.bootstrap) as admin:
        resource = ConfigResource(ResourceType.TOPIC, target)
        assert admin.describe_configs([resource])[resource]["retention.ms"].value != "1"


@pytest.mark.parametrize(("method", "path"), every_route())
def test_every_route_refuses_a_foreign_host(console, method, path):
    port = port_of(console.url)
    for host in (f"evil.example:{port}", "evil.example", f"127.0.0.1:{port + 1}", f"localhost.:{port}"):
        answer = send(console.url, method, path, {"Host": host})
        assert answer.status == 421, (host, answer.status, answer.body[:200])


@pytest.mark.parametrize("host", ["127.0.0.1", "localhost", "[::1]"])
def test_the_loopback_names_are_served(console, host):
    answer = send(console.url, "GET", "/api/cluster", {"Host": f"{host}:{port_of(console.url)}"})
    assert answer.status == 200 and answer.json()["brokers"]


def raw_status(console, request: bytes) -> int:
    with socket.create_connection(("127.0.0.1", port_of(console.url)), timeout=30) as connection:
        connection.sendall(request)
        return int(connection.makefile("rb").readline().split()[1])


def test_no_host_header_or_two_are_refused(console):
    assert raw_status(console, b"GET /api/cluster HTTP/1.0\r\n\r\n") == 421  # HTTP/1.0 needs none
    assert raw_status(console, b"GET /api/cluster HTTP/1.1\r\nConnection: close\r\n\r\n") == 400  # aiohttp's parser
    two = f"GET /api/cluster HTTP/1.1\r\nHost: {host_of(console.url)}\r\nHost: evil.example\r\n\r\n"
    assert raw_status(console, two.encode()) == 400  # aiohttp's parser refuses a second Host too


def test_changes_only_from_an_origin_the_console_serves(console, broker):
    port = port_of(console.url)
    own = {"Host": host_of(console.url), "Content-Type": "application/json"}
    body = json.dumps({"name": "from-localhost-page", "partitions": 1}).encode()
    for origin in (f"http://evil.example:{port}", f"http://127.0.0.1:{port + 1}", "null", f"http://localhost:{port}.evil"):
        answer = send(console.url, "POST", "/api/topics", {**own, "Origin": origin}, body)
        assert answer.status == 403, origin
    assert "from-localhost-page" not in topics(broker)
    answer = send(console.url, "POST", "/api/topics", {**own, "Origin": f"http://localhost:{port}"}, body)
    assert answer.status == 200  # the console's page opened as localhost: its own
    assert "from-localhost-page" in topics(broker)


def test_the_pages_may_not_be_framed(console):
    answer = send(console.url, "GET", "/", {"Host": host_of(console.url)})
    assert answer.headers["X-Frame-Options"] == "DENY"
    assert answer.headers["Content-Security-Policy"] == "frame-ancestors 'none'"


def test_allowed_hosts_are_served_and_no_others(broker, target):
    config = ConsoleConfig(broker.bootstrap, allowed_hosts=("console.test", "proxy.test:9443"))
    with ConsoleServer(config) as console:
        port = port_of(console.url)
        for host in (f"console.test:{port}", "console.test", "proxy.test:9443", f"127.0.0.1:{port}"):
            answer = send(console.url, "GET", f"/api/topics/{target}", {"Host": host})
            assert answer.status == 200, host
        for host in (f"evil.example:{port}", f"proxy.test:{port}", "proxy.test"):
            assert send(console.url, "GET", f"/api/topics/{target}", {"Host": host}).status == 421, host
        headers = {"Host": f"console.test:{port}", "Origin": f"http://console.test:{port}"}
        assert send(console.url, "DELETE", f"/api/topics/{target}", {**headers, "Origin": f"http://evil.example:{port}"}
                    ).status == 403
        assert target in topics(broker)
