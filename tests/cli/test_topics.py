"""``odradek topics``: ``kafka-topics.sh``'s create commands (``--partitions`` and
``--replication-factor``, ``--replica-assignment``) against broker 1000, then describe,
alter, delete, and the errors."""

from __future__ import annotations

import json
import time

import pytest

from odradek.cli.common import CommandError
from odradek.cli.main import COMMANDS
from odradek.cli.topics_cmd import parse_replica_assignment
from odradek.client import AdminClient
from tests.cli.conftest import BROKER_ID, run_cli


def describe_json(cli, topic: str) -> dict:
    result = cli("topics", "--describe", "--topic", topic, "--output", "json")
    assert result.code == 0, result.err
    [line] = result.lines()
    return json.loads(line)


def test_create_with_partitions_and_replication_factor(cli, topic_name):
    topic = "topicA-" + topic_name
    result = cli("topics", "--create", "--topic", topic, "--partitions", "10", "--replication-factor", "1")
    assert (result.code, result.out, result.err) == (0, f"Created topic {topic}.\n", "")
    described = describe_json(cli, topic)
    assert described["partition_count"] == 10
    assert described["replication_factor"] == 1
    assert [p["partition"] for p in described["partitions"]] == list(range(10))
    for p in described["partitions"]:
        assert (p["leader"], p["replicas"], p["isr"]) == (BROKER_ID, [BROKER_ID], [BROKER_ID])


def test_replica_assignment_puts_five_partitions_on_broker_1000(cli, broker, topic_name):
    topic = "topicB-" + topic_name
    result = cli("topics", "--create", "--topic", topic, "--replica-assignment", "1000,1000,1000,1000,1000")
    assert result.code == 0, result.err
    with AdminClient(broker.bootstrap) as admin:
        partitions = admin.describe_topics([topic])[topic].partitions
    assert [(p.partition, p.replicas, p.leader) for p in partitions] == [(i, (1000,), 1000) for i in range(5)]

    text = cli("topics", "--describe", "--topic", topic, "--output", "text")
    assert text.code == 0
    header, *rows = text.lines()
    assert header.startswith(f"Topic: {topic}\tTopicId: ")
    assert header.endswith("\tPartitionCount: 5\tReplicationFactor: 1\tConfigs: ")
    assert rows == [f"\tTopic: {topic}\tPartition: {i}\tLeader: 1000\tReplicas: 1000\tIsr: 1000" for i in range(5)]


def test_describe_table_shows_partitions_and_topic_configs(cli, topic_name):
    assert cli("topics", "--create", "--topic", topic_name, "--partitions", "2",
               "--config", "retention.ms=12345", "--config", "cleanup.policy=compact").code == 0
    result = cli("topics", "--describe", "--topic", topic_name, "--output", "table")
    assert result.code == 0
    assert "PartitionCount: 2" in result.out and "ReplicationFactor: 1" in result.out
    assert "Configs: cleanup.policy=compact,retention.ms=12345" in result.out
    table = [line.split() for line in result.lines() if line.strip()[:1].isdigit()]
    assert table == [["0", "1000", "1000", "1000"], ["1", "1000", "1000", "1000"]]
    assert describe_json(cli, topic_name)["configs"] == {"cleanup.policy": "compact", "retention.ms": "12345"}


def test_create_with_the_deprecated_message_format_version_warns_and_is_accepted(cli, topic_name):
    result = cli("topics", "--create", "--topic", topic_name, "--config", "message.format.version=2.8")
    assert result.code == 0, result.err
    assert result.lines() == [
        "WARNING: The configuration message.format.version=2.8 is specified. This configuration will be ignored if "
        "the version is newer than the inter.broker.protocol.version specified in the broker or if the "
        "inter.broker.protocol.version is 3.0 or newer. This configuration is deprecated and it will be removed in "
        "Apache Kafka 4.0.", f"Created topic {topic_name}."]
    assert describe_json(cli, topic_name)["configs"] == {"message.format.version": "2.8"}


def test_list_alter_and_delete(cli, topic_name):
    assert cli("topics", "--create", "--topic", topic_name, "--partitions", "2").code == 0
    assert topic_name in cli("topics", "--list").lines()
    listed = cli("topics", "--list", "--output", "json")
    assert {"topic": topic_name} in [json.loads(line) for line in listed.lines()]

    grown = cli("topics", "--alter", "--topic", topic_name, "--partitions", "4")
    assert (grown.code, grown.out) == (0, f"Topic {topic_name} now has 4 partitions.\n")
    assert describe_json(cli, topic_name)["partition_count"] == 4

    shrink = cli("topics", "--alter", "--topic", topic_name, "--partitions", "3")
    assert shrink.code == 1
    assert shrink.err == f"odradek topics: topic {topic_name} has 4 partitions; --partitions must be more than that\n"

    placed = cli("topics", "--alter", "--topic", topic_name, "--partitions", "5",
                 "--replica-assignment", "1000,1000,1000,1000,1000")
    assert placed.code == 0, placed.err
    assert describe_json(cli, topic_name)["partition_count"] == 5

    deleted = cli("topics", "--delete", "--topic", topic_name)
    assert (deleted.code, deleted.out) == (0, f"Deleted topic {topic_name}.\n")
    deadline = time.monotonic() + 30
    while topic_name in cli("topics", "--list").lines() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert topic_name not in cli("topics", "--list").lines()
    again = cli("topics", "--delete", "--topic", topic_name)
    assert (again.code, again.err) == (1, f"odradek topics: Topic '{topic_name}' does not exist as expected\n")
    assert cli("topics", "--delete", "--topic", topic_name, "--if-exists").code == 0


