"""The overview's and the topics page's counts over a made-up cluster of three brokers, one of
them gone: under-replicated and offline partitions, sizes counted once per partition, and
refused log directories."""

from __future__ import annotations

import asyncio
import uuid
from types import SimpleNamespace

from odradek.client.admin_log_dirs import LogDirDescription, ReplicaInfo
from odradek.client.admin_types import TopicDescription
from odradek.client.errors import BrokerError
from odradek.client.metadata import BrokerInfo, PartitionInfo
from odradek.client.topic_partition import TopicPartition
from odradek.console import cluster_view, groups_view, topics_view
from odradek.console.samples import Samples
from odradek.protocol.generated.error_codes import ErrorCode

BROKERS = {1: BrokerInfo(1, "a", 9092), 2: BrokerInfo(2, "b", 9092, "rack-b")}  # broker 3 is gone
PARTITIONS = (
    PartitionInfo("t", 0, 1, 0, (1, 2), (1, 2)),      # healthy
    PartitionInfo("t", 1, 2, 0, (2, 3), (2,)),        # under-replicated: 3 is out of the ISR
    PartitionInfo("t", 2, 3, 0, (3,), (3,)),          # offline: its leader 3 is not live
    PartitionInfo("t", 3, -1, 0, (3,), ()),           # offline and under-replicated: no leader
)


class FakeAdmin:
    def __init__(self, log_dirs_refused: bool = False) -> None:
        self.cluster = SimpleNamespace(metadata=SimpleNamespace(brokers=BROKERS, controller_id=2, cluster_id="c1"))
        self.log_dirs_refused = log_dirs_refused

    async def describe_topics(self, names=None):
        return {"t": TopicDescription("t", uuid.uuid4(), False, PARTITIONS)}

    async def describe_log_dirs(self, broker_ids):
        if self.log_dirs_refused:
            raise BrokerError(ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
        replicas = {1: {TopicPartition("t", 0): ReplicaInfo(100, 0, False)},
                    2: {TopicPartition("t", 0): ReplicaInfo(100, 0, False), TopicPartition("t", 1): ReplicaInfo(30, 0, False),
                        TopicPartition("t", 9): ReplicaInfo(7, 0, True)}}
        return {b: {"/data": LogDirDescription(None, replicas[b], 1000, 500)} for b in broker_ids}


def test_overview_counts_under_replicated_and_offline_partitions():
    view = asyncio.run(cluster_view.overview(FakeAdmin(), Samples()))
    assert (view["controller"], view["partitions"], view["under_replicated"], view["offline"]) == (2, 4, 2, 2)
    assert [(b["id"], b["controller"], b["rack"], b["offline"]) for b in view["brokers"]] == [
        (1, False, None, False), (2, True, "rack-b", False), (3, False, None, True)]  # 3: named by replicas


def test_brokers_lead_hold_and_use_their_directories():
    view = asyncio.run(cluster_view.brokers(FakeAdmin()))
    rows = {b["id"]: b for b in view["brokers"]}
    assert (rows[1]["leaders"], rows[1]["replicas"], rows[2]["leaders"], rows[2]["replicas"]) == (1, 1, 1, 2)
    assert rows[2]["dirs"] == [{"path": "/data", "size": 137, "total_bytes": 1000, "usable_bytes": 500, "error": None}]


def test_a_topic_size_is_its_leaders_and_unknown_while_a_leader_is_away():
    sizes = cluster_view.replica_sizes(asyncio.run(FakeAdmin().describe_log_dirs([1, 2])))
    assert sizes[(TopicPartition("t", 0), 1)] == 100 and (TopicPartition("t", 9), 2) not in sizes  # future replica
    assert topics_view._topic_size(PARTITIONS[:2], sizes) == 130
    assert topics_view._topic_size(PARTITIONS, sizes) is None


def test_refused_log_directories_leave_the_rest_of_the_page():
    view = asyncio.run(cluster_view.brokers(FakeAdmin(log_dirs_refused=True)))
    assert view["dirs_error"] == "CLUSTER_AUTHORIZATION_FAILED"
    assert [b["dirs"] for b in view["brokers"]] == [[], [], []]


def test_lag_is_never_negative_and_unknown_without_a_commit():
    assert groups_view.lag(4, 10) == 6
    assert groups_view.lag(12, 10) == 0
    assert groups_view.lag(None, 10) is None


def test_a_broker_that_is_down_stays_listed_as_offline():
    """Broker 3 is named in replica sets but not in Metadata: listed, offline; a broker seen
    live before stays listed, offline, once Metadata drops it."""
    admin, seen = FakeAdmin(), {}
    view = asyncio.run(cluster_view.brokers(admin, seen))
    assert [(b["id"], b["offline"]) for b in view["brokers"]] == [(1, False), (2, False), (3, True)]
    assert view["brokers"][2]["replicas"] == 3 and view["brokers"][2]["dirs"] == []
    admin.cluster.metadata.brokers = {2: BROKERS[2]}  # broker 1 goes down
    view = asyncio.run(cluster_view.overview(admin, Samples(), seen))
    rows = {b["id"]: b for b in view["brokers"]}
    assert (rows[1]["offline"], rows[1]["host"], rows[2]["offline"], view["offline_brokers"]) == (True, "a", False, 2)


class InternalTopicsAdmin(FakeAdmin):
    async def describe_topics(self, names=None):
        return {"t": TopicDescription("t", uuid.uuid4(), False, PARTITIONS[:2]),
                "__consumer_offsets": TopicDescription("__consumer_offsets", uuid.uuid4(), True, (
                    PartitionInfo("__consumer_offsets", 0, 1, 0, (1,), (1,)),
                    PartitionInfo("__consumer_offsets", 1, 1, 0, (1,), (1,))))}


def test_internal_topics_counted_apart_from_topics_and_their_partitions():
    view = asyncio.run(cluster_view.overview(InternalTopicsAdmin(), Samples()))
    assert (view["topics"], view["partitions"], view["internal_topics"], view["internal_partitions"]) == (1, 2, 1, 2)
