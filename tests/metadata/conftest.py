"""Fixtures shared by the metadata tests: a real ZooKeeper server, started once per session."""

from __future__ import annotations

import os
import uuid

import pytest

from tests.metadata.zookeeper_server import ZooKeeperServer, zookeeper_installed


@pytest.fixture(scope="session")
def zookeeper(tmp_path_factory):
    """A standalone ZooKeeper on 127.0.0.1. Skipped, with the reason, where Debian's
    ``zookeeper`` package is missing, except under CI (``CI`` set), where that fails: there
    scripts/setup.sh must have installed it."""
    if not zookeeper_installed():
        message = "ZooKeeper is not installed: apt-get install zookeeper (scripts/setup.sh)"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    server = ZooKeeperServer(tmp_path_factory.mktemp("zookeeper"))
    server.start()
    yield server
    server.stop()


@pytest.fixture
def chroot() -> str:
    """A fresh chroot per test, so tests on one server never see each other's znodes."""
    return f"/test-{uuid.uuid4().hex[:12]}"
