"""``BrokerChildProcess``: started, found, stopped cleanly; a child that cannot start is
reported with its output instead of hanging."""

from __future__ import annotations

import pytest

from odradek.client import AdminClient
from odradek.server.child_process import BrokerChildProcess
from odradek.testing.broker import test_config as broker_config


def test_start_serves_and_stop_is_a_clean_shutdown(tmp_path):
    child = BrokerChildProcess(broker_config(tmp_path / "data")).start()
    try:
        with AdminClient(child.bootstrap) as admin:
            assert [b.node_id for b in admin.describe_cluster().brokers] == [1]
    finally:
        assert child.stop() == 0
    assert child.stop() == 0  # already stopped: its exit status again


def test_a_child_that_cannot_start_raises_with_its_output(tmp_path):
    child = BrokerChildProcess(broker_config(tmp_path / "data", **{"log.segment.bytes": "not-a-number"}))
    with pytest.raises(RuntimeError, match="did not start") as info:
        child.start(timeout=30)
    assert "log.segment.bytes" in str(info.value)
    assert child.proc.poll() is not None


def test_env_is_added_to_the_childs_environment(tmp_path, monkeypatch):
    monkeypatch.setenv("ODRADEK_TEST_INHERITED", "kept")
    child = BrokerChildProcess(broker_config(tmp_path / "data"), env={"ODRADEK_TEST_ADDED": "yes"}).start()
    try:
        with open(f"/proc/{child.pid}/environ", "rb") as f:
            environ = dict(item.split(b"=", 1) for item in f.read().split(b"\0") if b"=" in item)
    finally:
        child.stop()
    assert environ[b"ODRADEK_TEST_ADDED"] == b"yes"
    assert environ[b"ODRADEK_TEST_INHERITED"] == b"kept"
