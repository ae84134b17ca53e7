"""A cluster broker (metadata on ZooKeeper) learns partition states from its controller's
requests and sets no ZooKeeper watch on any partition state znode
(``metadata/controller_states.py``), while Metadata still names every partition's leader.
Leader changes reaching the other brokers' Metadata this way: ``tests/server/cluster`` (e.g.
``test_dead_leader_detection.py``)."""

from __future__ import annotations

import time

from confluent_kafka.admin import AdminClient, NewTopic

from odradek.testing.broker import InProcessBroker

PARTITIONS = 4


def leaders(admin: AdminClient, topic: str) -> dict[int, int]:
    found = admin.list_topics(topic, timeout=10).topics[topic]
    return {p: m.leader for p, m in found.partitions.items()}


def wait_for(check, timeout: float = 20.0):
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


def test_partition_states_come_from_the_controller_not_from_watches(zookeeper, chroot, tmp_path):
    with InProcessBroker(tmp_path, node_id=1, zookeeper_connect=zookeeper.hosts + chroot) as b:
        admin = AdminClient({"bootstrap.servers": b.bootstrap})
        admin.create_topics([NewTopic("t", PARTITIONS, 1)])["t"].result(10)
        assert wait_for(lambda: set(leaders(admin, "t").values()) == {1})
        client = b.broker.metadata.store._client
        watched = set(client._data_watchers) | set(client._child_watchers)
        assert [path for path in watched if path.endswith("/brokers/topics/t")]  # its assignment is followed
        assert not [path for path in watched if path.endswith("/state")]
        image = b.call(b.broker.metadata_image)
        assert [image.partition_state("t", p).leader for p in range(PARTITIONS)] == [1] * PARTITIONS
