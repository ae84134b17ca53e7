"""The console beside other work (``odradek demo --follow``): it says its address and serves
while the body runs, then stops; a busy port is said, and the work goes on without it."""

from __future__ import annotations

import json
import socket
import urllib.error
import urllib.request

import pytest

from odradek.console.console_server import console_beside


def test_serves_while_the_body_runs(broker):
    said = []
    with console_beside(broker.bootstrap, said.append) as server:
        with urllib.request.urlopen(server.url + "api/topics", timeout=30) as answer:
            assert "orders" in [t["name"] for t in json.loads(answer.read())["topics"]]
    assert said == [f"web console at {server.url}"]
    with pytest.raises(urllib.error.URLError):
        urllib.request.urlopen(server.url, timeout=5)


def test_a_busy_port_is_said_and_the_body_runs(broker):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        said, ran = [], []
        with console_beside(broker.bootstrap, said.append, port=taken.getsockname()[1]) as server:
            ran.append(server)
    assert ran == [None]
    assert said[0].startswith("the web console did not start: ")
