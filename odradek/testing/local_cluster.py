"""The test-facing side of odradek/server/local_cluster/: `QUICK_PROPS`, the broker configs
that make a local cluster's failures quick to see and heal, and the names tests use with it.

`LocalCluster` itself (and its ZooKeeper and broker processes) lives in the server package,
since ``odradek cluster`` runs it too; this module re-exports it for tests and the
``odradek_cluster`` fixture.
"""

from __future__ import annotations

from odradek.server.local_cluster.local_cluster import ClusterStartError, LocalCluster, wait_until

__all__ = ["QUICK_PROPS", "ClusterStartError", "LocalCluster", "wait_until"]

# Broker configs (Kafka's names) that make failures quick to see and to heal, for tests: a
# killed broker's session ends in 4 s (Kafka: 18 s), a lagging follower leaves the ISR after
# 3 s (30 s), a follower's fetch waits at most 200 ms (500 ms) and retries after 200 ms (1 s),
# the high watermark is checkpointed every second (5 s), controlled shutdown retries after
# 500 ms (5 s); groups start at once, and the internal topics have 3 partitions (50).
QUICK_PROPS = {
    "zookeeper.session.timeout.ms": "4000",
    "zookeeper.connection.timeout.ms": "10000",
    "replica.lag.time.max.ms": "3000",
    "replica.fetch.wait.max.ms": "200",
    "replica.fetch.backoff.ms": "200",
    "replica.high.watermark.checkpoint.interval.ms": "1000",
    "controlled.shutdown.max.retries": "3",
    "controlled.shutdown.retry.backoff.ms": "500",
    "group.initial.rebalance.delay.ms": "0",
    "offsets.topic.num.partitions": "3",
    "transaction.state.log.num.partitions": "3",
}
