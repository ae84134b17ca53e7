"""`LocalCluster` with a ZooKeeper of its own: after a crash of everything (kill -9 of the
brokers and of ZooKeeper), the same directory starts again as the same cluster, once ZooKeeper
has expired the dead brokers' restored sessions."""

from __future__ import annotations

import pytest

from odradek.server.local_cluster.local_cluster import LocalCluster
from odradek.server.local_cluster.zookeeper_server import zookeeper_installed

pytestmark = [pytest.mark.timeout(120),
              pytest.mark.skipif(not zookeeper_installed(), reason="ZooKeeper is not installed (scripts/setup.sh)")]

# Short, so the expiry is soon; long enough that the restored sessions are surely still there
# when the second start looks, a moment after ZooKeeper serves again.
PROPS = {"zookeeper.session.timeout.ms": "4000"}


def test_a_crashed_cluster_comes_back_from_its_directory(tmp_path):
    first = LocalCluster(tmp_path, 2, props=PROPS).start()
    try:
        cluster_id = first.read_json("/cluster/id")["id"]
        assert first.registered_ids() == [1, 2]
    finally:
        first.close()  # kill -9 of everything: the registrations stay in ZooKeeper's log
    assert not first.zookeeper.alive and not any(node.alive for node in first.nodes.values())

    notices: list[str] = []
    second = LocalCluster(tmp_path, 2, props=PROPS, notice=notices.append)
    try:
        second.start()
        assert second.read_json("/cluster/id")["id"] == cluster_id
        assert second.registered_ids() == [1, 2]
        assert notices and "brokers [1, 2]" in notices[0]
        statuses = second.stop()
    finally:
        second.close()
    assert statuses["broker 1"] == statuses["broker 2"] == 0


def test_a_broker_whose_picked_port_is_taken_before_it_listens_starts_on_another(tmp_path):
    """Another process (a parallel test) may take a picked port between the pick and the
    broker's bind: that first launch is made again on a new port."""
    import socket

    notices: list[str] = []
    cluster = LocalCluster(tmp_path, 1, props=PROPS, notice=notices.append)
    taken = cluster.nodes[1].port
    with socket.socket() as thief:
        thief.bind(("127.0.0.1", taken))
        thief.listen()
        try:
            cluster.start()
            node = cluster.nodes[1]
            assert node.port != taken and node.starts == 1 and cluster.registered_ids() == [1]
            assert notices == [f"broker 1's port was taken before it could listen: launched on {node.port}"]
        finally:
            cluster.close()
