"""Mirroring into a replicated cluster (three broker processes on ZooKeeper): target topics
get the requested replication factor, and a target broker killed (kill -9) while the stream
is copied costs nothing: in the end the target holds every source record once."""

from __future__ import annotations

import pytest

from odradek.client import AdminClient, NewTopic
from odradek.mirror import MirrorConfig
from odradek.testing.broker import InProcessBroker
from tests.mirror.mirror_harness import (
    LiveProducer,
    MirrorThread,
    committed_positions,
    expected_partitions,
    produce,
    read_partitions,
    wait_caught_up,
)

pytestmark = pytest.mark.timeout(180)

TOPIC = "replicated-orders"
GROUP = "to-cluster"
PARTITIONS = 3


@pytest.mark.odradek_cluster_config(brokers=3, min_insync_replicas=2)
def test_mirror_into_a_replicated_cluster_survives_a_target_broker_kill(odradek_cluster, tmp_path):
    target = odradek_cluster.bootstrap
    with InProcessBroker(tmp_path / "source") as source:
        with AdminClient(source.bootstrap) as admin:
            admin.create_topics([NewTopic(TOPIC, PARTITIONS, 1)])
        produce(source.bootstrap, TOPIC, 0, 1000, PARTITIONS)
        config = MirrorConfig(source.bootstrap, target, TOPIC, group_id=GROUP, replication_factor=3,
                              commit_interval_ms=100, reporting_interval_ms=500, refresh_topics_interval_s=5)
        live = LiveProducer(source.bootstrap, TOPIC, 1000, 3000, PARTITIONS, burst=100)
        with MirrorThread(config) as mirror:
            wait_caught_up(source.bootstrap, target, [TOPIC], GROUP, check=lambda: _alive(mirror))
            live.start()
            victim = odradek_cluster.leader(TOPIC, 0)
            odradek_cluster.kill(victim)
            odradek_cluster.wait_for_leader(TOPIC, 0, other_than=victim)
            live.finish()
            wait_caught_up(source.bootstrap, target, [TOPIC], GROUP, check=lambda: _alive(mirror))
            progress = mirror.stop()
        source_records = read_partitions(source.bootstrap, TOPIC)

    assert source_records == expected_partitions(0, 3000, PARTITIONS)
    assert read_partitions(target, TOPIC) == source_records
    assert progress.topics()[TOPIC].lag == 0 and progress.copied == 3000  # committed records only
    with AdminClient(target) as admin:
        partitions = admin.describe_topics([TOPIC])[TOPIC].partitions
    assert [len(p.replicas) for p in partitions] == [3] * PARTITIONS
    assert sum(committed_positions(target, GROUP).values()) == 3000


def _alive(mirror: MirrorThread) -> None:
    assert mirror.thread.is_alive(), f"the mirror stopped: {mirror.error!r}"
