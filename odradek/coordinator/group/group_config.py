"""``GroupConfig``: the broker settings the group coordinator obeys, read once at start."""

from __future__ import annotations

from dataclasses import dataclass

OFFSETS_TOPIC = "__consumer_offsets"


@dataclass(frozen=True, slots=True)
class GroupConfig:
    # group.min.session.timeout.ms / group.max.session.timeout.ms: the session timeouts a
    # member may ask for (INVALID_SESSION_TIMEOUT outside).
    min_session_timeout_ms: int = 6000
    max_session_timeout_ms: int = 1_800_000
    # group.initial.rebalance.delay.ms: how long the first rebalance of an empty group waits
    # for more members (extended while members keep arriving, up to the rebalance timeout).
    initial_rebalance_delay_ms: int = 3000
    # group.max.size: members a group may have (GROUP_MAX_SIZE_REACHED for the next joiner).
    max_size: int = 2**31 - 1
    # A member that joined but never completed a rebalance is dropped after this long (Kafka's
    # fixed 5 minutes), so clients that gave up a JoinGroup do not pile up as phantoms.
    new_member_join_timeout_ms: int = 300_000
    # KIP-848 consumer groups (coordinator/group/consumer/): group.consumer.session.timeout.ms,
    # group.consumer.heartbeat.interval.ms, group.consumer.max.size, group.consumer.assignors
    # (names; the first is the default).
    consumer_session_timeout_ms: int = 45_000
    consumer_heartbeat_interval_ms: int = 5_000
    consumer_max_size: int = 2**31 - 1
    consumer_assignors: tuple[str, ...] = ("uniform", "range")
    # group.consumer.migration.policy: bidirectional, upgrade, downgrade or disabled (KIP-848
    # online migration between classic and consumer groups: consumer/group_migration.py).
    consumer_migration_policy: str = "bidirectional"
    # KIP-932 share groups (coordinator/group/share/): group.share.session.timeout.ms,
    # group.share.heartbeat.interval.ms, group.share.max.size; the share partitions'
    # group.share.record.lock.duration.ms, group.share.delivery.count.limit and
    # group.share.partition.max.record.locks (defaults of a group without its own config).
    share_session_timeout_ms: int = 45_000
    share_heartbeat_interval_ms: int = 5_000
    share_max_size: int = 200
    share_record_lock_duration_ms: int = 30_000
    share_delivery_count_limit: int = 5
    share_partition_max_record_locks: int = 2_000
    # offsets.retention.minutes, in ms.
    offsets_retention_ms: int = 7 * 24 * 60 * 60 * 1000
    offsets_retention_check_interval_ms: int = 600_000
    # offset.metadata.max.bytes (Kafka's default; not a broker key of odradek yet).
    offset_metadata_max_bytes: int = 4096
    # offsets.commit.timeout.ms: how long a write waits for the replicas.
    commit_timeout_ms: int = 5000
    # offsets.topic.num.partitions, .replication.factor, .segment.bytes: for creating the topic.
    topic_partitions: int = 50
    topic_replication_factor: int = 3
    topic_segment_bytes: int = 104_857_600

    @classmethod
    def from_broker_config(cls, config) -> GroupConfig:
        rebalance_protocols(config)  # refuses a list without classic, as Kafka
        return cls(
            min_session_timeout_ms=config["group.min.session.timeout.ms"],
            max_session_timeout_ms=config["group.max.session.timeout.ms"],
            initial_rebalance_delay_ms=config["group.initial.rebalance.delay.ms"],
            max_size=config["group.max.size"],
            consumer_session_timeout_ms=config["group.consumer.session.timeout.ms"],
            consumer_heartbeat_interval_ms=config["group.consumer.heartbeat.interval.ms"],
            consumer_max_size=config["group.consumer.max.size"],
            consumer_assignors=tuple(config["group.consumer.assignors"]),
            consumer_migration_policy=str(config["group.consumer.migration.policy"]).lower(),
            share_session_timeout_ms=config["group.share.session.timeout.ms"],
            share_heartbeat_interval_ms=config["group.share.heartbeat.interval.ms"],
            share_max_size=config["group.share.max.size"],
            share_record_lock_duration_ms=config["group.share.record.lock.duration.ms"],
            share_delivery_count_limit=config["group.share.delivery.count.limit"],
            share_partition_max_record_locks=config["group.share.partition.max.record.locks"],
            offsets_retention_ms=config["offsets.retention.minutes"] * 60_000,
            offsets_retention_check_interval_ms=config["offsets.retention.check.interval.ms"],
            commit_timeout_ms=config["offsets.commit.timeout.ms"],
            topic_partitions=config["offsets.topic.num.partitions"],
            topic_replication_factor=config["offsets.topic.replication.factor"],
            topic_segment_bytes=config["offsets.topic.segment.bytes"],
        )


def rebalance_protocols(broker_config) -> frozenset[str]:
    """``group.coordinator.rebalance.protocols`` (Kafka 4's default ``classic,consumer``), lower
    case. Without ``consumer`` the broker answers ConsumerGroupHeartbeat and
    ConsumerGroupDescribe UNSUPPORTED_VERSION (Kafka's ``KafkaApis.isConsumerGroupProtocolEnabled``),
    while ApiVersions still lists them, as Kafka's ``ApiVersionManager`` does. ``classic`` cannot
    be left out (Kafka's ``KafkaConfig`` refuses it: ValueError)."""
    protocols = frozenset(str(p).strip().lower() for p in broker_config["group.coordinator.rebalance.protocols"])
    if "classic" not in protocols:
        raise ValueError("group.coordinator.rebalance.protocols: disabling the 'classic' protocol is not supported.")
    return protocols


def consumer_protocol_enabled(broker_config) -> bool:
    return "consumer" in rebalance_protocols(broker_config)

