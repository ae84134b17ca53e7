"""Errors of the metadata layer.

Two families:

* ``StoreError`` and its subclasses mirror ZooKeeper's result codes, so code written against
  `MetadataStore` behaves the same on the embedded store and on a real ZooKeeper ensemble
  (the kazoo store translates kazoo's exceptions into these at its boundary).
* ``MetadataError`` subclasses are the admin-level failures of topic management. Each carries
  the Kafka ``error_code`` a broker puts in its response (CreateTopics, CreatePartitions,
  DeleteTopics, ...), so request handlers can map them without a lookup table.
"""

from odradek.protocol.generated.error_codes import ErrorCode


class StoreError(Exception):
    """Base of every metadata-store failure."""


class NoNodeError(StoreError):
    """The znode (or, for create, its parent) does not exist."""


class NodeExistsError(StoreError):
    """A znode already exists at the path being created."""


class BadVersionError(StoreError):
    """A conditional write named a version other than the znode's current version."""


class NotEmptyError(StoreError):
    """A znode with children was deleted without ``recursive=True``."""


class NoChildrenForEphemeralsError(StoreError):
    """ZooKeeper forbids children under an ephemeral znode."""


class InvalidPathError(StoreError, ValueError):
    """A path is not absolute, has empty, ``.`` or ``..`` components, or a trailing slash."""


class DataTooLargeError(StoreError, ValueError):
    """A znode's data exceeds the store's limit (ZooKeeper's jute.maxbuffer, 1 MiB)."""


class StoreClosedError(StoreError):
    """The store was used after `close()`."""


class StoreLockedError(StoreError):
    """Another process holds the embedded store's directory."""


class StoreUnavailableError(StoreError):
    """The store cannot be reached (lost connection, expired session)."""


class CorruptStoreError(StoreError):
    """The embedded store's snapshot is unreadable (a torn journal tail is repaired, not this)."""


class MetadataError(Exception):
    """Base of admin-level metadata failures; ``error_code`` is the Kafka error to return."""

    error_code: ErrorCode = ErrorCode.UNKNOWN_SERVER_ERROR


class InvalidTopicError(MetadataError, ValueError):
    """The topic name breaks Kafka's rules or collides with an existing topic."""

    error_code = ErrorCode.INVALID_TOPIC_EXCEPTION


class TopicExistsError(MetadataError):
    """The topic exists already (or is still being deleted)."""

    error_code = ErrorCode.TOPIC_ALREADY_EXISTS


class UnknownTopicError(MetadataError):
    """The topic does not exist."""

    error_code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


class InvalidPartitionsError(MetadataError, ValueError):
    """A partition count or partition numbering is invalid."""

    error_code = ErrorCode.INVALID_PARTITIONS


class InvalidReplicationFactorError(MetadataError, ValueError):
    """The replication factor is not in 1..number of brokers."""

    error_code = ErrorCode.INVALID_REPLICATION_FACTOR


class InvalidReplicaAssignmentError(MetadataError, ValueError):
    """A manual assignment is malformed, or racks are set on only some brokers."""

    error_code = ErrorCode.INVALID_REPLICA_ASSIGNMENT


class InvalidConfigError(MetadataError, ValueError):
    """A config entry is not a pair of strings."""

    error_code = ErrorCode.INVALID_CONFIG


class BrokerIdInUseError(MetadataError):
    """Another live broker is registered with the same broker id."""

    error_code = ErrorCode.INVALID_REQUEST


class MalformedMetadataError(MetadataError, ValueError):
    """A znode's payload is not the JSON document its path promises."""
