import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st

from odradek.storage.errors import CorruptIndexError
from odradek.storage.offset_index import OffsetIndex
from odradek.storage.time_index import TimeIndex


def test_offset_index_lookup():
    oi = OffsetIndex(100, 10)
    assert oi.lookup(150) == (100, 0)
    for off, pos in [(110, 400), (120, 900), (135, 1500)]:
        oi.append(off, pos)
    assert oi.lookup(99) == (100, 0)
    assert oi.lookup(109) == (100, 0)
    assert oi.lookup(110) == (110, 400)
    assert oi.lookup(134) == (120, 900)
    assert oi.lookup(10**9) == (135, 1500)
    assert oi.lookup_position(899) == (110, 400)
    assert oi.lookup_position(900) == (120, 900)
    assert oi.lookup_position(5) == (100, 0)
    assert oi.last_entry() == (135, 1500)


def test_offset_index_rejects_bad_entries_and_fills():
    oi = OffsetIndex(0, 2)
    oi.append(5, 100)
    with pytest.raises(ValueError):
        oi.append(5, 200)
    with pytest.raises(ValueError):
        oi.append(6, 100)
    with pytest.raises(ValueError):
        oi.append(2**31, 300)
    oi.append(6, 200)
    assert oi.is_full
    with pytest.raises(ValueError):
        oi.append(7, 300)


def test_offset_index_truncate_and_round_trip():
    oi = OffsetIndex(10, 100)
    for i in range(1, 6):
        oi.append(10 + i * 10, i * 1000)
    oi.truncate_to(35)
    assert len(oi) == 2 and oi.last_entry() == (30, 2000)
    again = OffsetIndex.from_bytes(10, 100, oi.to_bytes(), log_size=5000)
    assert again.to_bytes() == oi.to_bytes()


@pytest.mark.parametrize(
    "data, log_size",
    [
        (b"\x00" * 7, 100),  # not whole entries
        (struct.pack(">ii", 5, 10) + struct.pack(">ii", 5, 20), 100),  # offsets repeat
        (struct.pack(">ii", 5, 10) + struct.pack(">ii", 6, 5), 100),  # positions go back
        (struct.pack(">ii", 5, 100), 100),  # points past the log
        (struct.pack(">ii", -1, 10), 100),  # negative relative offset
        (struct.pack(">ii", 1, 1) * 3, 100),  # more entries than allowed (limit 2)
    ],
)
def test_offset_index_sanity_check(data, log_size):
    with pytest.raises(CorruptIndexError):
        OffsetIndex.from_bytes(0, 2, data, log_size)


@given(st.lists(st.integers(1, 50), min_size=0, max_size=60), st.integers(0, 3000))
def test_offset_index_lookup_is_floor(gaps, target):
    oi = OffsetIndex(0, 1000)
    entries = []
    off = pos = 0
    for g in gaps:
        off += g
        pos += g * 3
        oi.append(off, pos)
        entries.append((off, pos))
    expected = max([e for e in entries if e[0] <= target], default=(0, 0))
    assert oi.lookup(target) == expected


def test_time_index():
    ti = TimeIndex(100, 3)
    assert not ti.maybe_append(-1, 100)  # no timestamp: nothing to record
    assert ti.maybe_append(1000, 105)
    assert not ti.maybe_append(1000, 110)  # not larger
    assert ti.maybe_append(2000, 110)
    with pytest.raises(ValueError):
        ti.maybe_append(3000, 109)  # offset backwards
    assert ti.maybe_append(3000, 120)
    assert ti.is_full
    with pytest.raises(ValueError):
        ti.maybe_append(4000, 130)
    assert ti.maybe_append(4000, 130, skip_full_check=True)
    assert ti.lookup_before(500) == 100
    assert ti.lookup_before(1000) == 100
    assert ti.lookup_before(1001) == 105
    assert ti.lookup_before(10**15) == 130
    assert ti.last_entry() == (4000, 130)
    ti.truncate_to(115)
    assert ti.last_entry() == (2000, 110)
    again = TimeIndex.from_bytes(100, 3, ti.to_bytes())
    assert again.to_bytes() == ti.to_bytes()


@pytest.mark.parametrize(
    "data",
    [
        b"\x01" * 13,
        struct.pack(">qi", 50, 1) + struct.pack(">qi", 50, 2),  # timestamps repeat
        struct.pack(">qi", 50, 2) + struct.pack(">qi", 60, 1),  # offsets go back
        struct.pack(">qi", -5, 1),
    ],
)
def test_time_index_sanity_check(data):
    with pytest.raises(CorruptIndexError):
        TimeIndex.from_bytes(0, 10, data)
