"""Controlled shutdown: SIGTERM to a broker moves its leaderships away before it exits.

Kafka's broker sends ControlledShutdown to the controller, which elects new leaders for the
partitions it leads (from the rest of the ISR) and takes it out of the ISR of the others;
only then does it stop. An idempotent acks=all producer running throughout sees no failed
send, and the records are all there afterwards.
"""

from __future__ import annotations

import time

import pytest

from tests.server.cluster.cluster_clients import VerifyingProducer, create_topic

pytestmark = pytest.mark.timeout(150)

BROKERS = [1, 2, 3]
TOPIC = "controlled"
PARTITIONS = 3


@pytest.mark.parametrize("which", ["leader", "controller"])
def test_sigterm_moves_leadership_first_and_no_send_fails(make_cluster, which):
    cluster = make_cluster().start(BROKERS)
    create_topic(cluster.bootstrap, TOPIC, PARTITIONS, 3, {"min.insync.replicas": "2"})
    cluster.wait_topic_ready(TOPIC, PARTITIONS)
    for p in range(PARTITIONS):
        cluster.wait_for_isr(TOPIC, p, BROKERS)
    controller = cluster.controller_id()
    leaders = {cluster.leader(TOPIC, p) for p in range(PARTITIONS)}
    if which == "controller":
        victim = controller
    else:
        victim = next(iter(sorted(leaders - {controller})), None) or next(b for b in BROKERS if b != controller)

    with VerifyingProducer(cluster.bootstrap, TOPIC, PARTITIONS) as producer:
        producer.wait_acked(100)
        began = time.monotonic()
        assert cluster[victim].terminate(timeout=30) == 0
        took = time.monotonic() - began
        # Read at once: these moved before the process exited, not after its session ended.
        states = {p: cluster.partition_state(TOPIC, p) for p in range(PARTITIONS)}
        assert all(s["leader"] != victim for s in states.values()), (victim, states)
        assert all(victim not in s["isr"] for s in states.values()), (victim, states)
        producer.wait_acked(producer.acked_count() + 100, timeout=15)
    assert producer.failed == [], f"failed sends during controlled shutdown: {producer.failed[:5]}"
    producer.verify(cluster.bootstrap)
    assert took < 20, f"controlled shutdown took {took:.1f} s"

    cluster.restart(victim)
    for p in range(PARTITIONS):
        cluster.wait_for_isr(TOPIC, p, BROKERS, timeout=30)
        cluster.wait_replicas_identical(TOPIC, p, BROKERS, timeout=30)
