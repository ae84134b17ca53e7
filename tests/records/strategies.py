"""Hypothesis strategies and sample data shared by the records tests."""

from hypothesis import strategies as st

from odradek.records.builder import BatchSpec, build_batch
from odradek.records.record import Record

CODECS = [0, 1, 2, 3, 4]
LEGACY_CODECS = [0, 1, 2, 3]

blobs = st.none() | st.binary(max_size=300)
header_lists = st.lists(st.tuples(st.text(max_size=20), blobs), max_size=4).map(tuple)


@st.composite
def record_lists(draw, min_size=0, max_size=20, headers=True):
    """Records with increasing offsets (gaps allowed) and timestamps near a base."""
    count = draw(st.integers(min_size, max_size))
    base_offset = draw(st.integers(0, 2**62))
    base_timestamp = draw(st.integers(-1, 2**45))
    offset = base_offset
    records = []
    for _ in range(count):
        records.append(
            Record(
                offset,
                base_timestamp + draw(st.integers(-(2**33), 2**33)),
                draw(blobs),
                draw(blobs),
                draw(header_lists) if headers else (),
            )
        )
        offset += draw(st.integers(1, 2**20))
    return records


def sample_records(count=30, headers=True, base_offset=100, base_timestamp=1_700_000_000_000):
    """Deterministic records with null and empty keys and values, short and long values."""
    records = []
    for i in range(count):
        key = None if i % 7 == 3 else b"key-%d" % i
        value = None if i % 11 == 5 else (b"" if i % 13 == 0 else b"value %d " % i * (i % 9 + 1))
        hdrs = (("trace", b"t%d" % i), ("nil", None)) if headers and i % 3 == 0 else ()
        records.append(Record(base_offset + i, base_timestamp + 7 * i, key, value, hdrs))
    return records


def sample_batch(codec=0, count=30, **spec):
    """A batch of sample_records with the given codec and spec fields."""
    spec.setdefault("base_offset", 100)
    return build_batch(sample_records(count, base_offset=spec["base_offset"]),
                       BatchSpec(compression=codec, **spec))
