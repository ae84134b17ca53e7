"""Kafka's flags and messages that scripts rely on: ``--version`` and a two-line usage error on
every command, the console producer's ``--broker-list``, the console consumer's
``--formatter`` / ``--formatter-config`` and DefaultMessageFormatter properties, a tab as
``key.separator`` (literal or ``\\t``), ACL refusals in Kafka's names, and an acks=all send
that times out saying NOT_ENOUGH_REPLICAS."""

from __future__ import annotations

import struct

import pytest

from odradek.cli.main import COMMANDS
from odradek.client import AdminClient, NewTopic, Producer
from tests.cli.conftest import run_cli

_SUBCOMMANDS = [(c,) for c in COMMANDS] + [("perf", "produce"), ("perf", "consume"), ("storage", "format")]


def create(broker, topic: str, **configs: str) -> None:
    with AdminClient(broker.bootstrap) as admin:
        admin.create_topics([NewTopic(topic, 1, 1, configs=configs)])


@pytest.mark.parametrize("command", _SUBCOMMANDS, ids=" ".join)
def test_version_on_every_command(command):
    result = run_cli(*command, "--version")
    assert result.code == 0, result.err
    assert result.out == run_cli("--version").out and result.out.startswith("odradek ")


@pytest.mark.parametrize("command", _SUBCOMMANDS, ids=" ".join)
def test_a_bad_flag_prints_the_usage_in_one_line_then_the_error(command):
    result = run_cli(*command, "--no-such-flag")
    name = " ".join(command)
    assert result.code == 2 and result.out == ""
    usage, error, *more = result.err.split("\n")
    assert more == [""], result.err
    assert usage.startswith(f"usage: odradek {name} ") and "[options]" in usage
    assert error.startswith(f"odradek {name}: error: ")


def test_the_usage_line_names_what_is_required():
    assert run_cli("topics", "--describe", "--bogus").err == (
        "usage: odradek topics (--create | --list | --describe | --alter | --delete) [options]\n"
        "odradek topics: error: unrecognized arguments: --bogus\n")
    assert run_cli("produce", "--topic").err.startswith("usage: odradek produce --topic TOPIC [options]\n")


def test_broker_list_is_the_producers_old_bootstrap_flag(broker, topic_name):
    create(broker, topic_name)
    sent = run_cli("produce", "--broker-list", broker.bootstrap, "--topic", topic_name, stdin="via broker-list\n")
    assert (sent.code, sent.err) == (0, "")
    both = run_cli("produce", "--broker-list", "127.0.0.1:1", "--bootstrap-server", broker.bootstrap,
                   "--topic", topic_name, stdin="bootstrap wins\n")
    assert (both.code, both.err) == (0, "")
    consumed = run_cli("consume", "--bootstrap-server", broker.bootstrap, "--topic", topic_name,
                       "--from-beginning", "--max-messages", "2")
    assert consumed.lines() == ["via broker-list", "bootstrap wins"]


def test_a_tab_key_separator_literal_or_escaped(cli, broker, topic_name, tmp_path):
    create(broker, topic_name)
    literal = cli("produce", "--topic", topic_name, "--property", "parse.key=true", "--property", "key.separator=\t",
                  stdin="k1\tv1\n")
    assert (literal.code, literal.err) == (0, "")
    escaped = cli("produce", "--topic", topic_name, "--property", "parse.key=true",
                  "--property", "key.separator=\\t", stdin="k2\tv2\n")
    assert (escaped.code, escaped.err) == (0, "")
    reader_config = tmp_path / "reader.properties"
    reader_config.write_text("parse.key=true\nkey.separator=\\t\n")
    from_file = cli("produce", "--topic", topic_name, "--reader-config", str(reader_config), stdin="k3\tv3\n")
    assert (from_file.code, from_file.err) == (0, "")
    for separator in ("\t", "\\t"):
        consumed = cli("consume", "--topic", topic_name, "--from-beginning", "--max-messages", "3",
                       "--property", "print.key=true", "--property", f"key.separator={separator}")
        assert consumed.out == "k1\tv1\nk2\tv2\nk3\tv3\n"


