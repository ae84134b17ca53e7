"""Consumer lag per group, topic and partition, under kafka-exporter's names (the exporter
most Kafka dashboards chart lag from):

- ``kafka_consumergroup_current_offset{consumergroup, topic, partition}``: the group's
  committed offset (the next record it will consume);
- ``kafka_consumergroup_lag{consumergroup, topic, partition}``: the partition's high watermark
  (the end a consumer can read to) minus that committed offset. Not clamped: a group that
  committed beyond the high watermark (e.g. after the log was truncated) shows a negative lag.

Which groups: those whose coordinator is this broker (the ``__consumer_offsets`` partitions it
leads, once loaded), so over a cluster every group appears on exactly one broker. Which end:
the high watermark of the partition's replica on this broker, the leader's or, on a follower,
the one it learned from the leader (behind it by at most a fetch). A committed partition with
no replica on this broker gets its ``current_offset`` but no ``lag``: its end offset would
need a request to another broker in the middle of a scrape; its leader's
``kafka_log_log_logendoffset`` is on that broker's ``/metrics``.
"""

from __future__ import annotations

from prometheus_client.core import GaugeMetricFamily

LABELS = ["consumergroup", "topic", "partition"]


def consumer_group_families(broker) -> list:
    current = GaugeMetricFamily("kafka_consumergroup_current_offset",
                                "The group's committed offset for the partition", labels=LABELS)
    lag = GaugeMetricFamily("kafka_consumergroup_lag",
                            "The partition's high watermark minus the group's committed offset", labels=LABELS)
    coordinator, rm = broker.group_coordinator, broker.replica_manager
    if coordinator is None or rm is None:
        return [current, lag]
    partitions = rm.partitions
    for group, topic, index, offset in sorted(coordinator.committed_offsets()):
        key = [group, topic, str(index)]
        current.add_metric(key, offset)
        part = partitions.get((topic, index))
        if part is not None:
            lag.add_metric(key, part.high_watermark - offset)
    return [current, lag]
