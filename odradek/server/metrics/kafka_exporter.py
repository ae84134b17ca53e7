"""kafka-exporter's cluster and partition gauges (danielqsj/kafka_exporter's names and labels),
read from the broker's state when scraped, so dashboards built for kafka-exporter fill from
the brokers' own ``/metrics`` without running one:

- ``kafka_brokers``: the brokers registered in the cluster (live in the metadata image);
- ``kafka_topic_partitions{topic}``: each topic's partition count;
- ``kafka_topic_partition_current_offset{topic, partition}``: the partition's high watermark
  (what kafka-exporter reads with ListOffsets latest);
- ``kafka_topic_partition_oldest_offset{topic, partition}``: the log start offset (ListOffsets
  earliest).

Who reports what, so that summing over every broker's scrape counts each thing once (the way
Kafka's ``KafkaController`` gauges are non-zero on the active controller only): the cluster
counts (``kafka_brokers``, ``kafka_topic_partitions``) come from the active controller alone;
a partition's offsets from the broker that leads it. Cost: one pass over the metadata image's
topics (controller) and over the partitions this broker holds, nothing per request.
Consumer groups (``kafka_consumergroup_*``) are in ``consumer_lag``.
"""

from __future__ import annotations

from prometheus_client.core import GaugeMetricFamily


def cluster_families(broker) -> list:
    """``kafka_brokers`` and ``kafka_topic_partitions``, on the active controller only
    (the families are empty elsewhere)."""
    brokers = GaugeMetricFamily("kafka_brokers", "Number of brokers in the cluster (reported by the active controller)")
    partitions = GaugeMetricFamily("kafka_topic_partitions", "Number of partitions of the topic "
                                   "(reported by the active controller)", labels=["topic"])
    service = broker.controller_service
    if service is not None and service.active and broker.metadata is not None:
        image = broker.metadata_image()
        brokers.add_metric([], len(image.brokers))
        for name, assignment in sorted(image.topics.items()):
            partitions.add_metric([name], len(assignment.partitions))
    return [brokers, partitions]


def partition_offset_families(broker) -> list:
    """The offsets of the partitions this broker leads."""
    labels = ["topic", "partition"]
    current = GaugeMetricFamily("kafka_topic_partition_current_offset",
                                "The partition's high watermark (reported by its leader)", labels=labels)
    oldest = GaugeMetricFamily("kafka_topic_partition_oldest_offset",
                               "The partition's log start offset (reported by its leader)", labels=labels)
    rm, me = broker.replica_manager, broker.broker_id
    for (topic, index), part in sorted(rm.partitions.items()) if rm is not None else ():
        if part.leader_id == me:
            key = [topic, str(index)]
            current.add_metric(key, part.high_watermark)
            oldest.add_metric(key, part.log_start_offset)
    return [current, oldest]
