"""``odradek leader-election`` on one broker (``kafka-leader-election.sh``'s flags and lines):
each partition is led by its only replica, so every election is "Valid replica already
elected"; the flag checks and the JSON file are Kafka's. Elections that move leaders are in
tests/server/cluster/test_leader_election.py."""

from __future__ import annotations

import json

import pytest


@pytest.fixture
def topic(cli, topic_name):
    assert cli("topics", "--create", "--topic", topic_name, "--partitions", "2").code == 0
    return topic_name


@pytest.mark.parametrize("kind", ["PREFERRED", "unclean"])
def test_one_partition_already_led_by_its_preferred_replica(cli, topic, kind):
    result = cli("leader-election", "--election-type", kind, "--topic", topic, "--partition", "1")
    assert (result.code, result.out, result.err) == (
        0, f"Valid replica already elected for partitions {topic}-1\n", "")


def test_all_partitions_lists_nothing_when_nothing_moves(cli, topic):
    result = cli("leader-election", "--election-type", "PREFERRED", "--all-topic-partitions")
    assert (result.code, result.out, result.err) == (0, "", "")


def test_json_file_with_an_unknown_partition_fails(cli, topic, tmp_path):
    path = tmp_path / "election.json"
    path.write_text(json.dumps({"partitions": [{"topic": topic, "partition": 0},
                                               {"topic": topic, "partition": 5}]}))
    result = cli("leader-election", "--election-type", "PREFERRED", "--path-to-json-file", str(path))
    assert result.code == 1
    assert result.lines() == [
        f"Valid replica already elected for partitions {topic}-0",
        f"Error completing leader election (PREFERRED) for partition: {topic}-5: "
        "UNKNOWN_TOPIC_OR_PARTITION: The partition does not exist.",
    ]
    assert result.err == "odradek leader-election: 1 replica(s) could not be elected\n"


@pytest.mark.parametrize("args, message", [
    (["--all-topic-partitions"], "Missing required option(s): --election-type"),
    (["--election-type", "PREFERRED"],
     "One and only one of the following options is required: --topic, --all-topic-partitions, --path-to-json-file"),
    (["--election-type", "PREFERRED", "--all-topic-partitions", "--topic", "t", "--partition", "0"],
     "One and only one of the following options is required: --topic, --all-topic-partitions, --path-to-json-file"),
    (["--election-type", "PREFERRED", "--topic", "t"], "Missing required option(s): --partition"),
    (["--election-type", "PREFERRED", "--all-topic-partitions", "--partition", "0"],
     "Option --partition is only allowed if --topic is used"),
])
def test_flag_checks(cli, args, message):
    result = cli("leader-election", *args)
    assert (result.code, result.out, result.err) == (1, "", f"odradek leader-election: {message}\n")


@pytest.mark.parametrize("document, message", [
    ("", "Replica election data is empty"),
    ('{"topics": []}', 'Replica election data is missing "partitions" field'),
    ('{"partitions": [{"topic": "a", "partition": 1}, {"topic": "a", "partition": 1}]}',
     "Replica election data contains duplicate partitions: a-1"),
    ('{"partitions": [{"topic": "a", "partition": "x"}]}', 'each entry needs a "topic" string'),
    ("{nope", "is not JSON"),
])
def test_bad_json_files(cli, tmp_path, document, message):
    path = tmp_path / "election.json"
    path.write_text(document)
    result = cli("leader-election", "--election-type", "PREFERRED", "--path-to-json-file", str(path))
    assert result.code == 1 and message in result.err and result.out == ""


def test_unknown_election_type_is_refused_by_the_parser(cli):
    result = cli("leader-election", "--election-type", "random", "--all-topic-partitions")
    assert result.code == 2 and "invalid choice" in result.err
