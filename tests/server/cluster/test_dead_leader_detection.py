"""A leader whose process is gone loses its partitions before its ZooKeeper session expires;
a stopped one (SIGSTOP) does not (odradek/controller/broker_liveness.py).

Three brokers, the longest session the test ZooKeeper grants (10 s: its tickTime of 500 ms
times 20), so the kill test can only pass through the controller's detection: the victim's
partitions must be led by another ISR member while the victim's registration (the same
czxid) is still in ZooKeeper, and no live broker may name the victim in Metadata any more
(the controller's UpdateMetadata leaves it out: a client must not be sent there). Once the
session expires and the znode goes, nothing changes again; restarted (a new registration), the victim rejoins every ISR. The producer is
librdkafka's idempotent acks=all one with the default metadata refresh interval, so it finds
the new leaders through its own refresh on the errors and disconnects, and every acknowledged
record must be there afterwards.

The pause test stops a leader for a few seconds, well inside its session, and (where
``ss -K`` can, as root) destroys every connection to it from this host, the controller's
included: the controller then probes the stopped broker, whose kernel still accepts
connections into its listener's backlog, so it must keep leading (same leader epoch) and
serve again once resumed.
"""

from __future__ import annotations

import shutil
import subprocess
import time

import pytest

from tests.server.cluster.cluster_clients import VerifyingProducer, create_topic, metadata_from
from tests.server.cluster.harness import wait_until

pytestmark = pytest.mark.timeout(150)

BROKERS = [1, 2, 3]
TOPIC = "detect"
PARTITIONS = 3  # the first replicas rotate: each broker leads one partition
SESSION_MS = 10000
PROPS = {"zookeeper.session.timeout.ms": str(SESSION_MS), "replica.lag.time.max.ms": "2000"}
PAUSE_S = 3.0  # a third of the session


def start(make_cluster):
    cluster = make_cluster(PROPS).start(BROKERS)
    create_topic(cluster.bootstrap, TOPIC, PARTITIONS, 3, {"min.insync.replicas": "2"})
    cluster.wait_topic_ready(TOPIC, PARTITIONS)
    for p in range(PARTITIONS):
        cluster.wait_for_isr(TOPIC, p, BROKERS)
    return cluster


def leader_not_controller(cluster) -> tuple[int, list[int]]:
    """A broker that is not the controller, and the partitions it leads (at least one)."""
    controller = cluster.wait_for_controller()
    leaders = {p: cluster.leader(TOPIC, p) for p in range(PARTITIONS)}
    victim = next(b for b in sorted(set(leaders.values())) if b != controller)
    return victim, [p for p, leader in leaders.items() if leader == victim]


def producer(cluster) -> VerifyingProducer:
    # the default refresh interval: the client must find new leaders by itself
    return VerifyingProducer(cluster.bootstrap, TOPIC, PARTITIONS, rate=100,
                             **{"topic.metadata.refresh.interval.ms": 300000})


def drop_connections_to(port: int) -> bool:
    """Destroy every TCP connection to 127.0.0.1:``port`` (``ss -K``: root, and a kernel with
    socket destroy); whether it could."""
    if shutil.which("ss") is None:
        return False
    done = subprocess.run(["ss", "-K", "dst", "127.0.0.1", "dport", "=", f":{port}"],
                          capture_output=True, text=True, timeout=10)
    return done.returncode == 0 and f":{port}" in done.stdout


def test_a_killed_leader_loses_its_partitions_before_its_session_expires(make_cluster):
    cluster = start(make_cluster)
    victim, led = leader_not_controller(cluster)
    registration = cluster.broker_epoch(victim)
    with producer(cluster) as writer:
        writer.wait_acked(50)
        cluster[victim].kill()
        for p in led:
            new = cluster.wait_for_leader(TOPIC, p, other_than=victim, timeout=SESSION_MS / 1000 + 15)
            # the session has not expired: the znode the victim registered is still there
            assert cluster.broker_epoch(victim) == registration, "moved only when the session expired"
            assert new in cluster.partition_state(TOPIC, p)["isr"] and victim not in cluster.isr(TOPIC, p)
        for b in set(BROKERS) - {victim}:  # clients are no longer sent to it (kafka-python would try)
            wait_until(lambda b=b: victim not in [n.node_id for n in metadata_from(cluster[b].bootstrap).brokers], 10,
                       f"broker {b}'s Metadata to leave out the failed broker {victim}")
        assert cluster.broker_epoch(victim) == registration
        before = writer.acked_count()
        writer.wait_acked(before + 50, timeout=30)
        states = {p: cluster.partition_state(TOPIC, p) for p in led}
        cluster.wait_unregistered(victim, timeout=SESSION_MS / 1000 + 10)  # the session expires: nothing moves again
        time.sleep(0.5)
        assert {p: cluster.partition_state(TOPIC, p) for p in led} == states
        cluster.restart(victim)  # a new registration ends the fence: it follows and rejoins
        for p in range(PARTITIONS):
            cluster.wait_for_isr(TOPIC, p, BROKERS, timeout=30)
        writer.wait_acked(writer.acked_count() + 50, timeout=30)
    writer.verify(cluster.bootstrap)
    assert not writer.failed


def test_a_stopped_leader_is_not_deposed(make_cluster):
    cluster = start(make_cluster)
    victim, led = leader_not_controller(cluster)
    epochs = {p: cluster.partition_state(TOPIC, p)["leader_epoch"] for p in led}
    with producer(cluster) as writer:
        writer.wait_acked(50)
        cluster[victim].pause()
        try:
            drop_connections_to(cluster[victim].port)  # the controller's too: it probes
            deadline = time.monotonic() + PAUSE_S
            while time.monotonic() < deadline:
                for p in led:
                    state = cluster.partition_state(TOPIC, p)
                    assert (state["leader"], state["leader_epoch"]) == (victim, epochs[p]), state
                time.sleep(0.2)
        finally:
            cluster[victim].resume()
        writer.wait_acked(writer.acked_count() + 50, timeout=30)
        for p in led:
            state = cluster.partition_state(TOPIC, p)
            assert (state["leader"], state["leader_epoch"]) == (victim, epochs[p]), state
    wait_until(lambda: cluster.broker_epoch(victim) is not None, 5, "the victim registered")
    writer.verify(cluster.bootstrap)
    assert not writer.failed
