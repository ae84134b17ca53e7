"""Errors raised by the storage layer, named after the Kafka errors the broker maps them to."""

from __future__ import annotations


class StorageError(Exception):
    """Base class of storage errors (Kafka's KAFKA_STORAGE_ERROR when nothing better fits)."""


class OffsetOutOfRangeError(StorageError):
    """A read or lookup asked for an offset outside [log start offset, log end offset].

    Kafka's OFFSET_OUT_OF_RANGE: the consumer then resets its position (Kafka's
    documentation, 'Log', on reads).
    """

    def __init__(self, offset: int, log_start_offset: int, log_end_offset: int) -> None:
        super().__init__(
            f"offset {offset} is out of range [{log_start_offset}, {log_end_offset}]"
        )
        self.offset = offset
        self.log_start_offset = log_start_offset
        self.log_end_offset = log_end_offset


class InvalidAppendOffsetError(StorageError):
    """An append whose offsets do not follow the log end offset (Kafka's
    UnexpectedAppendOffsetException): offsets must strictly increase."""


class RecordBatchTooLargeError(StorageError):
    """The bytes of one append cannot fit in a segment (Kafka's RECORD_BATCH_TOO_LARGE)."""


class CorruptIndexError(StorageError):
    """An index file failed its sanity check; the segment's indexes are rebuilt from the log."""


class CorruptSegmentError(StorageError):
    """A segment holds bytes that are not a well-formed sequence of batches where the log
    expected valid data (found while reading; recovery truncates instead of raising)."""


class InvalidConfigError(StorageError, ValueError):
    """A log configuration value is unknown, mistyped or out of range (Kafka's INVALID_CONFIG)."""


class CheckpointError(StorageError):
    """A checkpoint file is malformed."""


class LogClosedError(StorageError):
    """The log was closed or deleted; the operation cannot proceed."""


class OfflineLogDirsError(StorageError):
    """A partition's log is not found in any live log directory while some directory is
    offline, and the controller did not say the replica is new: its log may be in the
    failed directory, so none is created elsewhere (Kafka's KafkaStorageException from
    ``LogManager.getOrCreateLog``; the broker answers KAFKA_STORAGE_ERROR)."""
