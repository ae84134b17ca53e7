"""Fixtures: one real broker per test module (tests use their own topic names)."""

from __future__ import annotations

import itertools
import logging
import uuid

import pytest

from odradek.testing.broker import InProcessBroker

_names = itertools.count()

# kafka-python and aiokafka log every connection a broker closes at the end of a module.
for _name in ("kafka", "aiokafka"):
    logging.getLogger(_name).setLevel(logging.CRITICAL)


def pytest_configure(config):
    # test_transactions_cluster runs a ZooKeeper cluster, marked as tests/server/cluster's are
    config.addinivalue_line("markers", "cluster: integration tests with ZooKeeper and broker processes")


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    with InProcessBroker(tmp_path_factory.mktemp("client") / "data") as b:
        yield b


@pytest.fixture
def topic_name():
    """A topic name no other test uses."""
    return f"t{next(_names)}-{uuid.uuid4().hex[:6]}"
