"""The scrape-time metrics, read from a fake broker's state."""

from types import SimpleNamespace

from odradek.controller.controller_metrics import ControllerMetrics
from odradek.metadata.image import MetadataImage
from odradek.metadata.layout import PartitionState, TopicAssignment
from odradek.server.metrics.broker_gauges import (
    controller_families,
    log_families,
    replica_manager_families,
    socket_server_families,
)
from odradek.server.metrics.consumer_lag import consumer_group_families
from odradek.server.metrics.kafka_exporter import cluster_families, partition_offset_families

from tests.server.metrics.scrape import expose, value


def _partition(topic, index, leader, replicas, isr, hw=0, size=0, start=0, end=0):
    log = SimpleNamespace(size=size, log_start_offset=start, log_end_offset=end)
    return SimpleNamespace(topic=topic, index=index, leader_id=leader, replicas=replicas, isr=isr,
                           high_watermark=hw, log=log)


def _broker(**parts):
    partitions = {(p.topic, p.index): p for p in parts.values()}
    return SimpleNamespace(broker_id=1, replica_manager=SimpleNamespace(partitions=partitions, isr_shrinks=2,
                                                                        isr_expands=3),
                           connections=set(), bound={}, controller_service=None, group_coordinator=None)


def test_replica_manager_counts_partitions_leaders_and_under_replicated_ones():
    broker = _broker(a=_partition("t", 0, 1, (1, 2), (1, 2)), b=_partition("t", 1, 1, (1, 2, 3), (1,)),
                     c=_partition("t", 2, 2, (2, 1), (2,)))  # led by broker 2: not this one's to report
    samples = expose(replica_manager_families(broker))
    assert value(samples, "kafka_server_replicamanager_partitioncount") == 3
    assert value(samples, "kafka_server_replicamanager_leadercount") == 2
    assert value(samples, "kafka_server_replicamanager_underreplicatedpartitions") == 1
    assert value(samples, "kafka_server_replicamanager_isrshrinks_total") == 2
    assert value(samples, "kafka_server_replicamanager_isrexpands_total") == 3


def test_log_size_and_offsets_per_partition():
    broker = _broker(a=_partition("t", 0, 1, (1,), (1,), size=4096, start=10, end=42))
    samples = expose(log_families(broker))
    assert value(samples, "kafka_log_log_size", topic="t", partition="0") == 4096
    assert value(samples, "kafka_log_log_logstartoffset", topic="t", partition="0") == 10
    assert value(samples, "kafka_log_log_logendoffset", topic="t", partition="0") == 42


# Kafka's KafkaController gauges, in the order of ControllerMetrics' fields
CONTROLLER_COUNTS = ("globaltopiccount", "globalpartitioncount", "preferredreplicaimbalancecount",
                     "topicstodeletecount", "replicastodeletecount", "topicsineligibletodeletecount",
                     "replicasineligibletodeletecount")


def test_the_active_controller_counts_partitions_without_a_live_leader():
    image = MetadataImage(
        brokers={1: object(), 2: object()},
        topics={"t": TopicAssignment("t", None, {0: (1,), 1: (3,), 2: (2,), 3: (1,)}),
                "dying": TopicAssignment("dying", None, {0: (3,)})},
        partition_states={"t": {0: PartitionState(1, 0, (1,), 1), 1: PartitionState(3, 0, (3,), 1),
                                2: PartitionState(-1, 0, (2,), 1)}},  # 3: no state at all
        topics_being_deleted=frozenset({"dying"}))
    published = ControllerMetrics(1, 2, 3, 4, 5, 6, 7)  # what the event thread last published
    broker = SimpleNamespace(controller_service=SimpleNamespace(active=True, metrics=published),
                             metadata_image=lambda: image)
    samples = expose(controller_families(broker))
    assert value(samples, "kafka_controller_kafkacontroller_activecontrollercount") == 1
    assert value(samples, "kafka_controller_kafkacontroller_offlinepartitionscount") == 3
    counts = {name: value(samples, f"kafka_controller_kafkacontroller_{name}") for name in CONTROLLER_COUNTS}
    assert counts == dict(zip(CONTROLLER_COUNTS, range(1, 8)))
    broker.controller_service.active = False  # (its last counts are not read)
    samples = expose(controller_families(broker))
    assert value(samples, "kafka_controller_kafkacontroller_activecontrollercount") == 0
    assert value(samples, "kafka_controller_kafkacontroller_offlinepartitionscount") == 0
    assert all(value(samples, f"kafka_controller_kafkacontroller_{name}") == 0 for name in CONTROLLER_COUNTS)


