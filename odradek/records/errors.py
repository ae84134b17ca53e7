"""Errors raised by the records layer."""


class CorruptRecordError(ValueError):
    """A batch or message set failed validation (Kafka's CORRUPT_MESSAGE)."""


class InvalidRecordError(ValueError):
    """A batch is well-formed but not acceptable (Kafka's INVALID_RECORD)."""
