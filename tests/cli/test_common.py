"""The shared pieces of the client commands: properties, key=value lists, config files."""

from __future__ import annotations

import argparse

import pytest

from odradek.cli.common import (
    BOOTSTRAP_ENV,
    CommandError,
    bootstrap_from,
    client_config,
    parse_pairs,
    read_properties,
    split_top_level,
)
from odradek.client import AsyncAdminClient, AsyncConsumer, AsyncProducer


def test_client_config_converts_kafka_names_and_types():
    assert client_config(AsyncConsumer, {"group.id": "123", "enable.auto.commit": "false",
                                         "partition.assignment.strategy": "roundrobin, range",
                                         "fetch.max.wait.ms": "100"}, "consumer") == {
        "group_id": "123", "enable_auto_commit": False, "partition_assignment_strategy": ("roundrobin", "range"),
        "fetch_max_wait_ms": 100}
    assert client_config(AsyncProducer, {"acks": "1", "linger.ms": "2.5", "compression.level": "3",
                                         "enable.idempotence": "true"}, "producer") == {
        "acks": "1", "linger_ms": 2.5, "compression_level": 3, "enable_idempotence": True}


@pytest.mark.parametrize("props, message", [
    ({"key.serializer": "org.apache.kafka.common.serialization.StringSerializer"},
     "unknown producer property 'key.serializer'"),
    ({"batch.size": "big"}, "batch.size must be a number"),
    ({"enable.idempotence": "yes"}, "enable.idempotence must be true or false"),
])
def test_client_config_refuses_what_it_cannot_use(props, message):
    with pytest.raises(CommandError, match=message):
        client_config(AsyncProducer, props, "producer")


def test_pairs_and_lists():
    assert split_top_level("a=1,b=[x,y],c=2") == ["a=1", "b=[x,y]", "c=2"]
    assert parse_pairs(["a=1,b=[x,y]", "c= 2"], "--add-config", split_commas=True) == {"a": "1", "b": "x,y", "c": "2"}
    assert parse_pairs(["k=v=w"], "--config") == {"k": "v=w"}
    with pytest.raises(CommandError, match="--config needs KEY=VALUE, got '=v'"):
        parse_pairs(["=v"], "--config")


def test_properties_file_and_bootstrap(tmp_path, monkeypatch):
    monkeypatch.delenv(BOOTSTRAP_ENV, raising=False)
    path = tmp_path / "client.properties"
    path.write_text("# a comment\n! another\nbootstrap.servers=127.0.0.1:9999\nclient.id : tools\n"
                    "request.timeout.ms 5000\n\n")
    props = read_properties(str(path))
    assert props == {"bootstrap.servers": "127.0.0.1:9999", "client.id": "tools", "request.timeout.ms": "5000"}
    defaulted = argparse.Namespace(bootstrap_server=None)
    assert bootstrap_from(defaulted, dict(props)) == "127.0.0.1:9999"
    given = argparse.Namespace(bootstrap_server="127.0.0.1:7777")
    rest = dict(props)
    assert bootstrap_from(given, rest) == "127.0.0.1:7777" and "bootstrap.servers" not in rest
    assert client_config(AsyncAdminClient, rest, "admin client") == {"client_id": "tools", "request_timeout_ms": 5000}
    assert bootstrap_from(defaulted, {}) == "127.0.0.1:9092"
    monkeypatch.setenv(BOOTSTRAP_ENV, "127.0.0.1:8888")
    assert bootstrap_from(defaulted, {}) == "127.0.0.1:8888"
    with pytest.raises(CommandError, match="cannot read"):
        read_properties(str(tmp_path / "missing.properties"))
