"""``odradek configs``: changes made with the CLI are what kafka-python's admin client sees."""

from __future__ import annotations

import json
import logging

import pytest
from kafka.admin import ConfigResource as KafkaResource
from kafka.admin import ConfigResourceType, KafkaAdminClient

from odradek.client import AdminClient, NewTopic
from tests.cli.conftest import BROKER_ID


@pytest.fixture
def kafka_admin(broker):
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    yield admin
    admin.close()


def kafka_python_view(kafka_admin, kind, name: str) -> dict[str, str]:
    """The non-default configs kafka-python's describe_configs reports, by name."""
    found = kafka_admin.describe_configs([KafkaResource(kind, name)])
    section = "topic" if kind == ConfigResourceType.TOPIC else "broker"
    return {k: v["value"] for k, v in found[section][name].items()}


def test_topic_config_alter_is_visible_to_kafka_python(cli, broker, kafka_admin, topic_name):
    with AdminClient(broker.bootstrap) as admin:
        admin.create_topics([NewTopic(topic_name, 1, 1)])
    added = cli("configs", "--entity-type", "topics", "--entity-name", topic_name, "--alter",
                "--add-config", "retention.ms=1000,cleanup.policy=[compact,delete]")
    assert (added.code, added.out) == (0, f"Completed updating config for topic {topic_name}.\n")
    assert kafka_python_view(kafka_admin, ConfigResourceType.TOPIC, topic_name) == {
        "retention.ms": "1000", "cleanup.policy": "compact,delete"}

    described = json.loads(cli("configs", "--topic", topic_name, "--describe", "--output", "json").out)
    assert [(c["name"], c["value"], c["source"]) for c in described["configs"]] == [
        ("cleanup.policy", "compact,delete", "DYNAMIC_TOPIC_CONFIG"), ("retention.ms", "1000", "DYNAMIC_TOPIC_CONFIG")]
    table = cli("configs", "--entity-type", "topics", "--entity-name", topic_name, "--describe", "--output", "table")
    assert f"Dynamic configs for topic {topic_name}:" in table.out
    assert ["retention.ms", "1000", "DYNAMIC_TOPIC_CONFIG", "false", "false"] in [line.split() for line in table.lines()]

    removed = cli("configs", "--entity-type", "topics", "--entity-name", topic_name, "--alter",
                  "--delete-config", "cleanup.policy", "--add-config", "segment.ms=60000")
    assert removed.code == 0, removed.err
    assert kafka_python_view(kafka_admin, ConfigResourceType.TOPIC, topic_name) == {
        "retention.ms": "1000", "segment.ms": "60000"}

    everything = json.loads(cli("configs", "--topic", topic_name, "--describe", "--all", "--output", "json").out)
    by_name = {c["name"]: c for c in everything["configs"]}
    assert by_name["cleanup.policy"]["source"] == "DEFAULT_CONFIG" and by_name["cleanup.policy"]["value"] == "delete"
    assert by_name["segment.ms"]["source"] == "DYNAMIC_TOPIC_CONFIG"


def test_broker_config_alter_is_visible_to_kafka_python(cli, kafka_admin):
    broker_id = str(BROKER_ID)
    added = cli("configs", "--entity-type", "brokers", "--entity-name", broker_id, "--alter",
                "--add-config", "log.retention.bytes=1048576")
    assert (added.code, added.out) == (0, f"Completed updating config for broker {broker_id}.\n")
    try:
        assert kafka_python_view(kafka_admin, ConfigResourceType.BROKER, broker_id)["log.retention.bytes"] == "1048576"
        described = json.loads(cli("configs", "--broker", broker_id, "--describe", "--output", "json").out)
        assert {"name": "log.retention.bytes", "value": "1048576", "source": "DYNAMIC_BROKER_CONFIG",
                "sensitive": False, "read_only": False} in described["configs"]
        every_broker = cli("configs", "--entity-type", "brokers", "--describe", "--output", "json").lines()
        assert [json.loads(line)["entity_name"] for line in every_broker] == [broker_id]
    finally:
        removed = cli("configs", "--entity-type", "brokers", "--entity-name", broker_id, "--alter",
                      "--delete-config", "log.retention.bytes")
    assert removed.code == 0
    assert "log.retention.bytes" not in kafka_python_view(kafka_admin, ConfigResourceType.BROKER, broker_id)


def test_cluster_default_for_brokers(cli, kafka_admin):
    added = cli("configs", "--entity-type", "brokers", "--entity-default", "--alter",
                "--add-config", "log.retention.ms=3600000")
    assert (added.code, added.out) == (0, "Completed updating default config for brokers in the cluster.\n")
    try:
        # A cluster-wide default is not "modified" for one broker (its source is
        # DYNAMIC_DEFAULT_BROKER_CONFIG, as in Kafka): ask for every config.
        found = kafka_admin.describe_configs([KafkaResource(ConfigResourceType.BROKER, str(BROKER_ID))],
                                             config_filter="all")
        entry = found["broker"][str(BROKER_ID)]["log.retention.ms"]
        assert (entry["value"], entry["config_source"]) == ("3600000", "DYNAMIC_DEFAULT_BROKER_CONFIG")
    finally:
        assert cli("configs", "--entity-type", "brokers", "--entity-default", "--alter",
                   "--delete-config", "log.retention.ms").code == 0


