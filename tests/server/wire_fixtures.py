"""Fixtures for test modules that send hand-made frames: one broker for the whole module
(``broker``, in place of conftest's broker per test) and a raw-protocol client of it (``wire``,
``tests/server/wire.py``) per test. A module imports both to use them:
``from tests.server.wire_fixtures import module_broker, wire_client  # noqa: F401``."""

from __future__ import annotations

import pytest

from odradek.testing.broker import InProcessBroker
from tests.server.wire import WireClient


@pytest.fixture(scope="module", name="broker")
def module_broker(tmp_path_factory):
    with InProcessBroker(tmp_path_factory.mktemp("data")) as b:
        yield b


@pytest.fixture(name="wire")
def wire_client(broker):
    client = WireClient(broker.bootstrap)
    yield client
    client.close()
