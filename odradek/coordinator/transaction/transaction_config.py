"""``TransactionConfig``: the broker settings the transaction coordinator obeys, read at start."""

from __future__ import annotations

from dataclasses import dataclass

TRANSACTION_STATE_TOPIC = "__transaction_state"


@dataclass(frozen=True, slots=True)
class TransactionConfig:
    # transaction.max.timeout.ms: the largest transaction.timeout.ms a producer may ask for
    # (INVALID_TRANSACTION_TIMEOUT above; 0 and below too).
    max_timeout_ms: int = 900_000
    # transactional.id.expiration.ms: an id without a transaction in flight and no update for
    # this long is forgotten (a tombstone), checked every
    # transaction.remove.expired.transaction.cleanup.interval.ms.
    id_expiration_ms: int = 604_800_000
    remove_expired_interval_ms: int = 3_600_000
    # transaction.abort.timed.out.transaction.cleanup.interval.ms: how often Ongoing
    # transactions older than their timeout are looked for (and aborted, fencing the producer).
    abort_timed_out_interval_ms: int = 10_000
    # transaction.state.log.*: for creating the topic; min.isr for the coordinator's writes.
    topic_partitions: int = 50
    topic_replication_factor: int = 3
    topic_min_isr: int = 2
    topic_segment_bytes: int = 104_857_600
    # How long a write to the log waits for the ISR (Kafka: transaction.state.log's
    # request timeout, ``transaction.state.log.commit.timeout.ms`` was removed; 5 s as offsets).
    write_timeout_ms: int = 5000
    # Back-off between rounds of markers for partitions whose leader could not take them yet.
    marker_retry_backoff_ms: int = 100

    @classmethod
    def from_broker_config(cls, config) -> TransactionConfig:
        return cls(
            max_timeout_ms=config["transaction.max.timeout.ms"],
            id_expiration_ms=config["transactional.id.expiration.ms"],
            remove_expired_interval_ms=config["transaction.remove.expired.transaction.cleanup.interval.ms"],
            abort_timed_out_interval_ms=config["transaction.abort.timed.out.transaction.cleanup.interval.ms"],
            topic_partitions=config["transaction.state.log.num.partitions"],
            topic_replication_factor=config["transaction.state.log.replication.factor"],
            topic_min_isr=config["transaction.state.log.min.isr"],
            topic_segment_bytes=config["transaction.state.log.segment.bytes"],
        )