def test_the_formatter_and_its_properties(cli, broker, topic_name, tmp_path):
    create(broker, topic_name)
    with Producer(broker.bootstrap) as producer:
        producer.send(topic_name, struct.pack(">q", -42), key=b"k", headers=[("h", b"x")]).result(30)
        producer.send(topic_name, None, key=None).result(30)
    flags = [arg for name in ("timestamp", "partition", "offset", "headers", "key")
             for arg in ("--property", f"print.{name}=true")]
    default = cli("consume", "--topic", topic_name, "--from-beginning", "--max-messages", "2",
                  "--formatter", "kafka.tools.DefaultMessageFormatter", *flags,
                  "--property", "value.deserializer=org.apache.kafka.common.serialization.LongDeserializer",
                  "--property", "key.separator=|", "--property", "line.separator=;\\n", "--property", "null.literal=~")
    assert default.code == 0, default.err
    first, second = default.out.split(";\n")[:2]
    timestamp, rest = first.split("|", 1)
    assert timestamp.startswith("CreateTime:") and rest == "Partition:0|Offset:0|h:x|k|-42"
    assert second.split("|", 1)[1] == "Partition:0|Offset:1|NO_HEADERS|~|~"

    config = tmp_path / "formatter.properties"
    config.write_text("print.key=true\nkey.separator=\\t\nprint.value=false\n")
    from_file = cli("consume", "--topic", topic_name, "--from-beginning", "--max-messages", "1",
                    "--formatter-config", str(config), "--property", "print.offset=true")
    assert from_file.out == "Offset:0\tk\n"  # the file's, with --property's on top
    silent = cli("consume", "--topic", topic_name, "--from-beginning", "--max-messages", "2",
                 "--formatter", "org.apache.kafka.tools.consumer.NoOpMessageFormatter")
    assert (silent.code, silent.out, silent.err) == (0, "", "Processed a total of 2 messages\n")
    unknown = cli("consume", "--topic", topic_name, "--formatter", "kafka.tools.LoggingMessageFormatter")
    assert unknown.code == 1 and "--formatter kafka.tools.LoggingMessageFormatter is not one odradek has" in unknown.err


def test_acl_refusals_use_kafkas_names(cli):
    """This module's broker has no authorizer: the broker refuses with SECURITY_DISABLED."""
    added = cli("acls", "--add", "--allow-principal", "User:alice", "--operation", "Read", "--topic", "orders")
    assert added.code == 1
    assert added.err == (
        "odradek acls: SECURITY_DISABLED for (pattern=ResourcePattern(resourceType=TOPIC, name=orders, "
        "patternType=LITERAL), entry=(principal=User:alice, host=*, operation=READ, permissionType=ALLOW)): "
        "No Authorizer is configured.\n")
    removed = cli("acls", "--remove", "--allow-principal", "User:alice", "--operation", "Read", "--topic", "orders",
                  "--force")
    assert removed.code == 1 and removed.err.startswith("odradek acls: SECURITY_DISABLED")
    assert "resource_type=" not in removed.err and "AclBindingFilter(" not in removed.err
    unanswered = cli("acls", "--remove", "--topic", "orders", stdin="")  # no answer: nothing removed
    assert (unanswered.code, unanswered.err) == (0, "")


def test_an_acks_all_send_that_expires_says_not_enough_replicas(cli, broker, topic_name):
    """One replica, min.insync.replicas=2: every attempt is refused until delivery.timeout.ms."""
    create(broker, topic_name, **{"min.insync.replicas": "2"})
    result = cli("produce", "--topic", topic_name, "--request-required-acks", "all",
                 "--producer-property", "delivery.timeout.ms=1500", "--producer-property", "request.timeout.ms=1000",
                 stdin="never acknowledged\n")
    assert result.code == 1
    assert result.err.startswith(f"odradek produce: sending to {topic_name} failed: NOT_ENOUGH_REPLICAS for "
                                 f"{topic_name}-0"), result.err
    assert result.err.count("\n") == 1
