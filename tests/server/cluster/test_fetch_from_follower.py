"""KIP-392 on a real cluster: three brokers in racks r1, r2, r3 with
``replica.selector.class=org.apache.kafka.common.replica.RackAwareReplicaSelector``, a topic of
one partition on all three. Consumers in the rack of a follower read from that follower; when
it leaves the ISR they read on from the leader.

Where a consumer read is proved by each broker's own count of record bytes sent to consumers
(``kafka_server_brokertopicmetrics_bytesout_total`` of the topic on its ``http.listeners``):
while the follower serves, the leader sends none (its answers only name the replica).

The follower is paused (SIGSTOP) with the consumers at the log end, then records are
produced: the leader drops it from the ISR after ``replica.lag.time.max.ms`` and the acks=all
records are committed. The consumers' fetches to the paused follower time out and they ask the
leader, which no longer names it, so they read on from the leader. (Here the paused broker's
ZooKeeper session also ends within seconds, which makes it a dead broker the leader would not
name either; that the ISR alone decides is shown by the next test.)

librdkafka (confluent-kafka, ``client.rack``) and odradek's own consumer (``client_rack``) read
the same records, each exactly once.

The ISR alone: in network namespaces (netns_cluster.py; skipped without root and iproute2),
the follower is cut from its leader only. It stays registered and keeps serving consumers up
to its last high watermark, and drops out of the ISR. odradek's consumer, whose preferred
replica expires with its ``metadata.max.age.ms`` (2 s here), asks the leader again, which no
longer names the follower (still alive, still holding the consumer's offset), and reads the
new records there. Without the leader's ISR check it would be sent back to the follower again
and again and read nothing more.
"""

from __future__ import annotations

import time
import urllib.request
import uuid

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition

from odradek.client.sync import Consumer as OdradekConsumer
from odradek.client.topic_partition import TopicPartition as OdradekPartition
from odradek.server.replica_selector import RACK_AWARE
from tests.server.cluster.broker_node import free_port
from odradek.server.local_cluster.zookeeper_server import environment_note
from tests.server.cluster.cluster_clients import create_topic
from tests.server.cluster.netns_cluster import broker_host, netns_cluster
from tests.server.cluster.network import unavailable
from tests.server.metrics.scrape import parse

pytestmark = pytest.mark.timeout(180)

TOPIC = "near"
BROKERS = (1, 2, 3)
FIRST, MORE = 20, 10
PROPS = {"replica.selector.class": RACK_AWARE}
READ_TIMEOUT_S = 60


def _bytes_out(url: str) -> float:
    with urllib.request.urlopen(url + "/metrics", timeout=10) as response:
        samples = parse(response.read().decode())
    return samples.get(("kafka_server_brokertopicmetrics_bytesout_total", frozenset({("topic", TOPIC)})), 0.0)


def _produce(bootstrap: str, start: int, count: int) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 0})
    for i in range(start, start + count):
        producer.produce(TOPIC, b"%d" % i, partition=0)
    assert producer.flush(60) == 0


def _confluent_read(consumer: Consumer, values: list[int], upto: int) -> None:
    deadline = time.monotonic() + READ_TIMEOUT_S
    while len(values) < upto:
        assert time.monotonic() < deadline, f"confluent-kafka read {values}, wants {upto} values"
        for msg in consumer.consume(100, 0.5):
            assert msg.error() is None, msg.error()
            values.append(int(msg.value()))


def _odradek_read(consumer: OdradekConsumer, values: list[int], upto: int) -> None:
    deadline = time.monotonic() + READ_TIMEOUT_S
    while len(values) < upto:
        assert time.monotonic() < deadline, f"odradek's consumer read {values}, wants {upto} values"
        for records in consumer.poll(500).values():
            values.extend(int(r.value) for r in records)


