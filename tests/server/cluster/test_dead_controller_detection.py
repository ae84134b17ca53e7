"""A controller whose process is gone is replaced before its ZooKeeper session expires, and its
partitions get new leaders meanwhile; a stopped one (SIGSTOP) keeps its seat
(odradek/controller/controller_liveness.py).

Three brokers with the longest session the test ZooKeeper grants (10 s), so the kill test can
only pass through the other brokers' detection: a new controller must be elected, and the
victim's partitions led by another ISR member, while the victim's registration (the same
czxid) is still in ZooKeeper. librdkafka's idempotent acks=all producer writes throughout, and
every acknowledged record must be there afterwards.

The pause test stops the controller for a few seconds, well inside its session, and destroys
every connection to it from this host (``ss -K``, as root): the other brokers then probe it,
its kernel still accepts connections into the listener's backlog, so it must stay the
controller at the same controller epoch.
"""

from __future__ import annotations

import time

import pytest

from tests.server.cluster.cluster_clients import VerifyingProducer
from tests.server.cluster.test_dead_leader_detection import (
    PAUSE_S,
    PARTITIONS,
    SESSION_MS,
    TOPIC,
    drop_connections_to,
    start,
)

pytestmark = pytest.mark.timeout(150)


def test_a_killed_controller_is_replaced_before_its_session_expires(make_cluster):
    cluster = start(make_cluster)
    victim = cluster.wait_for_controller()
    epoch = cluster.controller_epoch()
    led = [p for p in range(PARTITIONS) if cluster.leader(TOPIC, p) == victim]
    assert led, "each broker leads one partition"
    registration = cluster.broker_epoch(victim)
    with VerifyingProducer(cluster.bootstrap, TOPIC, PARTITIONS, rate=100) as writer:
        writer.wait_acked(50)
        cluster[victim].kill()
        cluster.wait_for_controller(other_than=victim, epoch_above=epoch, timeout=SESSION_MS / 1000 + 15)
        for p in led:
            new = cluster.wait_for_leader(TOPIC, p, other_than=victim, timeout=SESSION_MS / 1000 + 15)
            # the session has not expired: the znode the victim registered is still there
            assert cluster.broker_epoch(victim) == registration, "moved only when the session expired"
            assert new in cluster.isr(TOPIC, p) and victim not in cluster.isr(TOPIC, p)
        writer.wait_acked(writer.acked_count() + 50, timeout=30)
    writer.verify(cluster.bootstrap)
    assert not writer.failed


def test_a_stopped_controller_keeps_its_seat(make_cluster):
    cluster = start(make_cluster)
    victim = cluster.wait_for_controller()
    epoch = cluster.controller_epoch()
    cluster[victim].pause()
    try:
        drop_connections_to(cluster[victim].port)  # the other brokers' watches too: they probe
        deadline = time.monotonic() + PAUSE_S
        while time.monotonic() < deadline:
            assert (cluster.controller_id(), cluster.controller_epoch()) == (victim, epoch)
            time.sleep(0.2)
    finally:
        cluster[victim].resume()
    time.sleep(1.0)
    assert (cluster.controller_id(), cluster.controller_epoch()) == (victim, epoch)
