"""The records of __consumer_offsets: Kafka's key and value layouts, byte for byte."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st

from odradek.coordinator.group.coordinator_record import (
    CoordinatorRecordError,
    GroupMetadataRecord,
    OffsetCommitRecord,
    decode_record,
)
from odradek.coordinator.group.offset_and_metadata import OffsetAndMetadata
from odradek.protocol.generated import group_metadata_value, offset_commit_value
from odradek.protocol.generated.group_metadata_value import (
    GroupMetadataValue,
    MemberMetadata,
)
from odradek.protocol.primitives import EncodeBuffer


def test_offset_key_bytes_as_in_the_docstring():
    record = OffsetCommitRecord("g", "t", 3, None)
    assert record.key_bytes() == bytes.fromhex("0001 0001 67 0001 74 00000003")
    assert record.value_bytes() is None


def test_offset_value_v3_layout():
    record = OffsetCommitRecord("g", "t", 0, OffsetAndMetadata(42, 7, "md", 1000))
    value = record.value_bytes()
    expected = struct.pack(">hqih", 3, 42, 7, 2) + b"md" + struct.pack(">q", 1000)
    assert value == expected


def test_offset_value_with_expiry_is_v1():
    value = OffsetCommitRecord("g", "t", 0, OffsetAndMetadata(42, 7, "", 1000, 5000)).value_bytes()
    assert value == struct.pack(">hqhqq", 1, 42, 0, 1000, 5000)
    decoded = decode_record(OffsetCommitRecord("g", "t", 0, None).key_bytes(), value)
    assert decoded.offset == OffsetAndMetadata(42, -1, "", 1000, 5000)  # v1 has no leader epoch


def test_group_key_is_version_2():
    assert GroupMetadataRecord("ab", None).key_bytes() == bytes.fromhex("0002 0002 6162")


def _value(version: int, value) -> bytes:
    out = EncodeBuffer()
    out += struct.pack(">h", version)
    group_metadata_value.WRITERS[version](value, out)
    return bytes(out)


@pytest.mark.parametrize("version", [0, 1, 2, 3, 4])
def test_group_values_of_every_version_decode(version):
    """Kafka wrote v0-v2 before 2.3, writes v3, and v4 in its newest releases."""
    member = MemberMetadata(member_id="m", group_instance_id="i" if version >= 3 else None, client_id="c",
                            client_host="/h", rebalance_timeout=300 if version >= 1 else -1,
                            session_timeout=100, subscription=b"sub", assignment=b"asg")
    value = GroupMetadataValue(protocol_type="consumer", generation=4, protocol="range", leader="m",
                               current_state_timestamp=99 if version >= 2 else -1, members=[member])
    decoded = decode_record(GroupMetadataRecord("g", None).key_bytes(), _value(version, value))
    assert decoded.group_id == "g" and decoded.value.generation == 4
    m = decoded.value.members[0]
    assert (m.subscription, m.assignment, m.member_id) == (b"sub", b"asg", "m")
    assert type(m.subscription) is bytes


@pytest.mark.parametrize("version", [0, 1, 2, 3, 4])
def test_offset_values_of_every_version_decode(version):
    out = EncodeBuffer()
    out += struct.pack(">h", version)
    offset_commit_value.WRITERS[version](offset_commit_value.OffsetCommitValue(offset=5, metadata="x", commit_timestamp=1), out)
    decoded = decode_record(OffsetCommitRecord("g", "t", 1, None).key_bytes(), bytes(out))
    assert decoded.offset.offset == 5 and decoded.offset.metadata == "x"


def test_unknown_key_versions_are_skipped_and_garbage_is_an_error():
    assert decode_record(struct.pack(">h", 9) + b"anything", b"") is None  # share groups: skipped
    with pytest.raises(CoordinatorRecordError):  # a KIP-848 consumer group key (3-8) must decode
        decode_record(struct.pack(">h", 5) + b"anything", b"")
    for bad_key in (b"", b"\x00", b"\x00\x01\x00", struct.pack(">h", -1)):
        with pytest.raises(CoordinatorRecordError):
            decode_record(bad_key, None)
    key = OffsetCommitRecord("g", "t", 1, None).key_bytes()
    with pytest.raises(CoordinatorRecordError):
        decode_record(key + b"x", None)  # trailing bytes
    for bad_value in (b"\x00", b"\x00\x03\x00", b"\x00\x09" + bytes(30)):
        with pytest.raises(CoordinatorRecordError):
            decode_record(key, bad_value)


@given(st.text(max_size=20), st.text(max_size=20), st.integers(0, 2**31 - 1), st.integers(-1, 2**62),
       st.integers(-1, 2**31 - 1), st.text(max_size=30), st.integers(0, 2**62),
       st.one_of(st.none(), st.integers(0, 2**62)))
def test_offset_records_round_trip(group, topic, partition, offset, epoch, metadata, stamp, expire):
    value = OffsetAndMetadata(offset, epoch if expire is None else -1, metadata, stamp, expire)
    record = OffsetCommitRecord(group, topic, partition, value)
    assert decode_record(record.key_bytes(), record.value_bytes()) == record


@given(st.binary(max_size=64), st.one_of(st.none(), st.binary(max_size=64)))
def test_random_bytes_never_crash(key, value):
    try:
        decode_record(key, value)
    except CoordinatorRecordError:
        pass
