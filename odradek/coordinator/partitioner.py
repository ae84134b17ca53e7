"""Which coordinator partition holds a key: a group's ``__consumer_offsets`` partition, a
transactional id's ``__transaction_state`` partition. Kafka's rule, bit for bit.

Kafka computes ``Utils.abs(groupId.hashCode()) % partitionCount``. Java's ``String.hashCode``
runs over UTF-16 code units (a character outside the Basic Multilingual Plane counts as its
two surrogates): ``h = 31 * h + unit``, wrapping at 32 bits (signed). ``Utils.abs`` maps
``Integer.MIN_VALUE`` (which ``Math.abs`` cannot negate) to 0. Matching this exactly lets a
group keep its partition when a cluster moves between Kafka and odradek, and lets tools that
read Kafka's offsets topic find our groups.

Worked example: ``"polygenelubricants".hashCode()`` is ``-2147483648``, so that group lives
in partition 0 for every partition count.
"""

from __future__ import annotations

import struct

_INT32_MIN = -(2**31)


def java_string_hash(text: str) -> int:
    """Java's ``String.hashCode`` of ``text`` (a signed 32-bit int)."""
    data = text.encode("utf-16-be", "surrogatepass")
    h = 0
    for unit in struct.unpack(f">{len(data) // 2}H", data):
        h = (31 * h + unit) & 0xFFFFFFFF
    return h - 2**32 if h & 0x80000000 else h


def partition_for(group_id: str, partition_count: int) -> int:
    """The ``__consumer_offsets`` partition of ``group_id`` among ``partition_count``."""
    if partition_count <= 0:
        raise ValueError(f"partition count must be positive, not {partition_count}")
    h = java_string_hash(group_id)
    return (0 if h == _INT32_MIN else abs(h)) % partition_count
