"""A record as iteration over a consumer yields it: the record plus where it came from.

``poll`` returns ``{TopicPartition: [Record, ...]}`` with ``odradek.records.record.Record``
values (offset, timestamp, key, value, headers) exactly as the decoder made them, so nothing
per record is added on that path. Iterating the consumer (``for``/``async for``) yields one
``ConsumerRecord`` per record instead, which also names its topic and partition.
"""

from __future__ import annotations

from typing import NamedTuple


class ConsumerRecord(NamedTuple):
    topic: str
    partition: int
    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: tuple = ()


_new = tuple.__new__


def consumer_records(tp, records) -> list[ConsumerRecord]:
    """``ConsumerRecord``s of one partition's records (tuple construction, no __init__)."""
    topic, partition = tp
    return [_new(ConsumerRecord, (topic, partition, r.offset, r.timestamp, r.key, r.value, r.headers))
            for r in records]