def test_connections_per_listener_and_requests_waiting_for_their_response():
    conn = lambda name, pending: SimpleNamespace(listener_name=name, pending=[None] * pending)  # noqa: E731
    broker = _broker()
    broker.connections = [conn("PLAINTEXT", 2), conn("PLAINTEXT", 0), conn("SSL", 1)]
    broker.bound = {"PLAINTEXT": ("127.0.0.1", 1), "SSL": ("127.0.0.1", 2), "SASL_SSL": ("127.0.0.1", 3)}
    samples = expose(socket_server_families(broker, 0.25))
    assert value(samples, "kafka_server_socketservermetrics_connection_count", listener="PLAINTEXT") == 2
    assert value(samples, "kafka_server_socketservermetrics_connection_count", listener="SSL") == 1
    assert value(samples, "kafka_server_socketservermetrics_connection_count", listener="SASL_SSL") == 0
    assert value(samples, "kafka_network_requestchannel_requestqueuesize") == 3
    assert value(samples, "odradek_eventloop_lag_seconds") == 0.25


def test_consumer_lag_is_the_high_watermark_minus_the_committed_offset():
    broker = _broker(a=_partition("t", 0, 1, (1,), (1,), hw=100), b=_partition("t", 1, 2, (2, 1), (2, 1), hw=7))
    committed = [("g", "t", 0, 60), ("g", "t", 1, 7), ("g", "elsewhere", 0, 5), ("h", "t", 0, 100)]
    broker.group_coordinator = SimpleNamespace(committed_offsets=lambda: iter(committed),
                                               group_member_counts=lambda: iter([("g", 2), ("h", 0)]))
    samples = expose(consumer_group_families(broker))
    # kafka-exporter's sums per group and topic, over the partitions with a lag here
    assert value(samples, "kafka_consumergroup_lag_sum", consumergroup="g", topic="t") == 40
    assert value(samples, "kafka_consumergroup_lag_sum", consumergroup="h", topic="t") == 0
    assert ("kafka_consumergroup_lag_sum", frozenset({("consumergroup", "g"), ("topic", "elsewhere")})) not in samples
    assert value(samples, "kafka_consumergroup_members", consumergroup="g") == 2
    assert value(samples, "kafka_consumergroup_members", consumergroup="h") == 0
    assert value(samples, "kafka_consumergroup_current_offset", consumergroup="g", topic="t", partition="0") == 60
    assert value(samples, "kafka_consumergroup_lag", consumergroup="g", topic="t", partition="0") == 40
    assert value(samples, "kafka_consumergroup_lag", consumergroup="g", topic="t", partition="1") == 0  # a follower's
    assert value(samples, "kafka_consumergroup_lag", consumergroup="h", topic="t", partition="0") == 0
    # no replica here: the committed offset, but no end to measure the lag against
    assert value(samples, "kafka_consumergroup_current_offset", consumergroup="g", topic="elsewhere",
                 partition="0") == 5
    assert ("kafka_consumergroup_lag",
            frozenset({("consumergroup", "g"), ("topic", "elsewhere"), ("partition", "0")})) not in samples


def test_partition_offsets_from_their_leader_and_cluster_counts_from_the_active_controller():
    broker = _broker(a=_partition("t", 0, 1, (1, 2), (1, 2), hw=90, start=10),
                     b=_partition("t", 1, 2, (2, 1), (2, 1), hw=7, start=3))
    broker.replica_manager.partitions[("t", 0)].log_start_offset = 10
    samples = expose(partition_offset_families(broker))
    assert value(samples, "kafka_topic_partition_current_offset", topic="t", partition="0") == 90
    assert value(samples, "kafka_topic_partition_oldest_offset", topic="t", partition="0") == 10
    # partition 1 is led by broker 2: its offsets are on broker 2's /metrics only
    assert ("kafka_topic_partition_current_offset", frozenset({("topic", "t"), ("partition", "1")})) not in samples

    image = MetadataImage(brokers={1: object(), 2: object(), 3: object()},
                          topics={"t": TopicAssignment("t", None, {0: (1, 2), 1: (2, 1)}),
                                  "__consumer_offsets": TopicAssignment("__consumer_offsets", None,
                                                                        {i: (1,) for i in range(5)})})
    broker.metadata = object()
    broker.metadata_image = lambda: image
    assert [f.samples for f in cluster_families(broker)] == [[], []]  # not the controller: nothing
    broker.controller_service = SimpleNamespace(active=True)
    samples = expose(cluster_families(broker))
    assert value(samples, "kafka_brokers") == 3
    assert value(samples, "kafka_topic_partitions", topic="t") == 2
    assert value(samples, "kafka_topic_partitions", topic="__consumer_offsets") == 5
