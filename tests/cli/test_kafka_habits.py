"""What users of Kafka's tools type, and expect: ``--version``, errors in the subcommand's
own usage, ``groups --describe --offsets``, the group given as a consumer property, the
warning of a reset past the end, and a console consumer stopped with SIGTERM."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time

import pytest

from odradek.cli.common import kafka_names
from odradek.cli.main import build_parser
from odradek.client import AdminClient, NewTopic, Producer
from tests.cli.conftest import run_cli


def _topic_with_records(broker, topic: str, count: int, partitions: int = 1) -> None:
    with AdminClient(broker.bootstrap) as admin:
        admin.create_topics([NewTopic(topic, partitions, 1)])
    with Producer(broker.bootstrap) as producer:
        for i in range(count):
            producer.send(topic, f"v{i}".encode(), partition=0)
        producer.flush()


def test_version():
    result = run_cli("--version")
    assert result.code == 0
    assert result.out.startswith("odradek ") and result.out.split()[1][0].isdigit()


def test_an_unknown_option_is_reported_with_the_subcommand_usage():
    result = run_cli("groups", "--list", "--bogus")
    assert result.code == 2
    assert "usage: odradek groups" in result.err
    assert "odradek groups: error: unrecognized arguments: --bogus" in result.err


def test_describe_offsets_is_the_default_view(cli, broker, topic_name):
    _topic_with_records(broker, topic_name, 3)
    group = "g-" + topic_name
    assert cli("consume", "--topic", topic_name, "--group", group, "--from-beginning", "--max-messages", "3").code == 0
    default = cli("groups", "--describe", "--group", group, "--output", "json")
    explicit = cli("groups", "--describe", "--group", group, "--offsets", "--output", "json")
    assert explicit.code == 0, explicit.err
    assert explicit.out == default.out and json.loads(explicit.lines()[0])["current_offset"] == 3
    both = cli("groups", "--describe", "--group", group, "--offsets", "--members")
    assert both.code == 1 and "one of --offsets, --members and --state" in both.err


def test_the_group_may_come_from_a_consumer_property(cli, broker, topic_name):
    """As Kafka's console consumer: ``--consumer-property group.id=G`` joins G and commits."""
    _topic_with_records(broker, topic_name, 4)
    group = "g-" + topic_name
    result = cli("consume", "--topic", topic_name, "--consumer-property", f"group.id={group}",
                 "--from-beginning", "--max-messages", "4")
    assert result.code == 0, result.err
    with AdminClient(broker.bootstrap) as admin:
        committed = admin.list_group_offsets(group)
    assert [o.offset for o in committed.values()] == [4]
    clash = cli("consume", "--topic", topic_name, "--group", "other", "--consumer-property", f"group.id={group}")
    assert clash.code == 1 and "differ" in clash.err


def test_a_reset_past_the_end_warns_and_clamps(cli, broker, topic_name):
    _topic_with_records(broker, topic_name, 5)
    group = "g-" + topic_name
    result = cli("groups", "--reset-offsets", "--group", group, "--topic", topic_name, "--to-offset", "99",
                 "--execute", "--output", "json")
    assert result.code == 0, result.err
    assert json.loads(result.out)["new_offset"] == 5
    assert f"new offset 99 is past the end of {topic_name}-0; it is set to 5 instead" in result.err
    within = cli("groups", "--reset-offsets", "--group", group, "--topic", topic_name, "--to-offset", "2",
                 "--execute")
    assert within.code == 0 and "WARN: new offset" not in within.err


def test_sigterm_stops_the_console_consumer_as_ctrl_c_does(broker, topic_name):
    """The total is reported, the offsets printed are committed, and the consumer leaves its
    group at once (the group is Empty, not waiting out a session timeout)."""
    _topic_with_records(broker, topic_name, 3)
    group = "g-" + topic_name
    proc = subprocess.Popen(
        [sys.executable, "-m", "odradek.cli.main", "consume", "--bootstrap-server", broker.bootstrap,
         "--topic", topic_name, "--group", group, "--from-beginning",
         "--consumer-property", "session.timeout.ms=60000"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        lines = [proc.stdout.readline() for _ in range(3)]
        assert [line.strip() for line in lines] == ["v0", "v1", "v2"]
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=60)
    finally:
        proc.kill()
    assert proc.returncode == 0, err
    assert "Processed a total of 3 messages" in err
    with AdminClient(broker.bootstrap) as admin:
        assert [o.offset for o in admin.list_group_offsets(group).values()] == [3]
        assert admin.describe_groups([group])[group].state == "Empty"


def test_setting_errors_name_kafka_properties(cli, topic_name):
    assert kafka_names("compression_type must be one of [...]; see max_request_size") == (
        "compression.type must be one of [...]; see max.request.size")
    assert kafka_names("not_a_setting stays") == "not_a_setting stays"
    bad = cli("produce", "--topic", topic_name, "--compression-codec", "brotli", stdin="x\n")
    assert bad.code == 2 and "invalid choice: 'brotli'" in bad.err
    prop = cli("produce", "--topic", topic_name, "--producer-property", "compression.type=brotli", stdin="x\n")
    assert prop.code == 1 and "compression.type must be one of" in prop.err and "compression_type" not in prop.err


def _parsers():
    parser = build_parser()
    for name, sub in parser.commands.items():
        yield name, sub
        for action in sub._actions:
            if getattr(action, "choices", None) and isinstance(action.choices, dict):
                yield from ((f"{name} {n}", p) for n, p in action.choices.items())


@pytest.mark.parametrize("name,parser", list(_parsers()), ids=lambda v: v if isinstance(v, str) else "")
def test_help_speaks_plainly(name, parser):
    """Every command's help: no reStructuredText markup, no internal references, and every
    option explained."""
    text = parser.format_help()
    assert "``" not in text and "seed" not in text.lower()
    for action in parser._actions:
        if action.option_strings and action.dest != "help":
            assert action.help, f"odradek {name} {action.option_strings[0]} has no help"
