"""Choosing a partition for a record, exactly as the Java producer's default partitioner does.

Keyed records: ``toPositive(murmur2(serializedKey)) % numPartitions`` over *all* partitions of
the topic (whether their leader is up or not), where ``murmur2`` is Kafka's
``Utils.murmur2`` (32-bit MurmurHash2, seed 0x9747b28c, little-endian 4-byte blocks) and
``toPositive(n) = n & 0x7fffffff`` (``murmur2`` is in C, ``_murmur2.c``: the producer hashes
every keyed record). The same key therefore lands in the same partition from
odradek, the Java client, librdkafka's ``murmur2_random`` and kafka-python.

Records without a key are spread *stickily* (KIP-480): all of them go to one partition until
the batch being filled there is closed (full, or drained by the sender), then a new partition
is picked at random among those with a leader, never the same one twice in a row when there
is a choice. Batches fill faster than with round robin, which is the point.

A custom partitioner is a callable ``(topic, key_bytes, num_partitions) -> int | None``;
returning None hands the record to the default logic above.
"""

from __future__ import annotations

import random

from odradek.client._murmur2 import murmur2  # noqa: F401 - the partitioner's hash, in C


def to_positive(n: int) -> int:
    """Java's ``Utils.toPositive``: clear the sign bit (not abs: -1 maps to 0x7fffffff)."""
    return n & 0x7FFFFFFF


def key_partition(key: bytes, num_partitions: int) -> int:
    """The partition the Java default partitioner gives a serialized key."""
    return (murmur2(key) & 0x7FFFFFFF) % num_partitions


def next_sticky(previous: int, available: list[int], num_partitions: int, rng=random) -> int:
    """A new sticky partition for unkeyed records: random among ``available`` (all partitions
    when none has a leader), different from ``previous`` whenever there is a choice."""
    candidates = available if available else range(num_partitions)
    if len(candidates) == 1:
        return candidates[0]
    while True:
        choice = candidates[rng.randrange(len(candidates))]
        if choice != previous:
            return choice
