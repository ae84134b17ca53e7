"""acquired_records (client/share_consumer_record.py): only acquired offsets are delivered,
with their delivery counts; acquired offsets without a record are gaps."""

from types import SimpleNamespace as NS

from odradek.client.share_consumer_record import acquired_records
from odradek.records.builder import BatchSpec, build_batch
from odradek.records.record import Record


def batch(base: int, offsets, **spec) -> bytes:
    return build_batch([Record(o, 1000 + o, None, b"v%d" % o) for o in offsets], BatchSpec(base_offset=base, **spec))


def acquired(*ranges):
    return [NS(first_offset=f, last_offset=l, delivery_count=c) for f, l, c in ranges]


def test_only_acquired_records_with_their_delivery_counts():
    data = batch(0, range(0, 5)) + batch(5, range(5, 10))
    records, gaps = acquired_records("t", 3, data, acquired((7, 8, 1), (2, 3, 2)))
    assert [(r.offset, r.delivery_count, r.value, r.topic, r.partition) for r in records] == [
        (2, 2, b"v2", "t", 3), (3, 2, b"v3", "t", 3), (7, 1, b"v7", "t", 3), (8, 1, b"v8", "t", 3)]
    assert not gaps


def test_acquired_offsets_without_records_are_gaps():
    data = batch(0, [0, 1, 4])  # 2 and 3 compacted away
    records, gaps = acquired_records("t", 0, data, acquired((0, 5, 1)))
    assert [r.offset for r in records] == [0, 1, 4]
    assert gaps.batches() == [(2, 3, [0]), (5, 5, [0])]


def test_nothing_acquired_nothing_delivered():
    records, gaps = acquired_records("t", 0, batch(0, range(3)), [])
    assert records == [] and not gaps
