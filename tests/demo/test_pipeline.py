"""The demo on a cluster (``odradek demo --brokers N``): its own ZooKeeper and brokers, and
topics with min(3, brokers) replicas. The Spark part of the pipeline is not run here."""

from __future__ import annotations

import pytest

from odradek.client import AdminClient
from odradek.demo import streaming_job
from odradek.demo.activity import PAGE_VIEWS, SEARCHES
from odradek.demo.pipeline import DemoConfig, create_topics, start_brokers
from odradek.server.local_cluster.zookeeper_server import zookeeper_installed

pytestmark = pytest.mark.timeout(120)
TOPICS = [PAGE_VIEWS, SEARCHES, streaming_job.PAGE_VIEW_COUNTS, streaming_job.MEMBER_VISITS]


def _replica_counts(bootstrap: str) -> dict[str, set[int]]:
    with AdminClient(bootstrap) as admin:
        described = admin.describe_topics(TOPICS)
    return {name: {len(p.replicas) for p in topic.partitions} for name, topic in described.items()}


@pytest.mark.skipif(not zookeeper_installed(), reason="ZooKeeper is not installed (scripts/setup.sh)")
def test_brokers_2_starts_a_cluster_of_its_own_whose_topics_have_2_replicas(tmp_path):
    cluster = start_brokers(tmp_path, DemoConfig(brokers=2, partitions=2))
    try:
        assert sorted(cluster.nodes) == [1, 2] and (tmp_path / "cluster" / "zookeeper").is_dir()
        create_topics(cluster.bootstrap, 2)
        assert _replica_counts(cluster.bootstrap) == {name: {2} for name in TOPICS}
        # Topics created with the broker's default (the Spark sink's log) are replicated too.
        assert cluster[1].props["default.replication.factor"] == "2"
    finally:
        statuses = cluster.stop()
    assert all(status == 0 for name, status in statuses.items() if name != "zookeeper"), statuses


@pytest.mark.odradek_cluster_config(brokers=4)
def test_topics_get_at_most_3_replicas(odradek_cluster):
    create_topics(odradek_cluster.bootstrap, 2)
    assert _replica_counts(odradek_cluster.bootstrap) == {name: {3} for name in TOPICS}
