"""``odradek groups``: list and describe (offsets, lag, members), reset offsets, delete.
Offsets are committed by kafka-python first, so the CLI reads what another client wrote."""

from __future__ import annotations

import json
import time
from datetime import datetime, timezone

import pytest
from kafka import KafkaConsumer
from kafka import TopicPartition as KafkaTopicPartition
from kafka.structs import OffsetAndMetadata as KafkaOffset

from odradek.cli.common import CommandError
from odradek.cli.groups_cmd import parse_datetime, parse_duration
from odradek.client import AdminClient, Consumer, NewTopic, Producer

RECORDS = 10


@pytest.fixture
def committed_group(broker, topic_name):
    """A topic with 10 records in each of 2 partitions; group ``g-<topic>`` has committed 4
    on partition 0 and 10 on partition 1 (through kafka-python)."""
    with AdminClient(broker.bootstrap) as admin:
        admin.create_topics([NewTopic(topic_name, 2, 1)])
    with Producer(broker.bootstrap) as producer:
        for p in (0, 1):
            for i in range(RECORDS):
                producer.send(topic_name, f"{p}-{i}".encode(), partition=p, timestamp=1_000_000 + i * 1000)
        producer.flush()
    group = "g-" + topic_name
    consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap, group_id=group, enable_auto_commit=False)
    try:
        consumer.assign([KafkaTopicPartition(topic_name, 0), KafkaTopicPartition(topic_name, 1)])
        consumer.commit({KafkaTopicPartition(topic_name, 0): KafkaOffset(4, "", -1),
                         KafkaTopicPartition(topic_name, 1): KafkaOffset(10, "", -1)})
    finally:
        consumer.close()
    return topic_name, group


def offsets(broker, group: str) -> dict[int, int]:
    with AdminClient(broker.bootstrap) as admin:
        return {tp.partition: o.offset for tp, o in admin.list_group_offsets(group).items()}


def test_list_and_describe_show_lag(cli, committed_group):
    topic, group = committed_group
    assert group in cli("groups", "--list").lines()
    states = [json.loads(line) for line in cli("groups", "--list", "--output", "json").lines()]
    assert {"group": group, "state": "Empty", "protocol_type": ""} in states  # only offsets, no members yet

    rows = [json.loads(line) for line in cli("groups", "--describe", "--group", group, "--output", "json").lines()]
    assert [(r["topic"], r["partition"], r["current_offset"], r["log_end_offset"], r["lag"]) for r in rows] == [
        (topic, 0, 4, RECORDS, RECORDS - 4), (topic, 1, 10, RECORDS, 0)]
    assert all(r["consumer_id"] is None for r in rows)

    table = cli("groups", "--describe", "--group", group, "--output", "table")
    assert table.code == 0
    assert f"Consumer group '{group}' has no active members." in table.out
    assert "CURRENT-OFFSET" in table.out and "LOG-END-OFFSET" in table.out and "LAG" in table.out
    cells = [line.split() for line in table.lines() if line.startswith(group)]
    assert [c[:6] for c in cells] == [[group, topic, "0", "4", "10", "6"], [group, topic, "1", "10", "10", "0"]]


def test_describe_a_live_member(cli, broker, committed_group):
    topic, group = committed_group
    with Consumer(broker.bootstrap, group_id=group, client_id="cli-test-member") as member:
        member.subscribe([topic])
        deadline = time.monotonic() + 30
        while len(member.assignment()) < 2 and time.monotonic() < deadline:
            member.poll(100)
        assert len(member.assignment()) == 2
        members = [json.loads(line) for line in
                   cli("groups", "--describe", "--group", group, "--members", "--output", "json").lines()]
        assert len(members) == 1 and members[0]["client_id"] == "cli-test-member"
        assert sorted((p["topic"], p["partition"]) for p in members[0]["partitions"]) == [(topic, 0), (topic, 1)]
        rows = [json.loads(line) for line in cli("groups", "--describe", "--group", group, "--output", "json").lines()]
        assert {r["consumer_id"] for r in rows} == {members[0]["member_id"]}

        state = json.loads(cli("groups", "--describe", "--group", group, "--state", "--output", "json").out)
        assert (state["state"], state["members"]) == ("Stable", 1)
        verbose = cli("groups", "--describe", "--group", group, "--members", "--verbose", "--output", "table")
        assert f"{topic}(0) {topic}(1)" in verbose.out

        busy = cli("groups", "--reset-offsets", "--group", group, "--topic", topic, "--to-earliest", "--execute")
        assert busy.code == 1
        assert busy.err == (f"odradek groups: Assignments can only be reset if the group '{group}' is inactive, "
                            "but the current state is Stable.\n")
        not_empty = cli("groups", "--delete", "--group", group)
        assert not_empty.code == 1 and "NON_EMPTY_GROUP" in not_empty.err


