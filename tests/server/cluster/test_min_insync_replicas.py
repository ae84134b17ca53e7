"""``min.insync.replicas``: an acks=all produce is refused with NOT_ENOUGH_REPLICAS while the
ISR is smaller, and accepted again once the ISR has grown back.

Two brokers, one partition with both as replicas and ``min.insync.replicas=2``. The follower
is paused (SIGSTOP) with a ZooKeeper session long enough to outlast the pause (10 s, the most
the test server's tickTime of 500 ms allows), so it is the leader that shrinks the ISR (the follower has not caught up for ``replica.lag.time.max.ms``),
made durable through the controller before it is used; resumed, the follower catches up and
the leader expands the ISR again. acks=1 keeps working throughout.
"""

from __future__ import annotations

import pytest
from kafka import KafkaProducer
from kafka.errors import NotEnoughReplicasError

from tests.server.cluster.cluster_clients import create_topic

pytestmark = pytest.mark.timeout(120)

TOPIC = "guarded"


def send(bootstrap: str, acks, value: bytes):
    producer = KafkaProducer(bootstrap_servers=bootstrap, acks=acks, retries=0, request_timeout_ms=10000,
                             max_block_ms=10000)
    try:
        return producer.send(TOPIC, value, partition=0).get(timeout=15)
    finally:
        producer.close(5)


def test_acks_all_is_refused_below_min_insync_replicas(make_cluster):
    cluster = make_cluster({"zookeeper.session.timeout.ms": "10000", "replica.lag.time.max.ms": "2000"})
    cluster.start([1, 2])
    create_topic(cluster.bootstrap, TOPIC, 1, 2, {"min.insync.replicas": "2"})
    cluster.wait_topic_ready(TOPIC, 1)
    cluster.wait_for_isr(TOPIC, 0, [1, 2])
    leader = cluster.leader(TOPIC, 0)
    follower = 3 - leader
    assert send(cluster.bootstrap, "all", b"before").offset == 0

    cluster[follower].pause()
    cluster.wait_for_isr(TOPIC, 0, [leader], timeout=20)
    with pytest.raises(NotEnoughReplicasError):
        send(cluster[leader].bootstrap, "all", b"refused")
    assert send(cluster[leader].bootstrap, 1, b"acks-1").offset == 1

    cluster[follower].resume()
    cluster.wait_for_isr(TOPIC, 0, [1, 2], timeout=20)
    assert send(cluster.bootstrap, "all", b"after").offset == 2
    data = cluster.wait_replicas_identical(TOPIC, 0, [1, 2], timeout=20)
    assert b"refused" not in data
