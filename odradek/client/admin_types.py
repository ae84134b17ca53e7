"""The values the admin client takes and returns, named as in Kafka's Admin API.

Resource types and config sources carry Kafka's wire numbers (``ConfigResource.Type``,
``DescribeConfigsResponse`` ``ConfigSource``), so they go into requests unchanged.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from enum import IntEnum

from odradek.client.metadata import BrokerInfo, PartitionInfo
from odradek.client.topic_partition import TopicPartition


class ResourceType(IntEnum):
    UNKNOWN = 0
    TOPIC = 2
    BROKER = 4
    BROKER_LOGGER = 8
    CLIENT_METRICS = 16
    GROUP = 32


class ConfigSource(IntEnum):
    UNKNOWN = 0
    DYNAMIC_TOPIC_CONFIG = 1
    DYNAMIC_BROKER_CONFIG = 2
    DYNAMIC_DEFAULT_BROKER_CONFIG = 3
    STATIC_BROKER_CONFIG = 4
    DEFAULT_CONFIG = 5
    DYNAMIC_BROKER_LOGGER_CONFIG = 6
    CLIENT_METRICS_CONFIG = 7
    GROUP_CONFIG = 8


class AlterConfigOpType(IntEnum):
    SET = 0
    DELETE = 1
    APPEND = 2
    SUBTRACT = 3


@dataclass(frozen=True, slots=True)
class NewTopic:
    """A topic to create. ``replica_assignment`` (partition -> broker ids, partitions 0..n-1)
    replaces ``num_partitions`` and ``replication_factor``; -1 means the broker's default."""

    name: str
    num_partitions: int = -1
    replication_factor: int = -1
    replica_assignment: dict[int, list[int]] | None = None
    configs: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class NewPartitions:
    """Grow a topic to ``total_count`` partitions; ``assignments`` lists the replicas of each
    new partition (None: the broker chooses)."""

    total_count: int
    assignments: list[list[int]] | None = None


@dataclass(frozen=True, slots=True)
class ConfigResource:
    type: ResourceType
    name: str

    def __post_init__(self) -> None:
        object.__setattr__(self, "type", ResourceType(self.type))


@dataclass(frozen=True, slots=True)
class ConfigEntry:
    name: str
    value: str | None
    source: ConfigSource = ConfigSource.UNKNOWN
    is_default: bool = False
    read_only: bool = False
    is_sensitive: bool = False
    synonyms: tuple = ()


@dataclass(frozen=True, slots=True)
class AlterConfigOp:
    name: str
    value: str | None = None
    op: AlterConfigOpType = AlterConfigOpType.SET


@dataclass(frozen=True, slots=True)
class TopicDescription:
    name: str
    topic_id: uuid.UUID
    is_internal: bool
    partitions: tuple[PartitionInfo, ...]


@dataclass(frozen=True, slots=True)
class ClusterDescription:
    cluster_id: str | None
    controller_id: int
    brokers: tuple[BrokerInfo, ...]


@dataclass(frozen=True, slots=True)
class GroupListing:
    group_id: str
    protocol_type: str
    state: str = ""
    type: str = ""


@dataclass(frozen=True, slots=True)
class MemberDescription:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    assignment: tuple[TopicPartition, ...] = ()


@dataclass(frozen=True, slots=True)
class GroupDescription:
    group_id: str
    state: str
    protocol_type: str
    protocol: str
    members: tuple[MemberDescription, ...] = ()


# --- transactions (admin_transactions) ----------------------------------------------------
@dataclass(frozen=True, slots=True)
class TransactionListing:
    """One transactional id as ListTransactions names it, with the broker that coordinates it."""

    transactional_id: str
    producer_id: int
    state: str
    coordinator_id: int


@dataclass(frozen=True, slots=True)
class TransactionDescription:
    """A transactional id's state at its coordinator (DescribeTransactions); ``start_time_ms``
    is -1 when no transaction is open, ``partitions`` those in the open transaction."""

    transactional_id: str
    coordinator_id: int
    state: str
    producer_id: int
    producer_epoch: int
    transaction_timeout_ms: int
    start_time_ms: int
    partitions: tuple[TopicPartition, ...] = ()


@dataclass(frozen=True, slots=True)
class ProducerState:
    """An active producer of a partition (DescribeProducers); ``current_txn_start_offset`` is
    the first offset of its open transaction there, -1 when none is open."""

    producer_id: int
    producer_epoch: int
    last_sequence: int
    last_timestamp: int
    coordinator_epoch: int
    current_txn_start_offset: int
