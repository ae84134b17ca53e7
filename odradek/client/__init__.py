"""odradek's own Kafka client: asyncio first, with a synchronous wrapper.

- ``AsyncProducer`` / ``Producer``: batching per partition, the Java default partitioner,
  compression, acks, idempotence (``producer``, ``sender``, ``record_accumulator``), and
  transactions (``transaction_manager``; ``transactions``: handles, ending a prepared
  transaction from elsewhere).
- ``AsyncConsumer`` / ``Consumer``: assign, seek, poll, offsets by time (``consumer``,
  ``fetcher``, ``offset_fetcher``); group membership with ``subscribe`` to topics or a
  pattern (``group_membership``, ``assignors``, ``topic_filter``, ``rebalance_listener``).
- ``AsyncAdminClient`` / ``AdminClient``: topics, partitions, configs, cluster, records,
  groups (``admin``, ``admin_groups``).
- Underneath: ``connection`` (one broker connection, ApiVersions), ``cluster`` (connections,
  metadata, retries), ``coordinator`` (a group's coordinator).

It speaks only the Kafka protocol (``odradek.protocol``) and record format
(``odradek.records``), so it works against any Kafka-compatible broker.
"""

from odradek.client.admin import AsyncAdminClient
from odradek.client.admin_elections import ElectionType
from odradek.client.admin_reassignments import PartitionReassignment
from odradek.client.admin_types import (
    AlterConfigOp,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    NewPartitions,
    NewTopic,
    ResourceType,
)
from odradek.client.assignors import RangeAssignor, RoundRobinAssignor
from odradek.client.consumer import AsyncConsumer
from odradek.client.consumer_record import ConsumerRecord
from odradek.client.errors import (
    BrokerError,
    BufferFullError,
    ClientClosedError,
    KafkaConnectionError,
    KafkaError,
    KafkaTimeoutError,
    NoOffsetForPartitionError,
    OffsetOutOfRangeError,
    TransactionAbortedError,
    TransactionStateError,
    UnsupportedVersionError,
)
from odradek.client.group_membership import CommitFailedError
from odradek.client.producer import AsyncProducer
from odradek.client.producer_batch import RecordMetadata
from odradek.client.rebalance_listener import ConsumerRebalanceListener
from odradek.client.sync import AdminClient, Consumer, Producer
from odradek.client.topic_filter import Blacklist, TopicFilter, TopicList, Whitelist
from odradek.client.topic_partition import (
    OffsetAndMetadata,
    OffsetAndTimestamp,
    TopicPartition,
)
from odradek.client.transactions import (
    ConsumerGroupMetadata,
    TransactionHandle,
    end_transaction,
    end_transaction_async,
)

__all__ = [
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
