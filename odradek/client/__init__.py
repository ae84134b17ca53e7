"""odradek's own Kafka client: asyncio first, with a synchronous wrapper.

- ``AsyncProducer`` / ``Producer``: batching per partition, the Java default partitioner,
  compression, acks, idempotence (``producer``, ``sender``, ``record_accumulator``), and
  transactions (``transaction_manager``; ``transactions``: handles, ending a prepared
  transaction from elsewhere).
- ``AsyncConsumer`` / ``Consumer``: assign, seek, poll, offsets by time (``consumer``,
  ``fetcher``, ``offset_fetcher``); group membership with ``subscribe`` to topics or a
  pattern (``group_membership``, ``assignors``, ``topic_filter``, ``rebalance_listener``).
- ``AsyncShareConsumer`` / ``ShareConsumer``: a member of a KIP-932 share group (``share_consumer``,
  ``share_membership``, ``share_fetcher``, ``share_session``): records acquired one member at a
  time, acknowledged (``AcknowledgeType``) ACCEPT, RELEASE or REJECT.
- ``AsyncAdminClient`` / ``AdminClient``: topics, partitions, configs, cluster, records,
  groups (``admin``, ``admin_groups``).
- Underneath: ``connection`` (one broker connection, ApiVersions), ``cluster`` (connections,
  metadata, retries), ``coordinator`` (a group's coordinator).

It speaks only the Kafka protocol (``odradek.protocol``) and record format
(``odradek.records``), so it works against any Kafka-compatible broker.
"""

import importlib

# Each public name and the module that defines it: imported on first use (PEP 562), so that
# ``import odradek.client.topic_partition`` or the admin client alone does not load the
# producer, the consumer and numpy (the CLI starts in a fraction of the time).
_EXPORTS = {
    "AsyncAdminClient": "odradek.client.admin",
    "ElectionType": "odradek.client.admin_elections",
    "PartitionReassignment": "odradek.client.admin_reassignments",
    "AlterConfigOp": "odradek.client.admin_types",
    "AlterConfigOpType": "odradek.client.admin_types",
    "ConfigEntry": "odradek.client.admin_types",
    "ConfigResource": "odradek.client.admin_types",
    "ConfigSource": "odradek.client.admin_types",
    "NewPartitions": "odradek.client.admin_types",
    "NewTopic": "odradek.client.admin_types",
    "ResourceType": "odradek.client.admin_types",
    "RangeAssignor": "odradek.client.assignors",
    "RoundRobinAssignor": "odradek.client.assignors",
    "AsyncConsumer": "odradek.client.consumer",
    "ConsumerRecord": "odradek.client.consumer_record",
    "BrokerError": "odradek.client.errors",
    "BufferFullError": "odradek.client.errors",
    "ClientClosedError": "odradek.client.errors",
    "KafkaConnectionError": "odradek.client.errors",
    "KafkaError": "odradek.client.errors",
    "KafkaTimeoutError": "odradek.client.errors",
    "NoOffsetForPartitionError": "odradek.client.errors",
    "OffsetOutOfRangeError": "odradek.client.errors",
    "TransactionAbortedError": "odradek.client.errors",
    "TransactionStateError": "odradek.client.errors",
    "UnsupportedVersionError": "odradek.client.errors",
    "CommitFailedError": "odradek.client.group_membership",
    "AsyncProducer": "odradek.client.producer",
    "AcknowledgeType": "odradek.client.share_acknowledgements",
    "TopicIdPartition": "odradek.client.share_acknowledgements",
    "AsyncShareConsumer": "odradek.client.share_consumer",
    "ShareStateError": "odradek.client.share_consumer",
    "ShareConsumerRecord": "odradek.client.share_consumer_record",
    "ShareConsumer": "odradek.client.sync_share_consumer",
    "RecordMetadata": "odradek.client.producer_batch",
    "ConsumerRebalanceListener": "odradek.client.rebalance_listener",
    "AdminClient": "odradek.client.sync_admin",
    "Consumer": "odradek.client.sync",
    "Producer": "odradek.client.sync_producer",
    "Blacklist": "odradek.client.topic_filter",
    "TopicFilter": "odradek.client.topic_filter",
    "TopicList": "odradek.client.topic_filter",
    "Whitelist": "odradek.client.topic_filter",
    "OffsetAndMetadata": "odradek.client.topic_partition",
    "OffsetAndTimestamp": "odradek.client.topic_partition",
    "TopicPartition": "odradek.client.topic_partition",
    "ConsumerGroupMetadata": "odradek.client.transactions",
    "TransactionHandle": "odradek.client.transactions",
    "end_transaction": "odradek.client.transactions",
    "end_transaction_async": "odradek.client.transactions",
}

__all__ = [
    "ShareConsumer",
    "ShareConsumerRecord",
    "ShareStateError",
    "AsyncShareConsumer",
    "TopicIdPartition",
    "AcknowledgeType",
    "AdminClient",
    "AlterConfigOp",
    "AlterConfigOpType",
    "AsyncAdminClient",
    "AsyncConsumer",
    "AsyncProducer",
    "Blacklist",
    "BrokerError",
    "BufferFullError",
    "ClientClosedError",
    "CommitFailedError",
    "ConfigEntry",
    "ConfigResource",
    "ConfigSource",
    "Consumer",
    "ConsumerRebalanceListener",
    "ConsumerGroupMetadata",
    "ConsumerRecord",
    "ElectionType",
    "PartitionReassignment",
    "KafkaConnectionError",
    "KafkaError",
    "KafkaTimeoutError",
    "NewPartitions",
    "NewTopic",
    "NoOffsetForPartitionError",
    "OffsetAndMetadata",
    "OffsetAndTimestamp",
    "OffsetOutOfRangeError",
    "Producer",
    "RangeAssignor",
    "RecordMetadata",
    "ResourceType",
    "RoundRobinAssignor",
    "TopicFilter",
    "TopicList",
    "TopicPartition",
    "TransactionAbortedError",
    "TransactionHandle",
    "TransactionStateError",
    "UnsupportedVersionError",
    "Whitelist",
    "end_transaction",
    "end_transaction_async",
]


def __getattr__(name: str):
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # later look-ups skip this function
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
