"""Topic deletion across brokers (Kafka's TopicDeletionManager).

DeleteTopics marks ``/admin/delete_topics/<t>``; the controller sends StopReplica with delete
to every replica, and once all have answered removes the topic's znodes. Every broker then has
no log of it (renamed ``-delete``, erased ``log.segment.delete.delay.ms`` later), no longer
lists it, and refuses produce to it. A replica that is down when the deletion starts holds it
up (the topic is ineligible for deletion) until it comes back, which then completes it.
"""

from __future__ import annotations

import pytest
from confluent_kafka import Producer

from tests.server.cluster.cluster_clients import create_topic, delete_topic, metadata_from
from tests.server.cluster.harness import wait_until
from tests.server.wire import WireClient, produce_body, simple_batch

pytestmark = pytest.mark.timeout(150)

BROKERS = [1, 2, 3]
UNKNOWN_TOPIC_OR_PARTITION = 3
NOT_LEADER_OR_FOLLOWER = 6


def fill(cluster, topic: str, partitions: int) -> None:
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all", "message.timeout.ms": 20000})
    for i in range(30):
        producer.produce(topic, value=b"v%d" % i, partition=i % partitions)
    assert producer.flush(30) == 0


def assert_gone(cluster, topic: str, partitions: int, broker_ids) -> None:
    # Kafka's completeDeleteTopic removes these one after the other (the marker last).
    paths = [f"/brokers/topics/{topic}", f"/config/topics/{topic}", f"/admin/delete_topics/{topic}"]
    wait_until(lambda: not any(cluster.exists(path) for path in paths), 30,
               f"{paths} to go")
    for broker_id in broker_ids:
        node = cluster[broker_id]
        wait_until(lambda: node.partition_dirs(topic) == [], 20,
                   f"broker {broker_id}'s logs of {topic} to be erased (left: {node.partition_dirs(topic)})")
        wait_until(lambda: not metadata_from(node.bootstrap, [topic]).topics[0].partitions
                   and metadata_from(node.bootstrap, [topic]).topics[0].error_code == UNKNOWN_TOPIC_OR_PARTITION,
                   15, f"broker {broker_id} to stop listing {topic}")
        client = WireClient(node.bootstrap)
        try:
            for p in range(partitions):
                _, response = client.request("Produce", 8, produce_body(topic, p, simple_batch([b"late"])))
                code = response.responses[0].partition_responses[0].error_code
                assert code in (UNKNOWN_TOPIC_OR_PARTITION, NOT_LEADER_OR_FOLLOWER), (broker_id, p, code)
        finally:
            client.close()
        assert node.partition_dirs(topic) == []


def test_delete_a_topic_on_every_broker(make_cluster):
    cluster = make_cluster().start(BROKERS)
    create_topic(cluster.bootstrap, "doomed", 3, 3)
    cluster.wait_topic_ready("doomed", 3)
    fill(cluster, "doomed", 3)
    for broker_id in BROKERS:
        assert len(cluster[broker_id].partition_dirs("doomed")) == 3

    delete_topic(cluster.bootstrap, "doomed")
    assert_gone(cluster, "doomed", 3, BROKERS)


def test_deletion_waits_for_a_dead_replica_and_completes_when_it_returns(make_cluster):
    cluster = make_cluster().start(BROKERS)
    create_topic(cluster.bootstrap, "doomed", 2, 3)
    cluster.wait_topic_ready("doomed", 2)
    fill(cluster, "doomed", 2)
    down = next(b for b in BROKERS if b != cluster.controller_id())
    cluster[down].kill()
    cluster.wait_unregistered(down)

    admin_done = None
    try:
        delete_topic(cluster.bootstrap, "doomed")
    except Exception as e:  # noqa: BLE001 - Kafka may time the request out while a replica is down
        admin_done = e
    # The live replicas are deleted; the topic stays marked while the dead one holds a log.
    for broker_id in BROKERS:
        if broker_id != down:
            wait_until(lambda: cluster[broker_id].partition_dirs("doomed") == [], 20,
                       f"broker {broker_id}'s logs of doomed to be erased")
    assert cluster.exists("/admin/delete_topics/doomed"), f"deleted with a replica down ({admin_done!r})"
    assert cluster[down].partition_dirs("doomed")

    cluster.restart(down)
    assert_gone(cluster, "doomed", 2, BROKERS)