def test_topic_regex_selects_several(cli, topic_name):
    for suffix in ("a", "b"):
        assert cli("topics", "--create", "--topic", f"{topic_name}.{suffix}", "--partitions", "1").code == 0
    result = cli("topics", "--describe", "--topic", f"{topic_name}\\.(a|b)", "--output", "json")
    assert sorted(json.loads(line)["topic"] for line in result.lines()) == [f"{topic_name}.a", f"{topic_name}.b"]


@pytest.mark.parametrize("args, message", [
    (["--create", "--topic", "x", "--replica-assignment", "1000:1000"], "partition 0 lists a broker twice"),
    (["--create", "--topic", "x", "--replica-assignment", "1000,1000:1001"], "different replica counts"),
    (["--create", "--topic", "x", "--replica-assignment", "1000", "--partitions", "1"],
     "--replica-assignment replaces --partitions"),
    (["--create", "--topic", "x", "--replica-assignment", "1000,abc"], "'abc' (partition 1) is not broker ids"),
    (["--create", "--topic", "x", "--partitions", "0"], "--partitions must be positive"),
    (["--create", "--partitions", "1"], "--create needs --topic"),
    (["--create", "--topic", "x", "--config", "novalue"], "--config needs KEY=VALUE"),
    (["--alter", "--topic", "x"], "--alter needs --partitions"),
    (["--list", "--config", "a=b"], "--config goes with --create"),
])
def test_bad_options_fail_with_one_line(cli, args, message):
    result = cli("topics", *args)
    assert result.code == 1
    assert result.err.startswith("odradek topics: ") and result.err.count("\n") == 1
    assert message in result.err


def test_broker_errors_are_one_line(cli, topic_name):
    assert cli("topics", "--create", "--topic", topic_name, "--partitions", "1").code == 0
    exists = cli("topics", "--create", "--topic", topic_name, "--partitions", "1")
    assert exists.code == 1
    assert exists.err.startswith(f"odradek topics: TOPIC_ALREADY_EXISTS for {topic_name}")
    assert exists.err.count("\n") == 1
    assert cli("topics", "--create", "--topic", topic_name, "--partitions", "1", "--if-not-exists").code == 0

    unknown = cli("topics", "--create", "--topic", topic_name + "x", "--replica-assignment", "1001")
    assert unknown.code == 1
    assert unknown.err.startswith("odradek topics: INVALID_REPLICA_ASSIGNMENT")


def test_unreachable_broker_is_one_line():
    result = run_cli("topics", "--bootstrap-server", "127.0.0.1:1", "--list")
    assert result.code == 1
    assert result.err.startswith("odradek topics: cannot connect to 127.0.0.1:1")
    assert result.err.count("\n") == 1
    bad = run_cli("topics", "--bootstrap-server", "nonsense", "--list")
    assert (bad.code, bad.err.count("\n")) == (1, 1)
    assert "is not host:port" in bad.err


def test_parse_replica_assignment():
    assert parse_replica_assignment("1000,1000,1000") == {0: [1000], 1: [1000], 2: [1000]}
    assert parse_replica_assignment("1000:1001,1001:1002") == {0: [1000, 1001], 1: [1001, 1002]}
    with pytest.raises(CommandError):
        parse_replica_assignment("1000,,1000")
    with pytest.raises(CommandError):
        parse_replica_assignment("-1")


@pytest.mark.parametrize("command", [c for c in COMMANDS if c not in ("broker", "demo")])
def test_help_on_every_command(command):
    result = run_cli(command, "--help")
    assert result.code == 0
    assert result.out.startswith(f"usage: odradek {command}")
    if command == "perf":
        for sub in ("produce", "consume"):
            assert run_cli("perf", sub, "--help").out.startswith(f"usage: odradek perf {sub}")


def test_missing_action_is_a_usage_error():
    result = run_cli("topics", "--topic", "x")
    assert result.code == 2
    assert "one of the arguments --create --list --describe --alter --delete is required" in result.err


def test_disable_rack_aware_assigns_in_the_tool(cli, broker, topic_name):
    # The tool computes the assignment itself: the broker's num.partitions when not given.
    result = cli("topics", "--create", "--topic", topic_name, "--disable-rack-aware")
    assert (result.code, result.err) == (0, "")
    described = describe_json(cli, topic_name)
    assert [p["replicas"] for p in described["partitions"]] == [[BROKER_ID]] * described["partition_count"]
    grown = cli("topics", "--alter", "--topic", topic_name, "--partitions", "3", "--disable-rack-aware")
    assert (grown.code, grown.err) == (0, "")
    assert [p["replicas"] for p in describe_json(cli, topic_name)["partitions"]] == [[BROKER_ID]] * 3
    refused = cli("topics", "--create", "--topic", topic_name + "x", "--partitions", "1",
                  "--replication-factor", "2", "--disable-rack-aware")
    assert refused.code == 1
    assert "Replication factor: 2 larger than available brokers: 1." in refused.err


def test_disable_rack_aware_only_with_create_or_alter(cli):
    result = cli("topics", "--list", "--disable-rack-aware")
    assert (result.code, result.err) == (1, "odradek topics: --disable-rack-aware goes with --create or --alter\n")
