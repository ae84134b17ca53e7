"""The default partitioner: Kafka's murmur2, Java's toPositive, and sticky spreading."""

from __future__ import annotations

import random

import pytest
from hypothesis import given
from hypothesis import strategies as st
from kafka.partitioner.default import DefaultPartitioner as KafkaPythonPartitioner
from kafka.partitioner.default import murmur2 as kafka_python_murmur2

from odradek.client.partitioner import key_partition, murmur2, next_sticky, to_positive

# Kafka's own test vectors (clients' UtilsTest.testMurmur2): Java's signed int results.
JAVA_MURMUR2 = {
    b"21": -973932308,
    b"foobar": -790332482,
    b"a-little-bit-long-string": -985981536,
    b"a-little-bit-longer-string": -1486304829,
    b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8": -58897971,
    b"abc": 479470107,
}


def test_murmur2_gives_javas_values():
    for data, expected in JAVA_MURMUR2.items():
        assert murmur2(data) == expected, data


def test_murmur2_of_every_tail_length_and_empty_input():
    # 0..3 trailing bytes take different branches; kafka-python is an independent port.
    for n in range(12):
        data = bytes(range(200, 200 + n))
        assert murmur2(data) & 0xFFFFFFFF == kafka_python_murmur2(data)


@given(st.binary(max_size=300))
def test_murmur2_matches_kafka_python(data):
    assert murmur2(data) & 0xFFFFFFFF == kafka_python_murmur2(data)
    assert -(2**31) <= murmur2(data) < 2**31


def test_murmur2_takes_any_bytes_like_object_and_nothing_else():
    assert murmur2(memoryview(b"xfoobarx")[1:-1]) == murmur2(bytearray(b"foobar")) == JAVA_MURMUR2[b"foobar"]
    with pytest.raises(TypeError):
        murmur2("foobar")


def test_to_positive_is_javas_mask_not_abs():
    assert to_positive(-1) == 0x7FFFFFFF
    assert to_positive(-(2**31)) == 0
    assert to_positive(5) == 5


class _Cluster:
    """The three questions kafka-python's partitioner asks its cluster metadata."""

    def __init__(self, n: int) -> None:
        self.n = n

    def topics(self):
        return {"t"}

    def partitions_for_topic(self, topic):
        return set(range(self.n))

    def available_partitions_for_topic(self, topic):
        return set(range(self.n))


def test_key_partition_matches_kafka_pythons_default_partitioner():
    rng = random.Random(7)
    theirs = KafkaPythonPartitioner()
    for _ in range(3000):
        key = rng.randbytes(rng.randrange(0, 40))
        n = rng.randrange(1, 64)
        assert key_partition(key, n) == theirs.partition("t", key, key, None, None, _Cluster(n))


def test_next_sticky_never_repeats_when_there_is_a_choice():
    rng = random.Random(1)
    previous = 0
    seen = set()
    for _ in range(500):
        chosen = next_sticky(previous, [0, 1, 2, 3], 4, rng)
        assert chosen != previous
        seen.add(chosen)
        previous = chosen
    assert seen == {0, 1, 2, 3}


def test_next_sticky_picks_only_partitions_with_a_leader():
    rng = random.Random(2)
    assert {next_sticky(-1, [2, 5], 8, rng) for _ in range(100)} == {2, 5}
    assert next_sticky(3, [3], 8, rng) == 3  # the only one available, even if it repeats
    assert 0 <= next_sticky(-1, [], 4, rng) < 4  # none led: any partition
