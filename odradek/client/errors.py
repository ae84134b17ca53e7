"""The client's exceptions: broker error codes, and what goes wrong on the client's side.

Every exception the client raises is a ``KafkaError``. Its ``retriable`` flag says whether the
same operation may succeed if tried again (after a metadata refresh or a backoff): the client
retries those itself until its deadline, and raises them only when time runs out.

- ``BrokerError``: the broker answered with an error code (``code``, an ``ErrorCode``);
  retriable when Kafka's error table says so (``RETRIABLE``). Calls that act on several
  items (admin calls) raise the first failure and list every failed item in ``errors``.
- ``KafkaConnectionError``: a connection could not be made or broke (retriable).
- ``SslAuthenticationError``: the TLS handshake failed (the broker's certificate not trusted,
  or the client's refused): not retriable, as Kafka's ``SslAuthenticationException``.
- ``KafkaTimeoutError``: an operation did not finish within its deadline.
- ``UnsupportedVersionError``: the broker speaks no version of an API the client can use.
- ``BufferFullError``: the producer holds ``buffer_memory`` bytes already (retriable: wait
  with ``AsyncProducer.wait_for_buffer()``).
- ``ClientClosedError``: the client was closed while the operation was pending.
- ``NoOffsetForPartitionError``: a consumer with ``auto_offset_reset="none"`` has no
  position for a partition (a ``BrokerError`` OFFSET_OUT_OF_RANGE when the broker said so).
- ``TransactionStateError``: a transactional call made in a state that does not allow it
  (Java's IllegalStateException: ``send`` outside a transaction, ``commit`` before ``begin``).
- ``TransactionAbortedError``: a record of a transaction that was aborted before it was sent.
"""

from __future__ import annotations

from odradek.protocol.generated.error_codes import RETRIABLE, ErrorCode

__all__ = [
    "BrokerError",
    "BufferFullError",
    "ClientClosedError",
    "KafkaConnectionError",
    "KafkaError",
    "KafkaTimeoutError",
    "NoOffsetForPartitionError",
    "OffsetOutOfRangeError",
    "TransactionAbortedError",
    "TransactionStateError",
    "UnsupportedVersionError",
    "error_for",
    "raise_for",
]


class KafkaError(Exception):
    """Base of every client error."""

    retriable = False


class BrokerError(KafkaError):
    """An error code in a broker's response."""

    def __init__(self, code: int, message: str | None = None, subject: object = None) -> None:
        try:
            self.code = ErrorCode(code)
            name = self.code.name
        except ValueError:  # a code newer than our table
            self.code = code
            name = f"error {code}"
        self.message = message
        self.subject = subject
        self.errors: dict = {subject: self} if subject is not None else {}
        text = name if subject is None else f"{name} for {subject}"
        super().__init__(f"{text}: {message}" if message else text)

    @property
    def retriable(self) -> bool:  # type: ignore[override]
        return self.code in RETRIABLE


class OffsetOutOfRangeError(BrokerError):
    """A fetch position is outside the partition's log and no reset policy applies."""

    def __init__(self, partitions: dict) -> None:
        super().__init__(ErrorCode.OFFSET_OUT_OF_RANGE, f"positions {partitions}")
        self.partitions = partitions


class KafkaConnectionError(KafkaError):
    retriable = True


class SslAuthenticationError(KafkaConnectionError):
    """A connection error that trying again does not cure (the brokers' own connections,
    which catch ``KafkaConnectionError``, still back off and try again, as Kafka's do)."""

    retriable = False


class KafkaTimeoutError(KafkaError):
    retriable = True


class UnsupportedVersionError(KafkaError):
    pass


class BufferFullError(KafkaError):
    retriable = True


class ClientClosedError(KafkaError):
    pass


class NoOffsetForPartitionError(KafkaError):
    def __init__(self, partitions) -> None:
        super().__init__(f"no offset and auto_offset_reset='none' for {sorted(partitions)}")
        self.partitions = set(partitions)


class TransactionStateError(KafkaError):
    """A transactional producer call that its transaction's state does not allow."""


class TransactionAbortedError(KafkaError):
    """The record's transaction was aborted before the record was sent."""


def error_for(code: int, message: str | None = None, subject: object = None) -> BrokerError | None:
    """The exception for an error code, or None for NONE (0)."""
    if code == 0:
        return None
    return BrokerError(code, message, subject)


def raise_for(code: int, message: str | None = None, subject: object = None) -> None:
    """Raise the BrokerError of ``code`` unless it is NONE."""
    if code != 0:
        raise BrokerError(code, message, subject)


def raise_first(errors: dict) -> None:
    """Raise the first of several per-item errors, carrying all of them in ``errors``."""
    failed = {k: e for k, e in errors.items() if e is not None}
    if failed:
        first = next(iter(failed.values()))
        first.errors = failed
        raise first
