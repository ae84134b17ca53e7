"""The console against a SASL_PLAINTEXT listener, with the client properties a
``--command-config`` file gives: its admin client and the message browser's consumer both log
in (PLAIN, as user alice)."""

from __future__ import annotations

import json
import urllib.request

import pytest

from odradek.cli.common import client_config, read_properties
from odradek.client import AdminClient, AsyncAdminClient, NewTopic, Producer
from odradek.console.app import ConsoleConfig
from odradek.console.console_server import ConsoleServer
from tests.server.sasl_broker import plain_port, sasl_broker, sasl_port


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    with sasl_broker(tmp_path_factory.mktemp("console-sasl") / "data") as b:
        plain = f"127.0.0.1:{plain_port(b)}"
        with AdminClient(plain) as admin:
            admin.create_topics([NewTopic("secured", 1, 1)])
        with Producer(plain) as producer:
            producer.send("secured", key=b"k", value=b"behind a login", partition=0)
            producer.flush()
        yield b


def test_pages_and_the_message_browser_over_sasl(broker, tmp_path):
    properties = tmp_path / "client.properties"
    properties.write_text("security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\n"
                          "sasl.username=alice\nsasl.password=alice-secret\n")
    client = client_config(AsyncAdminClient, read_properties(str(properties)), "admin client")
    with ConsoleServer(ConsoleConfig(f"127.0.0.1:{sasl_port(broker)}", client)) as console:
        with urllib.request.urlopen(console.url + "api/topics/secured", timeout=30) as answer:
            assert [p["end"] for p in json.loads(answer.read())["partitions"]] == [1]
        with urllib.request.urlopen(console.url + "api/topics/secured/messages?partition=0&offset=0", timeout=30) as answer:
            records = json.loads(answer.read())["records"]
    assert [(r["key"]["text"], r["value"]["text"]) for r in records] == [("k", "behind a login")]
