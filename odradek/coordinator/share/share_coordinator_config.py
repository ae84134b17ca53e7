"""``ShareCoordinatorConfig``: the broker settings the share coordinator obeys, read at start."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class ShareCoordinatorConfig:
    # share.coordinator.state.topic.num.partitions / .replication.factor (capped at the live
    # brokers, as odradek does for __consumer_offsets) / .min.isr / .segment.bytes
    topic_partitions: int = 50
    topic_replication_factor: int = 3
    topic_min_isr: int = 2
    topic_segment_bytes: int = 104_857_600
    # share.coordinator.snapshot.update.records.per.snapshot: ShareUpdate records per key
    # between two ShareSnapshot records (Kafka's ShareCoordinatorShard counts them).
    snapshot_update_records_per_snapshot: int = 500
    # share.coordinator.write.timeout.ms: how long a write waits for the replicas.
    write_timeout_ms: int = 5000

    @classmethod
    def from_broker_config(cls, config) -> ShareCoordinatorConfig:
        return cls(
            topic_partitions=config["share.coordinator.state.topic.num.partitions"],
            topic_replication_factor=config["share.coordinator.state.topic.replication.factor"],
            topic_min_isr=config["share.coordinator.state.topic.min.isr"],
            topic_segment_bytes=config["share.coordinator.state.topic.segment.bytes"],
            snapshot_update_records_per_snapshot=config["share.coordinator.snapshot.update.records.per.snapshot"],
            write_timeout_ms=config["share.coordinator.write.timeout.ms"],
        )
