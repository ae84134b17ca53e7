"""Errors raised by the records layer."""


class CorruptRecordError(ValueError):
    """A batch or message set failed validation (Kafka's CORRUPT_MESSAGE)."""


class DecompressionLimitError(CorruptRecordError):
    """A compressed section decompresses to more than the bytes allowed it."""


class InvalidRecordError(ValueError):
    """A batch is well-formed but not acceptable (Kafka's INVALID_RECORD).

    ``record_errors``: ``(index, message)`` of the records at fault, their index counted
    within their batch, for the KIP-467 ``record_errors`` of a ProduceResponse (v8+).
    """

    def __init__(self, message: str, record_errors: tuple[tuple[int, str], ...] = ()) -> None:
        super().__init__(message)
        self.record_errors = record_errors


class UnsupportedCompressionTypeError(ValueError):
    """A batch names a compression codec this broker does not know (Kafka's
    UNSUPPORTED_COMPRESSION_TYPE)."""
