"""Controller election through ZooKeeper, as Kafka's ZooKeeper mode does it.

One broker holds the ephemeral ``/controller`` (``{"brokerid": id, ...}``) and every election
bumps ``/controller_epoch``. When the controller dies (kill -9: its session ends after
``zookeeper.session.timeout.ms``) or stops (SIGTERM: it resigns, deleting ``/controller``),
another live broker takes over with the next epoch; the old one, restarted, does not take the
role back. Every broker names the real controller in Metadata.
"""

from __future__ import annotations

import re
import urllib.request

import pytest
from confluent_kafka.admin import AdminClient

from tests.server.cluster.cluster_clients import metadata_from
from tests.server.cluster.harness import SESSION_TIMEOUT_MS, wait_until
from tests.server.metrics.scrape import parse

pytestmark = pytest.mark.timeout(150)

BROKERS = [1, 2, 3]


def every_broker_names(cluster, controller: int, timeout: float = 15) -> None:
    """Metadata from each live broker, and DescribeCluster (confluent-kafka's AdminClient),
    name ``controller`` and list exactly the live brokers."""
    live = cluster.live_ids()
    for broker_id in live:
        def named() -> bool:
            meta = metadata_from(cluster[broker_id].bootstrap, [])
            return meta.controller_id == controller and sorted(b.node_id for b in meta.brokers) == live

        wait_until(named, timeout, f"broker {broker_id} to name {controller} controller in Metadata")

    def described() -> bool:
        client = AdminClient({"bootstrap.servers": cluster.bootstrap})
        description = client.describe_cluster(request_timeout=10).result(15)
        return description.controller.id == controller and sorted(n.id for n in description.nodes) == live

    wait_until(described, timeout, f"DescribeCluster to name {controller} controller")


def active_controller_counts(cluster) -> dict[int, float]:
    """Each live broker's ``kafka_controller_kafkacontroller_activecontrollercount`` from its
    ``/metrics`` (its HTTP listener's address is in its output, the latest start's last)."""
    counts = {}
    for broker_id in cluster.live_ids():
        url = re.findall(r"HTTP listener on (http://\S+)", cluster[broker_id].output(10**8))[-1]
        with urllib.request.urlopen(url + "/metrics", timeout=10) as response:
            samples = parse(response.read().decode())
        counts[broker_id] = samples[("kafka_controller_kafkacontroller_activecontrollercount", frozenset())]
    return counts


def test_one_controller_and_failover_on_kill(make_cluster):
    cluster = make_cluster({"http.listeners": "http://127.0.0.1:0"}).start(BROKERS)
    first = cluster.controller_id()
    epoch = cluster.controller_epoch()
    assert first in BROKERS and epoch >= 1
    every_broker_names(cluster, first)
    wait_until(lambda: active_controller_counts(cluster) == {b: (b == first) * 1.0 for b in BROKERS}, 15,
               "the controller alone to report itself active in /metrics")

    cluster[first].kill()
    second = cluster.wait_for_controller(other_than=first, timeout=SESSION_TIMEOUT_MS / 1000 + 10)
    assert second != first
    assert cluster.controller_epoch() == epoch + 1
    every_broker_names(cluster, second)
    wait_until(lambda: active_controller_counts(cluster) == {b: (b == second) * 1.0 for b in cluster.live_ids()},
               15, "the new controller alone to report itself active in /metrics")

    # The old controller comes back as an ordinary broker: the role stays where it is.
    cluster.restart(first)
    every_broker_names(cluster, second)
    assert cluster.controller_id() == second
    assert cluster.controller_epoch() == epoch + 1


def test_a_stopping_controller_resigns_at_once(make_cluster):
    cluster = make_cluster().start(BROKERS)
    first = cluster.controller_id()
    epoch = cluster.controller_epoch()

    assert cluster[first].terminate(timeout=30) == 0
    # Resigning deletes /controller: the next election needs no session expiry.
    second = cluster.wait_for_controller(other_than=first, timeout=SESSION_TIMEOUT_MS / 1000)
    assert cluster.controller_epoch() == epoch + 1
    every_broker_names(cluster, second)
    assert second in cluster.registered_ids() and first not in cluster.registered_ids()
