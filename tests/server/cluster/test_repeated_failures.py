"""Failure after failure under load: the issue's "kill any broker at any moment".

Three brokers, three partitions of three replicas, ``min.insync.replicas=2``, an idempotent
acks=all `VerifyingProducer` running throughout. Round after round one broker goes down (the
controller, a leader, any broker; by kill -9 or SIGTERM), the producer must make progress
without it, and it comes back and rejoins every ISR before the next round. Afterwards every
acknowledged record is present exactly once and in order, and all replicas are identical.
"""

from __future__ import annotations

import random

import pytest

from tests.server.cluster.cluster_clients import VerifyingProducer, create_topic
from tests.server.cluster.harness import SESSION_TIMEOUT_MS

pytestmark = pytest.mark.timeout(240)

BROKERS = [1, 2, 3]
TOPIC = "battered"
PARTITIONS = 3
FAILOVER_S = SESSION_TIMEOUT_MS / 1000 + 10


def pick(cluster, who: str, rng: random.Random) -> int:
    if who == "controller":
        return cluster.controller_id()
    if who == "leader":
        return cluster.leader(TOPIC, rng.randrange(PARTITIONS))
    return rng.choice(BROKERS)


@pytest.mark.parametrize("seed", [18])
def test_a_broker_down_round_after_round(make_cluster, seed):
    rng = random.Random(seed)
    cluster = make_cluster().start(BROKERS)
    create_topic(cluster.bootstrap, TOPIC, PARTITIONS, 3, {"min.insync.replicas": "2"})
    cluster.wait_topic_ready(TOPIC, PARTITIONS)
    for p in range(PARTITIONS):
        cluster.wait_for_isr(TOPIC, p, BROKERS)

    rounds = [("controller", "kill"), ("leader", "kill"), ("any", "terminate"), ("leader", "kill")]
    with VerifyingProducer(cluster.bootstrap, TOPIC, PARTITIONS) as producer:
        producer.wait_acked(100)
        for who, how in rounds:
            victim = pick(cluster, who, rng)
            led = [p for p in range(PARTITIONS) if cluster.leader(TOPIC, p) == victim]
            before = producer.acked_count()
            if how == "kill":
                cluster[victim].kill()
            else:
                assert cluster[victim].terminate(timeout=30) == 0
            for p in led:
                cluster.wait_for_leader(TOPIC, p, other_than=victim, timeout=FAILOVER_S)
            cluster.wait_for_controller(other_than=victim, timeout=FAILOVER_S)
            producer.wait_acked(before + 50, timeout=FAILOVER_S)
            cluster.restart(victim)
            for p in range(PARTITIONS):
                cluster.wait_for_isr(TOPIC, p, BROKERS, timeout=30)
    for p in range(PARTITIONS):
        cluster.wait_for_isr(TOPIC, p, BROKERS, timeout=30)
    producer.verify(cluster.bootstrap)
    for p in range(PARTITIONS):
        cluster.wait_replicas_identical(TOPIC, p, BROKERS, timeout=30)
