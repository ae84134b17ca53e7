"""Errors met while reading one partition's log, answered for that partition alone.

A Fetch or ListOffsets names many partitions; a damaged segment of one of them must not take
the others (or the connection) down with it. As Kafka's ``ReplicaManager.readFromLog``
does, the handler catches what the read raised and answers it in that partition's error
code:

- bytes that are not well-formed batches (``CorruptSegmentError``, ``CorruptRecordError``):
  CORRUPT_MESSAGE;
- an I/O error of the log directory (``OSError``) or another ``StorageError``:
  KAFKA_STORAGE_ERROR; an ``OSError`` also fails the log's directory, as Kafka's
  ``maybeHandleIOException`` does (``LogManager.report_read_error``);
- anything else (a bug): UNKNOWN_SERVER_ERROR, logged with its traceback.

Consumers stuck on such a partition ask again and again, so the log line is rate-limited per
partition and kind of error (``LogRateLimiter``).
"""

from __future__ import annotations

import logging

from odradek.protocol.generated.error_codes import ErrorCode
from odradek.records.errors import CorruptRecordError
from odradek.storage.errors import CorruptSegmentError, StorageError

log = logging.getLogger("odradek.server.read")


def read_error_code(exc: BaseException) -> ErrorCode:
    """The partition error code that answers ``exc`` raised by a read of the log."""
    if isinstance(exc, (CorruptSegmentError, CorruptRecordError)):
        return ErrorCode.CORRUPT_MESSAGE
    if isinstance(exc, (StorageError, OSError)):
        return ErrorCode.KAFKA_STORAGE_ERROR
    return ErrorCode.UNKNOWN_SERVER_ERROR


def answer_read_error(broker, what: str, topic: str, partition: int, exc: Exception) -> ErrorCode:
    """Log ``exc`` (rate-limited) and return the error code for partition ``topic-partition``.

    ``what`` names the operation in the log line ("fetch", "offset lookup").
    """
    code = read_error_code(exc)
    if isinstance(exc, OSError):
        broker.log_manager.report_read_error(topic, partition, exc)
    broker.log_limiter.error(
        log, ("read", what, topic, partition, type(exc)),
        "%s of %s-%d answered %s: %s", what, topic, partition, code.name, exc,
        exc_info=exc if code == ErrorCode.UNKNOWN_SERVER_ERROR else None,
    )
    return code