def test_reset_offsets(cli, broker, committed_group):
    topic, group = committed_group

    def reset(*target: str, execute: bool = True) -> dict[int, int]:
        result = cli("groups", "--reset-offsets", "--group", group, "--topic", topic, *target,
                     *(["--execute"] if execute else []), "--output", "json")
        assert result.code == 0, result.err
        return {r["partition"]: r["new_offset"] for r in map(json.loads, result.lines())}

    assert reset("--to-earliest") == {0: 0, 1: 0} == offsets(broker, group)
    assert reset("--shift-by", "3") == {0: 3, 1: 3} == offsets(broker, group)
    assert reset("--shift-by", "-5") == {0: 0, 1: 0}  # kept within the log
    assert reset("--to-offset", "7") == {0: 7, 1: 7}
    assert reset("--to-latest") == {0: RECORDS, 1: RECORDS} == offsets(broker, group)
    # Records carry timestamps 1_000_000 + i * 1000 ms: the first at or after 1_004_500 is offset 5.
    moment = datetime.fromtimestamp(1_004.5, tz=timezone.utc).isoformat()
    assert reset("--to-datetime", moment) == {0: 5, 1: 5} == offsets(broker, group)

    dry = reset("--to-earliest", execute=False)
    assert dry == {0: 0, 1: 0} and offsets(broker, group) == {0: 5, 1: 5}
    warned = cli("groups", "--reset-offsets", "--group", group, "--topic", f"{topic}:1", "--to-earliest")
    assert "no action is performed without --execute" in warned.err
    assert [line.split() for line in warned.lines() if line.startswith(group)] == [[group, topic, "1", "0"]]
    assert reset("--by-duration", "PT0S", execute=False) == {0: RECORDS, 1: RECORDS}

    only_one = cli("groups", "--reset-offsets", "--group", group, "--topic", f"{topic}:0", "--to-earliest",
                   "--execute")
    assert only_one.code == 0 and offsets(broker, group) == {0: 0, 1: 5}
    every = cli("groups", "--reset-offsets", "--group", group, "--all-topics", "--to-latest", "--execute")
    assert every.code == 0 and offsets(broker, group) == {0: RECORDS, 1: RECORDS}


def test_delete_group(cli, broker, committed_group):
    _, group = committed_group
    deleted = cli("groups", "--delete", "--group", group)
    assert (deleted.code, deleted.out) == (0, f"Deletion of requested consumer groups ('{group}') was successful.\n")
    assert group not in cli("groups", "--list").lines()
    gone = cli("groups", "--describe", "--group", group)
    assert (gone.code, gone.err) == (1, f"odradek groups: Consumer group '{group}' does not exist.\n")


@pytest.mark.parametrize("args, message", [
    (["--describe"], "give --group"),
    (["--reset-offsets", "--group", "g", "--topic", "t"], "needs a target"),
    (["--reset-offsets", "--group", "g", "--to-earliest"], "needs --topic or --all-topics"),
    (["--reset-offsets", "--group", "g", "--topic", "t:x", "--to-earliest"], "partitions must be numbers"),
    (["--reset-offsets", "--group", "g", "--topic", "t", "--to-datetime", "yesterday"], "not an ISO 8601 time"),
    (["--reset-offsets", "--group", "g", "--topic", "t", "--by-duration", "1h"], "not a duration"),
])
def test_option_errors(cli, args, message):
    result = cli("groups", *args)
    assert result.code == 1 and message in result.err and result.err.count("\n") == 1


def test_parse_duration_and_datetime():
    assert parse_duration("PT15M") == 900_000
    assert parse_duration("P1DT2H30M1.5S") == ((24 + 2) * 60 + 30) * 60_000 + 1500
    with pytest.raises(CommandError):
        parse_duration("P")
    assert parse_datetime("1970-01-01T00:00:10Z") == 10_000
    assert parse_datetime("1970-01-01T01:00:10+01:00") == 10_000
    local = datetime(2024, 5, 1, 12, 0, 0).astimezone()
    assert parse_datetime("2024-05-01T12:00:00") == int(local.timestamp() * 1000)


def test_describe_watch_refreshes_a_bounded_number_of_times(cli, committed_group):
    topic, group = committed_group
    watched = cli("groups", "--describe", "--group", group, "--watch", "--interval", "0.05", "--iterations", "2")
    assert watched.code == 0, watched.err
    headings = [line for line in watched.lines() if line.startswith("Every 0.05 s, at ")]
    assert len(headings) == 2 and all(h.endswith("total lag 6 over 2 partitions") for h in headings)
    assert sum(1 for line in watched.lines() if line.split()[:2] == [group, topic]) == 4  # 2 rows, twice
    rows = [json.loads(line) for line in cli("groups", "--describe", "--group", group, "--watch", "--interval",
                                             "0.05", "--iterations", "3", "--output", "json").lines()]
    assert [r["lag"] for r in rows] == [RECORDS - 4, 0] * 3
    refused = cli("groups", "--describe", "--group", group, "--members", "--watch", "--iterations", "1")
    assert refused.code == 1 and "--watch shows offsets and lag" in refused.err


def test_describe_watch_redraws_in_place_on_a_terminal(cli, committed_group, monkeypatch):
    import io

    from rich.console import Console

    from odradek.cli import common, groups_cmd

    topic, group = committed_group
    screen = io.StringIO()
    monkeypatch.setattr(groups_cmd, "console", lambda: Console(file=screen, force_terminal=True, width=200))
    monkeypatch.setattr(common, "stdout_is_terminal", lambda: True)
    watched = cli("groups", "--describe", "--group", group, "--watch", "--interval", "0.05", "--iterations", "2")
    assert (watched.code, watched.out) == (0, "")
    drawn = screen.getvalue()
    assert drawn.count("total lag 6 over 2 partitions (Ctrl-C to stop)") >= 2 and "LOG-END-OFFSET" in drawn
    assert "\x1b[" in drawn  # the cursor moved back over the last drawing
