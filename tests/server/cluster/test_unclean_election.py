"""``unclean.leader.election.enable``: who may lead when no in-sync replica is alive.

Two brokers, one partition on both. The follower dies (kill -9) and leaves the ISR; the
leader takes more records alone; then the leader dies too, and only the old follower comes
back. Kafka's controller keeps the last ISR member in the state znode with no leader
(``leader: -1``, ``isr: [old leader]``).

- ``false`` (the default): the partition stays offline; the records are safe, and when the
  old leader returns it leads again with all of them.
- ``true``: the out-of-sync replica is elected (logged loudly), the records it never had are
  lost, and the old leader, back, truncates to it: the replicas end up identical.
"""

from __future__ import annotations

import time

import pytest
from confluent_kafka import Producer

from tests.server.cluster.cluster_clients import create_topic, read_partition
from tests.server.cluster.harness import SESSION_TIMEOUT_MS

pytestmark = pytest.mark.timeout(150)

TOPIC = "risky"
FAILOVER_S = SESSION_TIMEOUT_MS / 1000 + 10


def produce(bootstrap: str, values: list[bytes]) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 0, "message.timeout.ms": 20000})
    errors = []
    for v in values:
        producer.produce(TOPIC, value=v, partition=0, on_delivery=lambda err, _m: err and errors.append(err))
    assert producer.flush(30) == 0 and not errors, errors


@pytest.mark.parametrize("unclean", [False, True])
def test_no_in_sync_replica_alive(make_cluster, unclean):
    cluster = make_cluster({"unclean.leader.election.enable": str(unclean).lower()}).start([1, 2])
    create_topic(cluster.bootstrap, TOPIC, 1, 2, {"min.insync.replicas": "1"})
    cluster.wait_topic_ready(TOPIC, 1)
    cluster.wait_for_isr(TOPIC, 0, [1, 2])
    leader = cluster.leader(TOPIC, 0)
    follower = 3 - leader
    produce(cluster.bootstrap, [b"both-%d" % i for i in range(10)])

    cluster[follower].kill()
    cluster.wait_for_isr(TOPIC, 0, [leader], timeout=FAILOVER_S)
    produce(cluster[leader].bootstrap, [b"leader-only-%d" % i for i in range(10)])
    cluster[leader].kill()
    cluster.wait_unregistered(leader)

    cluster.restart(follower)
    if not unclean:
        cluster.wait_for_controller(timeout=FAILOVER_S)
        time.sleep(3)  # time enough for a (wrong) election
        state = cluster.partition_state(TOPIC, 0)
        assert state["leader"] == -1 and state["isr"] == [leader], state
        cluster.restart(leader)
        assert cluster.wait_for_leader(TOPIC, 0, timeout=FAILOVER_S) == leader
        cluster.wait_for_isr(TOPIC, 0, [1, 2], timeout=30)
        values = [v for _, v in read_partition(cluster.bootstrap, TOPIC, 0)]
        assert values == [b"both-%d" % i for i in range(10)] + [b"leader-only-%d" % i for i in range(10)]
    else:
        assert cluster.wait_for_leader(TOPIC, 0, timeout=FAILOVER_S) == follower
        assert cluster.isr(TOPIC, 0) == [follower]
        produce(cluster.bootstrap, [b"after-%d" % i for i in range(5)])
        cluster.restart(leader)
        cluster.wait_for_isr(TOPIC, 0, [1, 2], timeout=30)
        data = cluster.wait_replicas_identical(TOPIC, 0, [1, 2], timeout=30)
        assert b"leader-only-" not in data
        values = [v for _, v in read_partition(cluster.bootstrap, TOPIC, 0)]
        assert values == [b"both-%d" % i for i in range(10)] + [b"after-%d" % i for i in range(5)]
    cluster.wait_replicas_identical(TOPIC, 0, [1, 2], timeout=30)
