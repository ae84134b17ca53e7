"""``odradek share-groups`` (cli/share_groups_cmd.py, Kafka 4.2's kafka-share-groups.sh) against
a real broker while odradek's ShareConsumer holds a share group: list, describe (offsets,
members, state), reset-offsets refused while the member remains then executed once the group
is empty (read back), delete-offsets, delete; bad arguments refused in one line."""

from __future__ import annotations

import json

import pytest

from odradek.client import AdminClient, TopicPartition
from odradek.testing.broker import InProcessBroker
from odradek.testing.broker import test_config as broker_config
from tests.cli.conftest import BROKER_ID, run_cli
from tests.client.test_share_consumer import _PROPS, member, ready
from tests.server.group_clients import create_topic, produce, wait_for


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    """The CLI tests' broker (id 1000), with share-group heartbeats every 100 ms."""
    data = tmp_path_factory.mktemp("share-cli") / "data"
    props = broker_config(data, node_id=BROKER_ID)
    props.update(_PROPS)
    with InProcessBroker(data, props) as b:
        yield b


def cells(result) -> list[list[str]]:
    """The non-empty lines of a text report, split into columns."""
    return [line.split() for line in result.lines() if line.strip()]


def held_group(broker, topic: str, group: str):
    """A share consumer of ``group`` on ``topic`` (one partition) that has read and accepted
    three records."""
    create_topic(broker.bootstrap, topic, 1)
    consumer = member(broker, group, client_id="cli-share-member")
    consumer.subscribe([topic])
    ready(consumer, topic=topic)
    produce(broker.bootstrap, topic, [b"a", b"b", b"c"], partitions=1)
    got = []
    wait_for(lambda: len(got) >= 3, step=lambda: got.extend(consumer.poll(0.1)))
    assert list(consumer.commit_sync().values()) == [None]
    return consumer


def test_list_describe_reset_delete(cli, broker, topic_name):
    group = "sg-" + topic_name
    consumer = held_group(broker, topic_name, group)
    try:
        assert group in cli("share-groups", "--list").lines()
        listed = cells(cli("share-groups", "--list", "--state"))
        assert listed[0] == ["GROUP", "STATE"] and [group, "Stable"] in listed
        assert group not in cli("share-groups", "--list", "--state", "Empty").out

        with AdminClient(broker.bootstrap) as admin:
            known = admin.list_share_group_offsets(group)[TopicPartition(topic_name, 0)]
        # 0-2 accepted: the start offset moved past them, nothing left to deliver (KIP-1226 lag)
        assert (known.start_offset, known.lag) == (3, 0)
        offsets = cells(cli("share-groups", "--describe", "--group", group))
        assert offsets == [["GROUP", "TOPIC", "PARTITION", "START-OFFSET", "LAG"],
                           [group, topic_name, "0", "3", "0"]]
        verbose = cells(cli("share-groups", "--describe", "--group", group, "--offsets", "--verbose"))
        assert verbose[0] == ["GROUP", "TOPIC", "PARTITION", "LEADER-EPOCH", "START-OFFSET", "LAG"]

        (m,) = [json.loads(line) for line in
                cli("share-groups", "--describe", "--group", group, "--members", "--output", "json").lines()]
        assert m["member_id"] == consumer.member_id and m["client_id"] == "cli-share-member"
        assert m["partitions"] == [{"topic": topic_name, "partition": 0}]
        members = cells(cli("share-groups", "--describe", "--group", group, "--members"))
        assert members[0] == ["GROUP", "CONSUMER-ID", "HOST", "CLIENT-ID", "#PARTITIONS", "ASSIGNMENT"]
        assert members[1][0:2] == [group, consumer.member_id] and members[1][-2:] == ["1", f"{topic_name}:0"]

        state = cli("share-groups", "--describe", "--group", group, "--state", "--verbose")
        header, row = cells(state)
        assert header == ["GROUP", "COORDINATOR", "(ID)", "STATE", "GROUP-EPOCH", "ASSIGNMENT-EPOCH", "#MEMBERS"]
        assert row[0] == group and row[2] == f"({BROKER_ID})" and row[3] == "Stable" and row[-1] == "1"

        for view in ("--offsets", "--members", "--state"):  # the terminal's tables: the same columns
            table = cli("share-groups", "--describe", "--group", group, view, "--verbose", "--output", "table")
            assert table.code == 0 and group in table.out and ("MEMBER-EPOCH" in table.out) == (view == "--members")

        for mode in ("--execute", "--dry-run"):  # Kafka's tool refuses both while members remain
            refused = cli("share-groups", "--reset-offsets", "--group", group, "--topic", topic_name,
                          "--to-earliest", mode)
            assert (refused.code, refused.err) == (1, f"odradek share-groups: Share group '{group}' is not empty.\n")
    finally:
        consumer.close()

    with AdminClient(broker.bootstrap) as admin:
        wait_for(lambda: admin.describe_share_groups([group])[group].state == "Empty")
        tp = TopicPartition(topic_name, 0)
        empty = cli("share-groups", "--describe", "--group", group, "--members")
        assert empty.code == 0 and empty.out == "" and f"Share group '{group}' has no active members." in empty.err

        reset = cli("share-groups", "--reset-offsets", "--group", group, "--topic", f"{topic_name}:0",
                    "--to-offset", "1", "--execute")
        assert cells(reset) == [["GROUP", "TOPIC", "PARTITION", "NEW-OFFSET"], [group, topic_name, "0", "1"]]
        assert admin.list_share_group_offsets(group)[tp].start_offset == 1
        planned = cli("share-groups", "--reset-offsets", "--group", group, "--all-topics", "--to-earliest",
                      "--dry-run", "--output", "json")
        assert [json.loads(line)["new_offset"] for line in planned.lines()] == [0]
        assert admin.list_share_group_offsets(group)[tp].start_offset == 1  # a dry run changes nothing

        deleted = cli("share-groups", "--delete-offsets", "--group", group, "--topic", topic_name)
        assert cells(deleted) == [["TOPIC", "STATUS"], [topic_name, "Successful"]]
        assert tp not in admin.list_share_group_offsets(group)

        gone = cli("share-groups", "--delete", "--group", group)
        assert (gone.code, gone.out) == (0, f"Deletion of requested share groups ('{group}') was successful.\n")
        assert group not in admin.list_share_groups()


