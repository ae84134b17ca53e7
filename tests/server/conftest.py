"""Fixtures: a real broker on 127.0.0.1 with an ephemeral port."""

from __future__ import annotations

import pytest
from kafka.admin import KafkaAdminClient

from odradek.testing.broker import InProcessBroker


@pytest.fixture
def broker(tmp_path):
    """A fresh broker per test, data in the test's temporary directory."""
    with InProcessBroker(tmp_path / "data") as b:
        yield b


@pytest.fixture(scope="module")
def shared_broker(tmp_path_factory):
    """One broker for a whole test module (tests use their own topic names)."""
    with InProcessBroker(tmp_path_factory.mktemp("shared") / "data") as b:
        yield b


@pytest.fixture(scope="module")
def kp_admin(shared_broker):
    """kafka-python's admin client on ``shared_broker``."""
    client = KafkaAdminClient(bootstrap_servers=shared_broker.bootstrap)
    yield client
    client.close()
