"""``--describe`` piped prints what Kafka's tools print (scripts grep and awk those lines):
kafka-topics.sh's ``Topic:``/``Partition:`` lines, kafka-consumer-groups.sh's columns,
kafka-configs.sh's ``name=value sensitive=... synonyms={...}``; the table only on a terminal
or with ``--output table``."""

from __future__ import annotations

import subprocess
import sys
import time

import pytest

from odradek.cli import common
from odradek.client import AdminClient, Consumer, NewTopic, Producer
from tests.cli.conftest import BROKER_ID


@pytest.fixture(scope="module")
def grouped(broker):
    """Topic ``plain-t`` (2 partitions, retention.ms=12345, 3 records in partition 0) and group
    ``plain-g`` that committed offset 1 of partition 0."""
    with AdminClient(broker.bootstrap) as admin:
        admin.create_topics([NewTopic("plain-t", 2, 1, configs={"retention.ms": "12345"})])
    with Producer(broker.bootstrap) as producer:
        for i in range(3):
            producer.send("plain-t", f"v{i}".encode(), partition=0)
        producer.flush()
    with Consumer(broker.bootstrap, group_id="plain-g", enable_auto_commit=False) as consumer:
        from odradek.client import TopicPartition

        consumer.commit({TopicPartition("plain-t", 0): 1})
    return "plain-t", "plain-g"