def test_unknown_groups_refused(cli):
    described = cli("share-groups", "--describe", "--group", "no-such-share-group")
    assert (described.code, described.err) == (
        1, "odradek share-groups: Share group 'no-such-share-group' does not exist.\n")
    deleted = cli("share-groups", "--delete", "--group", "no-such-share-group")
    assert deleted.code == 1
    assert ("* Group 'no-such-share-group' could not be deleted due to: "
            "Group 'no-such-share-group' is not a share group.") in deleted.lines()


@pytest.mark.parametrize("argv, message", [
    ((), "Command must include exactly one action"),
    (("--list", "--describe"), "Command must include exactly one action"),
    (("--describe",), "Option --describe takes one of these options: --group, --all-groups"),
    (("--describe", "--group", "g", "--members", "--state"), "takes at most one of these options"),
    (("--describe", "--group", "g", "--state", "Empty"), "does not take a value for --state"),
    (("--list", "--members"), "Option --members may be used with --describe only"),
    (("--list", "--group", "g"), "Option --group can't be used with option --list"),
    (("--delete",), "Option --delete takes the options --group or --all-groups"),
    (("--delete-offsets", "--group", "g"), "Option --delete-offsets takes the following options"),
    (("--reset-offsets", "--group", "g", "--topic", "t", "--to-earliest"), "takes the option: --execute or --dry-run"),
    (("--reset-offsets", "--group", "g", "--topic", "t", "--to-earliest", "--dry-run", "--execute"),
     "only accepts one of --execute and --dry-run"),
    (("--reset-offsets", "--group", "g", "--topic", "t", "--dry-run"), "requires one of the following scenarios"),
    (("--reset-offsets", "--group", "g", "--topic", "t", "--to-earliest", "--to-latest", "--dry-run"),
     "requires one of the following scenarios"),
    (("--reset-offsets", "--group", "g", "--to-earliest", "--dry-run"),
     "takes one of these options: --all-topics, --topic"),
    (("--describe", "--group", "g", "--topic", "t"), "Option --topic can't be used with option --describe"),
    (("--list", "--execute"), "does not take --dry-run or --execute"),
])
def test_bad_arguments_refused_in_one_line(argv, message):
    # checked before connecting: no broker listens on port 1
    result = run_cli("share-groups", "--bootstrap-server", "127.0.0.1:1", *argv)
    assert result.code == 1 and result.out == ""
    assert len(result.err.splitlines()) == 1 and result.err.startswith("odradek share-groups: ")
    assert message in result.err


def test_invalid_list_state_refused(cli):
    result = cli("share-groups", "--list", "--state", "Rebalancing")
    assert (result.code, result.err) == (
        1, "odradek share-groups: Invalid state list 'Rebalancing'. Valid states are: Empty, Stable, Dead\n")
