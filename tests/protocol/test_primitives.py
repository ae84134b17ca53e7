"""The hand-written wire primitives the generated codec calls (``protocol/primitives.py``);
the codec's own tests (round trips, fuzzing, bad input) cover the rest of them."""

import uuid

import pytest

from odradek.protocol import primitives
from odradek.protocol.codec import DecodeError


def test_read_uuid_returns_the_id_and_the_position_after_it():
    value = uuid.uuid4()
    buf = memoryview(b"\x00\x01" + value.bytes + b"\xff")
    assert primitives.read_uuid(buf, 2) == (value, 18)


def test_read_uuid_of_the_same_bytes_twice_gives_equal_ids_from_the_cache():
    value = uuid.uuid4()
    first, _ = primitives.read_uuid(memoryview(value.bytes), 0)
    second, _ = primitives.read_uuid(bytearray(value.bytes), 0)
    assert first == second == value
    assert first is second  # built once


def test_read_uuid_cache_stays_bounded(monkeypatch):
    monkeypatch.setattr(primitives, "UUID_CACHE_MAX", 8)
    monkeypatch.setattr(primitives, "_uuids", {})
    ids = [uuid.uuid4() for _ in range(50)]
    for value in ids:
        assert primitives.read_uuid(value.bytes, 0)[0] == value
        assert len(primitives._uuids) <= 8
    assert primitives.read_uuid(ids[-1].bytes, 0)[0] == ids[-1]


def test_read_uuid_short_buffer_is_a_decode_error():
    with pytest.raises(DecodeError):
        primitives.read_uuid(memoryview(bytes(15)), 0)
