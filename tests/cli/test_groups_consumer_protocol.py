"""``odradek groups`` and KIP-848 consumer groups: ``--list --type`` (Kafka 4's GROUP TYPE
[STATE] listing and its filter) and ``--describe`` through ConsumerGroupDescribe (group and
member epochs, current and target assignments), a classic group still described as before."""

from __future__ import annotations

import json
import time

import pytest

from odradek.client import AdminClient, Consumer, NewTopic


@pytest.fixture(scope="module")
def groups(broker):
    """A consumer group ``cg`` with one live odradek member owning both partitions of ``kt``,
    and a classic group ``classic-g`` with one live classic member."""
    with AdminClient(broker.bootstrap) as admin:
        admin.create_topics([NewTopic("kt", 2, 1)])
    modern = Consumer(broker.bootstrap, group_id="cg", group_protocol="consumer", client_id="modern-client")
    classic = Consumer(broker.bootstrap, group_id="classic-g")
    try:
        modern.subscribe(["kt"])
        classic.subscribe(["kt"])
        deadline = time.monotonic() + 30
        while len(modern.assignment()) < 2 or not classic.assignment():
            assert time.monotonic() < deadline, "the members got no assignment"
            modern.poll(50)
            classic.poll(50)
        modern.poll(300)  # the acknowledgement goes out
        yield
    finally:
        modern.close()
        classic.close()


def test_list_type_shows_and_filters_group_types(cli, groups):
    lines = cli("groups", "--list", "--type", "--output", "text").lines()
    assert lines[0].split() == ["GROUP", "TYPE"]
    rows = {line.split()[0]: line.split()[1:] for line in lines[1:]}
    assert rows["cg"] == ["Consumer"] and rows["classic-g"] == ["Classic"]
    # Kafka's "%-25s %-20s": the longest id (at least 15) plus 10, then one blank
    assert lines[1].index("Consumer" if lines[1].startswith("cg") else "Classic") == 26
    only = cli("groups", "--list", "--type", "consumer", "--state", "--output", "text").lines()
    assert only[0].split() == ["GROUP", "TYPE", "STATE"]
    assert [line.split()[:2] for line in only[1:]] == [["cg", "Consumer"]]
    assert cli("groups", "--list", "--type", "eager").code != 0


def test_describe_members_of_a_consumer_group_shows_epochs_and_assignments(cli, groups):
    out = cli("groups", "--describe", "--group", "cg", "--members", "--verbose", "--output", "text").lines()
    assert out[1].split() == ["GROUP", "CONSUMER-ID", "HOST", "CLIENT-ID", "#PARTITIONS", "CURRENT-EPOCH",
                              "CURRENT-ASSIGNMENT", "TARGET-EPOCH", "TARGET-ASSIGNMENT"]
    row = out[2].split()
    assert row[0] == "cg" and row[3] == "modern-client" and row[4] == "2"
    assert int(row[5]) >= 1 and row[6] == "kt(0,1)" and int(row[7]) >= 1 and row[8] == "kt(0,1)"
    members = [json.loads(line) for line in
               cli("groups", "--describe", "--group", "cg", "--members", "--output", "json").lines()]
    assert members[0]["member_epoch"] >= 1 and len(members[0]["target_partitions"]) == 2
    assert len(members[0]["member_id"]) == 22  # the member's own id (KIP-1082)


def test_describe_state_of_a_consumer_group_and_of_a_classic_one(cli, groups):
    out = cli("groups", "--describe", "--group", "cg", "--state", "--verbose", "--output", "text").lines()
    assert out[1].split() == ["GROUP", "COORDINATOR", "(ID)", "ASSIGNMENT-STRATEGY", "STATE", "GROUP-EPOCH",
                              "TARGET-ASSIGNMENT-EPOCH", "#MEMBERS"]
    assert out[2].split()[-1] == "1"
    state = json.loads(cli("groups", "--describe", "--group", "cg", "--state", "--output", "json").out)
    assert (state["type"], state["members"]) == ("consumer", 1) and state["group_epoch"] >= 1
    classic = json.loads(cli("groups", "--describe", "--group", "classic-g", "--state", "--output", "json").out)
    assert (classic["type"], classic["protocol_type"], classic["members"]) == ("classic", "consumer", 1)
    plain = cli("groups", "--describe", "--group", "classic-g", "--state", "--verbose", "--output", "text").lines()
    assert "GROUP-EPOCH" not in plain[1]
