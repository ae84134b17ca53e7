"""``odradek topics --describe`` with kafka-topics.sh's replication reports: the rules
(`partition_reports`, every case) and, on broker 1000, the partition lines they select. The
reports on a cluster with a broker down are in tests/server/cluster/test_leader_election.py."""

from __future__ import annotations

import json

import pytest

from odradek.cli.topics_cmd import partition_reports
from odradek.client.metadata import PartitionInfo


def part(leader, replicas, isr):
    return PartitionInfo("t", 0, leader, 0, tuple(replicas), tuple(isr))


@pytest.mark.parametrize("partition, min_isr, expected", [
    (part(1, [1, 2, 3], [1, 2, 3]), 2, set()),
    (part(1, [1, 2, 3], [1, 2]), 2, {"under_replicated_partitions", "at_min_isr_partitions"}),
    (part(1, [1, 2, 3], [1]), 2, {"under_replicated_partitions", "under_min_isr_partitions"}),
    (part(-1, [1, 2], [1]), 1, {"under_replicated_partitions", "unavailable_partitions",
                                "under_min_isr_partitions", "at_min_isr_partitions"}),
    (part(3, [3, 2], [3, 2]), 1, {"unavailable_partitions"}),  # leader 3 not live
    (part(1, [1], [1]), 1, {"at_min_isr_partitions"}),
])
def test_partition_reports(partition, min_isr, expected):
    assert partition_reports(partition, {1, 2}, min_isr) == expected


def test_under_replicated_counts_the_replicas_a_reassignment_keeps():
    from odradek.client.admin_reassignments import PartitionReassignment

    # moving [1, 2] to [2, 3]: replicas [2, 3, 1] with 3 adding, 1 removing; the ISR [1, 2]
    # is whole for a replication factor of 2 while 3 catches up
    moving = PartitionReassignment(replicas=(2, 3, 1), adding_replicas=(3,), removing_replicas=(1,))
    p = part(1, [2, 3, 1], [1, 2])
    assert "under_replicated_partitions" not in partition_reports(p, {1, 2, 3}, 1, moving)
    assert "under_replicated_partitions" in partition_reports(p, {1, 2, 3}, 1, None)
    assert "under_replicated_partitions" in partition_reports(part(1, [2, 3, 1], [1]), {1, 2, 3}, 1, moving)


def test_reports_on_one_broker(cli, topic_name):
    strict, plain = topic_name + "-strict", topic_name + "-plain"
    assert cli("topics", "--create", "--topic", strict, "--partitions", "2",
               "--config", "min.insync.replicas=2").code == 0
    assert cli("topics", "--create", "--topic", plain, "--partitions", "1").code == 0
    pattern = topic_name + "-.*"

    def selected(*reports):
        result = cli("topics", "--describe", "--topic", pattern, "--output", "json", *reports)
        assert result.code == 0, result.err
        return sorted((d["topic"], d["partition"]) for d in map(json.loads, result.lines()))

    assert selected("--under-replicated-partitions") == []
    assert selected("--unavailable-partitions") == []
    assert selected("--under-min-isr-partitions") == [(strict, 0), (strict, 1)]
    assert selected("--at-min-isr-partitions") == [(plain, 0)]
    assert selected("--under-min-isr-partitions", "--at-min-isr-partitions") == [(plain, 0), (strict, 0), (strict, 1)]
    text = cli("topics", "--describe", "--topic", pattern, "--output", "text", "--at-min-isr-partitions")
    assert text.lines() == [f"\tTopic: {plain}\tPartition: 0\tLeader: 1000\tReplicas: 1000\tIsr: 1000"]
    table = cli("topics", "--describe", "--topic", pattern, "--under-min-isr-partitions")
    assert table.code == 0 and strict in table.out and plain not in table.out
    nothing = cli("topics", "--describe", "--topic", pattern, "--under-replicated-partitions")
    assert (nothing.code, nothing.out) == (0, "")  # no empty table: kafka-topics.sh prints nothing


def test_reports_go_with_describe_only(cli):
    result = cli("topics", "--list", "--under-min-isr-partitions")
    assert (result.code, result.err) == (1, "odradek topics: --under-min-isr-partitions goes with --describe\n")