def test_topics_describe_piped_is_kafka_topics_lines(broker, grouped):
    """A real process with its standard output a pipe: no table, Kafka 3's lines."""
    result = subprocess.run([sys.executable, "-m", "odradek.cli.main", "topics", "--bootstrap-server",
                             broker.bootstrap, "--describe", "--topic", "plain-t"],
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    summary, *partitions = result.stdout.splitlines()
    name, topic_id, *rest = summary.split("\t")
    assert name == "Topic: plain-t" and topic_id.startswith("TopicId: ") and len(topic_id) == len("TopicId: ") + 22
    assert rest == ["PartitionCount: 2", "ReplicationFactor: 1", "Configs: retention.ms=12345"]
    assert partitions == [f"\tTopic: plain-t\tPartition: {p}\tLeader: {BROKER_ID}\tReplicas: {BROKER_ID}\t"
                          f"Isr: {BROKER_ID}" for p in (0, 1)]


def test_the_table_is_for_terminals_and_asked_for(cli, grouped, monkeypatch):
    asked = cli("topics", "--describe", "--topic", "plain-t", "--output", "table")
    assert "Topic: plain-t   TopicId:" in asked.out and "PARTITION" in asked.out and "\tTopic:" not in asked.out
    monkeypatch.setattr(common, "stdout_is_terminal", lambda: True)
    assert cli("topics", "--describe", "--topic", "plain-t").out.replace(asked.out.split("\n")[0], "") == (
        asked.out.replace(asked.out.split("\n")[0], ""))  # the same table but for the topic id line
    assert "\tPartition:" not in cli("groups", "--describe", "--group", "plain-g").out


def test_topics_with_overrides_lists_only_their_summaries(cli, grouped, topic_name):
    assert cli("topics", "--create", "--topic", topic_name, "--partitions", "1").code == 0
    result = cli("topics", "--describe", "--topics-with-overrides")
    assert result.code == 0, result.err
    summaries = {line.split("\t")[0]: line for line in result.lines()}
    assert summaries["Topic: plain-t"].endswith("\tConfigs: retention.ms=12345")
    assert f"Topic: {topic_name}" not in summaries  # no config of its own
    assert "Topic: __consumer_offsets" in summaries  # compact, ...
    assert "\tPartition:" not in result.out
    refused = cli("topics", "--list", "--topics-with-overrides")
    assert (refused.code, refused.err) == (1, "odradek topics: --topics-with-overrides goes with --describe\n")


def test_groups_describe_piped_is_kafka_consumer_groups_columns(cli, grouped):
    result = cli("groups", "--describe", "--group", "plain-g")
    assert result.code == 0, result.err
    assert result.out == (
        "\n"
        "GROUP           TOPIC           PARTITION  CURRENT-OFFSET  LOG-END-OFFSET  LAG             CONSUMER-ID     "
        "HOST            CLIENT-ID\n"
        "plain-g         plain-t         0          1               3               2               -               "
        "-               -\n")
    assert result.err == "\nConsumer group 'plain-g' has no active members.\n"  # Kafka's, on standard error


def test_groups_members_state_list_and_reset_piped(cli, broker, grouped):
    with Consumer(broker.bootstrap, group_id="plain-g", client_id="plain-member") as member:
        member.subscribe(["plain-t"])
        deadline = time.monotonic() + 30
        while len(member.assignment()) < 2 and time.monotonic() < deadline:
            member.poll(100)
        members = cli("groups", "--describe", "--group", "plain-g", "--members", "--verbose")
        state = cli("groups", "--describe", "--group", "plain-g", "--state")
    blank, header, row = members.out.split("\n")[:3]
    assert blank == "" and header.split() == ["GROUP", "CONSUMER-ID", "HOST", "CLIENT-ID", "#PARTITIONS", "ASSIGNMENT"]
    assert header.startswith("GROUP           CONSUMER-ID ") and header.endswith("#PARTITIONS     ASSIGNMENT")
    assert row.startswith("plain-g ") and row.split()[-3:] == ["plain-member", "2", "plain-t(0,1)"]
    blank, header, row = state.out.split("\n")[:3]
    coordinator = f"{broker.bootstrap} ({BROKER_ID})"
    assert header == f"{'GROUP':<25} {'COORDINATOR (ID)':<25} {'ASSIGNMENT-STRATEGY':<20} {'STATE':<15} #MEMBERS"
    assert row == f"{'plain-g':<25} {coordinator:<25} {'range':<20} {'Stable':<15} 1"

    listed = cli("groups", "--list", "--state")
    assert listed.lines()[0] == "GROUP           STATE" and "plain-g         Empty" in listed.lines()
    reset = cli("groups", "--reset-offsets", "--group", "plain-g", "--topic", "plain-t:0", "--to-offset", "2")
    assert reset.out == ("\n" + f"{'GROUP':<30} {'TOPIC':<30} {'PARTITION':<10} {'NEW-OFFSET':<15}\n"
                         + f"{'plain-g':<30} {'plain-t':<30} {'0':<10} {'2':<15}\n")


def test_configs_describe_piped_is_kafka_configs_lines(cli, grouped):
    result = cli("configs", "--entity-type", "topics", "--entity-name", "plain-t", "--describe")
    assert result.code == 0, result.err
    assert result.lines() == [
        "Dynamic configs for topic plain-t are:",
        "  retention.ms=12345 sensitive=false synonyms={DYNAMIC_TOPIC_CONFIG:retention.ms=12345, "
        "DEFAULT_CONFIG:log.retention.ms=604800000}"]


def test_configs_lists_what_is_not_kafkas_default(cli, topic_name):
    """A value the brokers set (here the cluster-wide log.retention.ms) is no default either:
    kafka-topics.sh lists every config whose source is not DEFAULT_CONFIG."""
    assert cli("topics", "--create", "--topic", topic_name, "--partitions", "1").code == 0
    default = ["configs", "--entity-type", "brokers", "--entity-default", "--alter"]
    assert cli(*default, "--add-config", "log.retention.ms=86400000").code == 0
    try:
        deadline = time.monotonic() + 30
        while "Configs: retention.ms=86400000" not in (summary := _summary(cli, topic_name)):
            assert time.monotonic() < deadline, summary
            time.sleep(0.05)
        assert summary.endswith("\tConfigs: retention.ms=86400000")
    finally:
        assert cli(*default, "--delete-config", "log.retention.ms").code == 0


def _summary(cli, topic: str) -> str:
    return cli("topics", "--describe", "--topic", topic).lines()[0]


def test_a_partition_being_reassigned_says_so():
    from odradek.cli.topics_cmd import partition_line
    from odradek.client.admin_reassignments import PartitionReassignment
    from odradek.client.metadata import PartitionInfo

    moving = PartitionInfo("t", 0, leader=2, leader_epoch=0, replicas=(1, 2, 3), isr=(1, 2))
    assert partition_line("t", moving, PartitionReassignment((1, 2, 3), (3,), (1,))) == (
        "\tTopic: t\tPartition: 0\tLeader: 2\tReplicas: 1,2,3\tIsr: 1,2\tAdding Replicas: 3\tRemoving Replicas: 1")
    assert partition_line("t", moving) == "\tTopic: t\tPartition: 0\tLeader: 2\tReplicas: 1,2,3\tIsr: 1,2"
