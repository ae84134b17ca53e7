"""The installed ``odradek`` script, run as a real process: ``kafka-topics.sh``-style topic
commands, a console round trip through pipes, and how failures look from a shell."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ODRADEK = Path(sys.executable).parent / "odradek"


def odradek(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([str(ODRADEK), *args], input=stdin, capture_output=True, text=True, timeout=120)


def test_topic_commands_and_round_trip_in_a_real_process(broker, topic_name):
    assert ODRADEK.is_file(), f"{ODRADEK} is not installed (pip install -e .)"
    bootstrap = ["--bootstrap-server", broker.bootstrap]
    topic = "topicA-" + topic_name
    created = odradek("topics", *bootstrap, "--create", "--topic", topic, "--partitions", "10",
                      "--replication-factor", "1")
    assert (created.returncode, created.stdout, created.stderr) == (0, f"Created topic {topic}.\n", "")
    described = odradek("topics", *bootstrap, "--describe", "--topic", topic, "--output", "text")
    assert described.stdout.count("Leader: 1000\tReplicas: 1000\tIsr: 1000") == 10

    produced = odradek("produce", *bootstrap, "--topic", topic, "--property", "parse.key=true",
                       "--property", "key.separator=:", stdin="a:1\nb:2\nc:3\n")
    assert produced.returncode == 0, produced.stderr
    consumed = odradek("consume", *bootstrap, "--topic", topic, "--from-beginning", "--max-messages", "3",
                       "--property", "print.key=true", "--property", "key.separator==")
    assert consumed.returncode == 0, consumed.stderr
    assert sorted(consumed.stdout.splitlines()) == ["a=1", "b=2", "c=3"]
    assert consumed.stderr == "Processed a total of 3 messages\n"


def test_failures_are_one_line_with_a_nonzero_status(tmp_path):
    unreachable = odradek("topics", "--bootstrap-server", "127.0.0.1:1", "--list")
    assert unreachable.returncode == 1
    assert unreachable.stderr == "odradek topics: cannot connect to 127.0.0.1:1 (Connection refused)\n"
    missing = odradek("dump-log", "--files", str(tmp_path / "missing.log"))
    assert (missing.returncode, missing.stderr) == (1, f"odradek dump-log: {tmp_path / 'missing.log'}: no such file\n")
    usage = odradek("groups", "--list", "--describe")
    assert usage.returncode == 2 and "not allowed with argument" in usage.stderr
    assert odradek("consume", "--help").stdout.startswith("usage: odradek consume")
