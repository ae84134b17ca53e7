"""The files and throttle lists of ``odradek reassign-partitions``, as Kafka's tool has them."""

from __future__ import annotations

import json

import pytest

from odradek.cli.reassignment_plan import (
    PlanError,
    check_execute,
    follower_throttles,
    format_reassignment,
    leader_throttles,
    move_map,
    parse_broker_list,
    parse_reassignment,
    parse_topics,
    reassigning_brokers,
)
from odradek.client import PartitionReassignment, TopicPartition

FOO0, FOO1, BAR0 = TopicPartition("foo", 0), TopicPartition("foo", 1), TopicPartition("bar", 0)


def test_worked_example_of_the_module_docstring():
    moves = move_map({}, {FOO0: [2, 3]}, {FOO0: [1, 2]})
    assert leader_throttles(moves) == {"foo": "0:1,0:2"}
    assert follower_throttles(moves) == {"foo": "0:3"}
    assert reassigning_brokers(moves) == [1, 2, 3]


def test_a_reassignment_in_progress_keeps_its_sources():
    ongoing = {FOO1: PartitionReassignment((4, 1, 2), (4,), (1, 2)), BAR0: PartitionReassignment((5, 1), (5,), (1,))}
    moves = move_map(ongoing, {FOO1: [6]}, {FOO1: [4, 1, 2]})
    assert leader_throttles(moves) == {"foo": "1:1,1:2", "bar": "0:1"}
    assert follower_throttles(moves) == {"foo": "1:6", "bar": "0:5"}
    with pytest.raises(PlanError, match="with 0 replicas"):
        move_map({}, {FOO0: [1]}, {})


def test_reassignment_json_round_trip_and_checks():
    text = format_reassignment({FOO1: [3, 1], FOO0: [1, 2]})
    assert text == ('{"version":1,"partitions":[{"topic":"foo","partition":0,"replicas":[1,2],"log_dirs":["any","any"]},'
                    '{"topic":"foo","partition":1,"replicas":[3,1],"log_dirs":["any","any"]}]}')
    assert parse_reassignment(text) == [(FOO0, [1, 2]), (FOO1, [3, 1])]
    assert parse_reassignment('{"partitions":[{"topic":"foo","partition":0,"replicas":[1]}]}') == [(FOO0, [1])]
    for bad, message in [
        ("[]", "not a valid JSON object"), ("{", "not a valid JSON"), ('{"version":2}', "Not supported version"),
        ('{"partitions":[{"topic":"foo"}]}', "needs"),
        ('{"partitions":[{"topic":"foo","partition":0,"replicas":[1],"log_dirs":["any","any"]}]}', "Size of replicas"),
        ('{"partitions":[{"topic":"foo","partition":0,"replicas":[1],"log_dirs":["/d"]}]}', "log directories"),
    ]:
        with pytest.raises(PlanError, match=message):
            parse_reassignment(bad)
    with pytest.raises(PlanError, match="cannot be empty"):
        check_execute([])
    with pytest.raises(PlanError, match="replica list cannot be empty"):
        check_execute([(FOO0, [])])
    with pytest.raises(PlanError, match="duplicate topic partitions: foo-0"):
        check_execute([(FOO0, [1]), (FOO0, [2])])
    with pytest.raises(PlanError, match="foo-0 contains multiple entries for 1"):
        check_execute([(FOO0, [1, 2, 1])])


def test_topics_and_broker_lists():
    assert parse_topics(json.dumps({"version": 1, "topics": [{"topic": "a"}, {"topic": "b"}]})) == ["a", "b"]
    with pytest.raises(PlanError, match="duplicate entries: a"):
        parse_topics('{"topics":[{"topic":"a"},{"topic":"a"}]}')
    assert parse_broker_list("3,1,2") == [3, 1, 2]
    with pytest.raises(PlanError, match="duplicate entries: 1"):
        parse_broker_list("1,1")
    with pytest.raises(PlanError, match="Invalid broker list"):
        parse_broker_list("1,x")