def test_consumers_read_from_their_racks_follower_then_from_the_leader(make_cluster):
    cluster = make_cluster(PROPS)
    metrics = {}
    for b in BROKERS:
        metrics[b] = f"http://127.0.0.1:{free_port()}"
        cluster.add_broker(b, {"broker.rack": f"r{b}", "http.listeners": metrics[b]})
    cluster.start(BROKERS)
    create_topic(cluster.bootstrap, TOPIC, 1, 3)
    cluster.wait_for_isr(TOPIC, 0, BROKERS)
    leader, controller = cluster.leader(TOPIC, 0), cluster.controller_id()
    # the follower to pause: not the controller, which must take the leader's ISR change
    follower = max(b for b in BROKERS if b not in (leader, controller))
    bootstrap = cluster[leader].bootstrap
    _produce(bootstrap, 0, FIRST)

    confluent = Consumer({"bootstrap.servers": bootstrap, "group.id": f"near-{uuid.uuid4().hex[:8]}",
                          "client.rack": f"r{follower}", "enable.auto.commit": False,
                          "fetch.wait.max.ms": 100, "socket.timeout.ms": 5000})
    odradek = OdradekConsumer(bootstrap, client_rack=f"r{follower}", fetch_max_wait_ms=100,
                              request_timeout_ms=5000)
    try:
        confluent.assign([TopicPartition(TOPIC, 0, OFFSET_BEGINNING)])
        odradek.assign([OdradekPartition(TOPIC, 0)])
        odradek.seek_to_beginning()
        read_confluent, read_odradek = [], []
        _confluent_read(confluent, read_confluent, FIRST)
        after_confluent = _bytes_out(metrics[follower])
        _odradek_read(odradek, read_odradek, FIRST)
        assert read_confluent == read_odradek == list(range(FIRST))
        # every record came from the follower, to each consumer: the leader sent none
        assert 0 < after_confluent < _bytes_out(metrics[follower])
        assert _bytes_out(metrics[leader]) == 0

        cluster[follower].pause()
        _produce(bootstrap, FIRST, MORE)  # committed once the leader dropped the follower
        assert follower not in cluster.isr(TOPIC, 0)
        _confluent_read(confluent, read_confluent, FIRST + MORE)
        _odradek_read(odradek, read_odradek, FIRST + MORE)
        assert read_confluent == read_odradek == list(range(FIRST + MORE))  # each exactly once
        assert _bytes_out(metrics[leader]) > 0
    finally:
        confluent.close()
        odradek.close()


def test_a_follower_out_of_the_isr_is_no_longer_named(tmp_path):
    reason = unavailable() or environment_note()
    if reason:
        pytest.skip(reason)
    with netns_cluster(tmp_path, BROKERS, PROPS) as cluster:
        metrics = {b: f"http://{cluster.network.address(broker_host(b))}:8081" for b in BROKERS}
        for b in BROKERS:
            cluster.add_broker(b, {"broker.rack": f"r{b}", "http.listeners": metrics[b]})
        cluster.start(BROKERS)
        create_topic(cluster.bootstrap, TOPIC, 1, 3)
        cluster.wait_for_isr(TOPIC, 0, BROKERS)
        leader, controller = cluster.leader(TOPIC, 0), cluster.controller_id()
        follower = max(b for b in BROKERS if b not in (leader, controller))
        bootstrap = cluster[leader].bootstrap
        _produce(bootstrap, 0, FIRST)
        consumer = OdradekConsumer(bootstrap, client_rack=f"r{follower}", fetch_max_wait_ms=100,
                                   metadata_max_age_ms=2000)
        try:
            consumer.assign([OdradekPartition(TOPIC, 0)])
            consumer.seek_to_beginning()
            values = []
            _odradek_read(consumer, values, FIRST)
            assert _bytes_out(metrics[follower]) > 0 and _bytes_out(metrics[leader]) == 0

            cluster.network.partition([broker_host(follower)], [broker_host(leader)])
            _produce(bootstrap, FIRST, MORE)  # committed once the leader dropped the follower
            assert follower not in cluster.isr(TOPIC, 0) and cluster.exists(f"/brokers/ids/{follower}")
            _odradek_read(consumer, values, FIRST + MORE)
            assert values == list(range(FIRST + MORE))
            assert _bytes_out(metrics[leader]) > 0
            assert cluster.exists(f"/brokers/ids/{follower}")  # alive all along: the ISR decided
        finally:
            consumer.close()
