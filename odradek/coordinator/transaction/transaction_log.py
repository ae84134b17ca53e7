"""The records of ``__transaction_state``: one per transactional id, the last one wins.

Key and value are ``int16 version`` followed by the struct of that version
(``coordinator.versioned_message``; Kafka's ``TransactionLogKey`` / ``TransactionLogValue``
schemas, generated into ``protocol.generated``), so Kafka's tools read our log and we read
theirs::

    key v0:    transactional_id string
    value v0:  producer_id int64, producer_epoch int16, transaction_timeout_ms int32,
               transaction_status int8 (``TransactionState.id``),
               transaction_partitions [topic string, partition_ids [int32]] (null when Empty),
               transaction_last_update_timestamp_ms int64, transaction_start_timestamp_ms int64
    a null value is a tombstone: the transactional id expired (Dead)

Worked example, the key of transactional id "t1"::

    00 00 | 00 02 74 31

We write value v0, as Kafka does for producers without KIP-890's transaction version 2;
v1 (flexible, with tagged previous/next producer ids) is read too. The value does not hold
``last_producer_epoch`` or ``previous_producer_id`` (Kafka's v0 neither): a loaded id has none.
"""

from __future__ import annotations

from dataclasses import dataclass

from odradek.coordinator import versioned_message
from odradek.coordinator.transaction.transaction_metadata import (
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    TxnTransit,
)
from odradek.coordinator.transaction.transaction_state import TransactionState
from odradek.protocol.generated import transaction_log_key, transaction_log_value
from odradek.protocol.generated.transaction_log_value import PartitionsSchema, TransactionLogValue

KEY_VERSION = 0
VALUE_VERSION = 0


class TransactionLogError(ValueError):
    """A record of the transaction log that does not decode."""


@dataclass(frozen=True, slots=True)
class TransactionLogRecord:
    """``transit`` None: a tombstone."""

    transactional_id: str
    transit: TxnTransit | None

    def key_bytes(self) -> bytes:
        key = transaction_log_key.TransactionLogKey(transactional_id=self.transactional_id)
        return versioned_message.encode(transaction_log_key, KEY_VERSION, key)

    def value_bytes(self) -> bytes | None:
        t = self.transit
        if t is None:
            return None
        if t.state in (TransactionState.DEAD, TransactionState.PREPARE_EPOCH_FENCE):
            raise ValueError(f"{t.state.state_name} is never written to the transaction log")
        by_topic: dict[str, list[int]] = {}
        for topic, partition in sorted(t.partitions):
            by_topic.setdefault(topic, []).append(partition)
        partitions = None if t.state == TransactionState.EMPTY else [
            PartitionsSchema(topic=topic, partition_ids=ids) for topic, ids in by_topic.items()]
        value = TransactionLogValue(
            producer_id=t.producer_id, producer_epoch=t.producer_epoch, transaction_timeout_ms=t.timeout_ms,
            transaction_status=t.state.id, transaction_partitions=partitions,
            transaction_last_update_timestamp_ms=t.last_update_ms, transaction_start_timestamp_ms=t.start_ms)
        return versioned_message.encode(transaction_log_value, VALUE_VERSION, value)


def decode_record(key, value) -> TransactionLogRecord:
    """The record with these key and value bytes (``value`` None: a tombstone). Raises
    TransactionLogError when they are malformed."""
    k = _decode(transaction_log_key, key)
    if value is None:
        return TransactionLogRecord(k.transactional_id, None)
    v = _decode(transaction_log_value, value)
    try:
        state = TransactionState.from_id(v.transaction_status)
    except ValueError as e:
        raise TransactionLogError(str(e)) from None
    partitions = frozenset((p.topic, i) for p in v.transaction_partitions or () for i in p.partition_ids)
    transit = TxnTransit(v.producer_id, NO_PRODUCER_ID, v.producer_epoch, NO_PRODUCER_EPOCH,
                         v.transaction_timeout_ms, state, partitions, v.transaction_start_timestamp_ms,
                         v.transaction_last_update_timestamp_ms)
    return TransactionLogRecord(k.transactional_id, transit)


def _decode(module, data):
    version = versioned_message.read_version(data, TransactionLogError, module.NAME)
    return versioned_message.decode(module, version, bytes(data), TransactionLogError)
