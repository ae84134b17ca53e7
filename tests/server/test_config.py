"""Broker configuration under Kafka's names, and the ``odradek broker`` command's handling of it."""

from __future__ import annotations

import subprocess
import sys

import pytest

from odradek.server.config import BrokerConfig, ConfigError, read_properties


def test_defaults_are_one_loopback_broker():
    config = BrokerConfig.from_props({})
    assert [(l.name, l.host, l.port) for l in config.listeners] == [("PLAINTEXT", "127.0.0.1", 9092)]
    assert config.broker_id == 1
    assert config["num.partitions"] == 1
    assert config["auto.create.topics.enable"] is True
    assert config.log_config.retention_ms == 7 * 24 * 3600 * 1000


def test_properties_file_and_overrides(tmp_path):
    path = tmp_path / "server.properties"
    path.write_text("# a comment\nbroker.id=1000\nlog.dirs=/a,/b\nlog.retention.hours = 2\n"
                    "listeners=PLAINTEXT://127.0.0.1:0\nnum.partitions: 4\n")
    config = BrokerConfig.load(path, {"num.partitions": "6", "log.segment.bytes": "1048576"})
    assert config.broker_id == 1000
    assert config.log_dirs == ["/a", "/b"]
    assert config["num.partitions"] == 6
    assert config.log_config.retention_ms == 2 * 3600 * 1000
    assert config.log_config.segment_bytes == 1048576


def test_node_id_wins_over_broker_id():
    assert BrokerConfig.from_props({"node.id": "7", "broker.id": "3"}).broker_id == 7
    assert BrokerConfig.from_props({"broker.id": "3"}).broker_id == 3


def test_retention_ms_beats_minutes_beats_hours():
    config = BrokerConfig.from_props({"log.retention.hours": "1", "log.retention.minutes": "5"})
    assert config.log_config.retention_ms == 5 * 60 * 1000
    config = BrokerConfig.from_props({"log.retention.ms": "123", "log.retention.minutes": "5"})
    assert config.log_config.retention_ms == 123


@pytest.mark.parametrize("props, key", [
    ({"num.partitions": "zero"}, "num.partitions"),
    ({"num.partitions": "0"}, "num.partitions"),
    ({"auto.create.topics.enable": "maybe"}, "auto.create.topics.enable"),
    ({"listeners": "127.0.0.1:9092"}, "listeners"),
    ({"log.segment.bytes": "10"}, "segment.bytes"),
    ({"log.cleanup.policy": "shred"}, "cleanup.policy"),
])
def test_invalid_values_name_the_key(props, key):
    with pytest.raises(ConfigError, match=key.split(".")[0]):
        BrokerConfig.from_props(props)


def test_unknown_keys_are_reported_not_fatal():
    config = BrokerConfig.from_props({"no.such.key": "1", "retention.ms": "5"})
    assert config.unknown == ("no.such.key",)


def test_read_properties_rejects_garbage(tmp_path):
    path = tmp_path / "bad.properties"
    path.write_text("this line has no separator\n")
    with pytest.raises(ConfigError):
        read_properties(path)


def test_cli_refuses_invalid_config_with_one_line():
    result = subprocess.run([sys.executable, "-m", "odradek.cli.main", "broker",
                             "--override", "log.segment.bytes=big"], capture_output=True, text=True, timeout=60)
    assert result.returncode == 1
    assert "log.segment.bytes" in result.stderr and "Traceback" not in result.stderr


def test_cli_warns_about_unknown_keys_and_serves(tmp_path):
    from odradek.testing.broker import BrokerProcess

    with BrokerProcess(tmp_path / "data", some_unknown_key="1") as b:
        assert b.terminate() == 0
    assert any("unknown configuration key 'some.unknown.key'" in line for line in b.output)
