"""A real broker with ``http.listeners`` (through the odradek pytest plugin), real clients,
and ``/metrics`` read back with ``prometheus_client``'s own parser."""

import urllib.error
import urllib.request

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from tests.server.metrics.scrape import parse, value

N = 300
COMMITTED = 220  # the group's committed offset: a lag of N - COMMITTED


def _get(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=10) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


def _produce(bootstrap: str, topic: str, **config) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20, **config})
    failures = []
    for i in range(N):
        producer.produce(topic, value=b"v%05d" % i, key=b"k%d" % (i % 7),
                         on_delivery=lambda err, _msg: err is not None and failures.append(err))
    assert producer.flush(30) == 0 and not failures


def _consume_and_commit(bootstrap: str, topic: str) -> int:
    """Read the whole partition once; commit COMMITTED for group ``metered``; the records read."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "metered", "enable.auto.commit": False,
                         "auto.offset.reset": "earliest"})
    consumer.assign([TopicPartition(topic, 0, 0)])
    read = 0
    while read < N:
        for msg in consumer.consume(N, timeout=10):
            assert msg.error() is None
            read += 1
    consumer.commit(offsets=[TopicPartition(topic, 0, COMMITTED)], asynchronous=False)
    consumer.close()
    return read


@pytest.mark.odradek_config(http_listeners="http://127.0.0.1:0")
def test_counters_log_offsets_lag_and_health(odradek_broker):
    bootstrap = odradek_broker.bootstrap
    _produce(bootstrap, "metered")  # plain batches: the produce fast path
    _produce(bootstrap, "metered-idempotent", **{"enable.idempotence": True})  # the generic handler
    assert _consume_and_commit(bootstrap, "metered") == N

    status, text = _get(odradek_broker.http_url + "/metrics")
    assert status == 200
    samples = parse(text)
    messages_in = "kafka_server_brokertopicmetrics_messagesin_total"
    assert value(samples, messages_in, topic="metered") == N
    assert value(samples, messages_in, topic="metered-idempotent") == N
    assert value(samples, messages_in) == 2 * N  # the coordinator's own writes are not counted
    for topic in ("metered", "metered-idempotent"):  # one partition each: the log holds exactly the batches
        size = value(samples, "kafka_log_log_size", topic=topic, partition="0")
        assert value(samples, "kafka_server_brokertopicmetrics_bytesin_total", topic=topic) == size > 0
        assert value(samples, "kafka_log_log_logendoffset", topic=topic, partition="0") == N
        assert value(samples, "kafka_log_log_logstartoffset", topic=topic, partition="0") == 0
    # the consumer read every batch once
    assert value(samples, "kafka_server_brokertopicmetrics_bytesout_total", topic="metered") == value(
        samples, "kafka_log_log_size", topic="metered", partition="0")
    assert value(samples, "kafka_server_brokertopicmetrics_failedproducerequests_total") == 0
    for api in ("Produce", "Fetch", "OffsetCommit", "Metadata"):
        count = value(samples, "kafka_network_requestmetrics_requests_total", request=api)
        assert count >= 1
        assert value(samples, "kafka_network_requestmetrics_totaltimems_count", request=api) == count
    assert value(samples, "kafka_network_requestmetrics_requests_total", request="Produce") >= 2
    assert value(samples, "kafka_network_requestmetrics_requests_total", request="FetchConsumer") == value(
        samples, "kafka_network_requestmetrics_requests_total", request="Fetch")  # no follower here
    assert ("kafka_network_requestmetrics_requests_total", frozenset({("request", "FetchFollower")})) not in samples
    labels = dict(consumergroup="metered", topic="metered", partition="0")
    assert value(samples, "kafka_consumergroup_current_offset", **labels) == COMMITTED
    assert value(samples, "kafka_consumergroup_lag", **labels) == N - COMMITTED
    # kafka-exporter's names (one broker: it leads every partition and is the controller)
    assert value(samples, "kafka_consumergroup_lag_sum", consumergroup="metered", topic="metered") == N - COMMITTED
    assert value(samples, "kafka_consumergroup_members", consumergroup="metered") == 0  # it left
    assert value(samples, "kafka_brokers") == 1
    assert value(samples, "kafka_topic_partitions", topic="metered") == 1
    assert value(samples, "kafka_topic_partition_current_offset", topic="metered", partition="0") == N
    assert value(samples, "kafka_topic_partition_oldest_offset", topic="metered", partition="0") == 0
    # the JMX exporter's request-time quantiles
    for quantile in ("0.50", "0.75", "0.95", "0.98", "0.99", "0.999"):
        assert value(samples, "kafka_network_requestmetrics_totaltimems", request="Produce", quantile=quantile) > 0
    # prometheus_client's process collector
    for name in ("process_cpu_seconds_total", "process_resident_memory_bytes", "process_open_fds"):
        assert value(samples, name) > 0
    assert value(samples, "kafka_controller_kafkacontroller_activecontrollercount") == 1
    assert value(samples, "kafka_controller_kafkacontroller_offlinepartitionscount") == 0
    image = odradek_broker.broker.metadata_image()  # the controller's counts, as its broker knows them
    controller = "kafka_controller_kafkacontroller_"
    assert value(samples, controller + "globaltopiccount") == len(image.topics) >= 3  # with __consumer_offsets
    assert value(samples, controller + "globalpartitioncount") == sum(
        len(t.partitions) for t in image.topics.values())
    for name in ("preferredreplicaimbalancecount", "topicstodeletecount", "replicastodeletecount",
                 "topicsineligibletodeletecount", "replicasineligibletodeletecount"):
        assert value(samples, controller + name) == 0
    assert value(samples, "kafka_server_replicamanager_leadercount") == value(
        samples, "kafka_server_replicamanager_partitioncount") >= 2
    assert value(samples, "kafka_server_replicamanager_underreplicatedpartitions") == 0
    assert ("kafka_server_socketservermetrics_connection_count", frozenset({("listener", "PLAINTEXT")})) in samples

    assert _get(odradek_broker.http_url + "/v1/status/ready") == (200, "ready\n")
    assert _get(odradek_broker.http_url + "/v1/status/live") == (200, "live\n")
