"""Consumer lag per group, topic and partition, under kafka-exporter's names (the exporter
most Kafka dashboards chart lag from):

- ``kafka_consumergroup_current_offset{consumergroup, topic, partition}``: the group's
  committed offset (the next record it will consume);
- ``kafka_consumergroup_lag{consumergroup, topic, partition}``: the partition's high watermark
  (the end a consumer can read to) minus that committed offset. Not clamped: a group that
  committed beyond the high watermark (e.g. after the log was truncated) shows a negative lag.
- ``kafka_consumergroup_lag_sum{consumergroup, topic}``: that lag summed over the topic's
  partitions that have one here;
- ``kafka_consumergroup_members{consumergroup}``: the group's members (0 for a group with
  committed offsets and nobody in it).

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
    lag_sum = GaugeMetricFamily("kafka_consumergroup_lag_sum",
                                "The group's lag summed over the topic's partitions", labels=["consumergroup", "topic"])
    members = GaugeMetricFamily("kafka_consumergroup_members", "Members of the group", labels=["consumergroup"])
    families = [current, lag, lag_sum, members]
    coordinator, rm = broker.group_coordinator, broker.replica_manager
    if coordinator is None or rm is None:
        return families
    partitions = rm.partitions
    sums: dict[tuple[str, str], int] = {}
    for group, topic, index, offset in sorted(coordinator.committed_offsets()):
        key = [group, topic, str(index)]
        current.add_metric(key, offset)
        part = partitions.get((topic, index))
        if part is not None:
            lag.add_metric(key, part.high_watermark - offset)
            sums[(group, topic)] = sums.get((group, topic), 0) + part.high_watermark - offset
    for (group, topic), total in sorted(sums.items()):
        lag_sum.add_metric([group, topic], total)
    for group, count in sorted(coordinator.group_member_counts()):
        members.add_metric([group], count)
    return families
