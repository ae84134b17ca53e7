"""Shared test configuration."""

import os
import sys
import uuid
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

ROOT = Path(__file__).resolve().parent.parent
SHARED = Path(os.environ.get("ODRADEK_SHARED", ROOT.parent / "shared"))
PROTOCOL_DIR = SHARED / "kafka-protocol"
sys.path.insert(0, str(ROOT / "tools"))

settings.register_profile(
    "odradek", deadline=None, suppress_health_check=[HealthCheck.too_slow], max_examples=50
)
settings.load_profile("odradek")


@pytest.fixture(scope="session")
def zookeeper(tmp_path_factory):
    """A standalone ZooKeeper on 127.0.0.1, started once per session. Skipped, with the
    reason, where Debian's ``zookeeper`` package is missing, except under CI (``CI`` set),
    where that fails: there scripts/setup.sh must have installed it."""
    from odradek.server.local_cluster.zookeeper_server import ZooKeeperServer, zookeeper_installed

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
