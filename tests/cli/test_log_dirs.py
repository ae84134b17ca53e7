"""``odradek log-dirs --describe`` against broker 1000: kafka-log-dirs.sh's lines and JSON,
``--topic-list`` and ``--broker-list``, and the refusals. A failed directory's answer is in
tests/server/cluster/test_log_dir_failure.py."""

from __future__ import annotations

import json

from tests.cli.conftest import BROKER_ID


def test_describe_prints_kafkas_lines_and_json(cli, broker, topic_name):
    assert cli("topics", "--create", "--topic", topic_name, "--partitions", "2").code == 0
    assert cli("produce", "--topic", topic_name, stdin="a\nb\n").code == 0
    result = cli("log-dirs", "--describe", "--topic-list", topic_name)
    assert result.code == 0, result.err
    first, second, document = result.lines()
    assert (first, second) == ("Querying brokers for log directories information",
                               f"Received log directory information from brokers {BROKER_ID}")
    doc = json.loads(document)
    assert list(doc) == ["version", "brokers"] and doc["version"] == 1
    [entry] = doc["brokers"]
    assert entry["broker"] == BROKER_ID
    [log_dir] = entry["logDirs"]
    assert list(log_dir) == ["logDir", "error", "partitions"]
    assert log_dir["logDir"] == str(broker.config.log_dirs[0]) and log_dir["error"] is None
    partitions = {p["partition"]: p for p in log_dir["partitions"]}
    assert set(partitions) == {f"{topic_name}-0", f"{topic_name}-1"}
    for name, p in partitions.items():
        assert list(p) == ["partition", "size", "offsetLag", "isFuture"]
        assert (p["offsetLag"], p["isFuture"]) == (0, False)
    assert sum(p["size"] for p in partitions.values()) > 0
    # --broker-list naming this broker: the same answer
    again = cli("log-dirs", "--describe", "--broker-list", str(BROKER_ID), "--topic-list", topic_name)
    assert json.loads(again.lines()[2])["brokers"][0]["broker"] == BROKER_ID


def test_unknown_broker_and_missing_describe_are_refused(cli):
    result = cli("log-dirs", "--describe", "--broker-list", f"{BROKER_ID},7")
    assert (result.code, result.out) == (1, "")
    assert result.err == ("odradek log-dirs: ERROR: The given brokers do not exist from --broker-list: 7. "
                          f"Current existent brokers: {BROKER_ID}\n")
    result = cli("log-dirs")
    assert (result.code, result.err) == (1, 'odradek log-dirs: Missing required argument "[describe]"\n')