@pytest.mark.parametrize("args, message", [
    (["--entity-type", "brokers", "--entity-name", str(BROKER_ID), "--alter", "--add-config", "no.such=1"],
     f"INVALID_REQUEST for broker {BROKER_ID}"),
    (["--entity-type", "topics", "--entity-name", "no-such-topic", "--alter", "--add-config", "retention.ms=1"],
     "UNKNOWN_TOPIC_OR_PARTITION for topic no-such-topic"),
    (["--describe"], "give --entity-type"),
    (["--entity-type", "topics", "--alter", "--add-config", "a=1"], "--alter needs --entity-name"),
    (["--entity-type", "topics", "--entity-name", "t", "--alter"], "--alter needs --add-config or --delete-config"),
    (["--entity-type", "topics", "--entity-default", "--describe"], "--entity-default goes with --entity-type brokers"),
    (["--entity-type", "brokers", "--entity-name", "one", "--describe"], "a broker's --entity-name is its id"),
    (["--topic", "a", "--broker", "1", "--describe"], "name different entity types"),
    (["--entity-type", "topics", "--entity-name", "t", "--alter", "--add-config", "retention.ms"],
     "--add-config needs KEY=VALUE"),
    (["--entity-type", "topics", "--entity-name", "t", "--alter", "--add-config", "a=1", "--delete-config", "a"],
     "a is both added and deleted"),
    (["--entity-type", "topics", "--entity-name", "t", "--describe", "--add-config", "a=1"], "go with --alter"),
])
def test_errors_are_one_line(cli, args, message):
    result = cli("configs", *args)
    assert result.code == 1
    assert result.err.startswith("odradek configs: ") and result.err.count("\n") == 1
    assert message in result.err


def test_deleting_a_key_that_is_not_set_is_refused_as_kafkas_tool_does(cli, broker, kafka_admin, topic_name):
    with AdminClient(broker.bootstrap) as admin:
        admin.create_topics([NewTopic(topic_name, 1, 1, configs={"retention.ms": "1000"})])
    refused = cli("configs", "--topic", topic_name, "--alter", "--delete-config", "retention.ms,segment.ms,flush.ms")
    assert (refused.code, refused.err) == (1, "odradek configs: Invalid config(s): segment.ms,flush.ms\n")
    assert kafka_python_view(kafka_admin, ConfigResourceType.TOPIC, topic_name) == {"retention.ms": "1000"}

    default = cli("configs", "--entity-type", "brokers", "--entity-default", "--alter", "--add-config",
                  "log.retention.bytes=1048576")
    assert default.code == 0, default.err
    try:
        # Set as the cluster default, not on the broker itself: not the broker's to delete.
        own = cli("configs", "--broker", str(BROKER_ID), "--alter", "--delete-config", "log.retention.bytes")
        assert (own.code, own.err) == (1, "odradek configs: Invalid config(s): log.retention.bytes\n")
    finally:
        assert cli("configs", "--entity-type", "brokers", "--entity-default", "--alter",
                   "--delete-config", "log.retention.bytes").code == 0


def test_broker_loggers(cli):
    logger = logging.getLogger("odradek.topics")
    before = logger.level
    try:
        described = json.loads(cli("configs", "--entity-type", "broker-loggers", "--entity-name", str(BROKER_ID),
                                   "--describe", "--output", "json").out)
        by_name = {c["name"]: c for c in described["configs"]}
        assert by_name["root"]["source"] == "DYNAMIC_BROKER_LOGGER_CONFIG" and "odradek.topics" in by_name

        changed = cli("configs", "--broker-logger", str(BROKER_ID), "--alter", "--add-config", "odradek.topics=TRACE")
        assert (changed.code, changed.out) == (0, f"Completed updating config for broker-logger {BROKER_ID}.\n")
        assert logger.isEnabledFor(5)
        table = cli("configs", "--broker-logger", str(BROKER_ID), "--describe", "--output", "table")
        assert ["odradek.topics", "TRACE", "DYNAMIC_BROKER_LOGGER_CONFIG", "false", "false"] in [
            line.split() for line in table.lines()]

        unknown = cli("configs", "--broker-logger", str(BROKER_ID), "--alter", "--add-config", "odradek.nope=INFO",
                      "--delete-config", "odradek.topics")
        assert (unknown.code, unknown.err) == (1, "odradek configs: Invalid broker logger(s): odradek.nope\n")
        assert logger.level == 5

        reset = cli("configs", "--broker-logger", str(BROKER_ID), "--alter", "--delete-config", "odradek.topics")
        assert reset.code == 0 and logger.level == logging.NOTSET
    finally:
        logger.setLevel(before)


def test_message_format_version_warns_as_kafkas_tool_does(cli, broker, topic_name):
    with AdminClient(broker.bootstrap) as admin:
        admin.create_topics([NewTopic(topic_name, 1, 1)])
    result = cli("configs", "--topic", topic_name, "--alter", "--add-config", "message.format.version=0.10.2")
    assert result.code == 0, result.err
    assert result.lines() == [
        "WARNING: The configuration message.format.version=0.10.2 is specified. This configuration will be ignored "
        "if the version is newer than the inter.broker.protocol.version specified in the broker or if the "
        "inter.broker.protocol.version is 3.0 or newer. This configuration is deprecated and it will be removed in "
        "Apache Kafka 4.0.",
        f"Completed updating config for topic {topic_name}."]
