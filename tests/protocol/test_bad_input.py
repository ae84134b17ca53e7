"""Hostile and broken frames: every failure is one well-defined DecodeError, quickly."""

from __future__ import annotations

import random
import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from odradek.protocol import codec
from odradek.protocol.generated import APIS
from odradek.protocol.primitives import DecodeError, EncodeBuffer
from tests.protocol.strategies import SPECS, message_strategy

REQUESTS = {s.api_key: s for s in SPECS if s.type == "request"}


def header(api_key: int, version: int, correlation_id: int = 7) -> codec.RequestHeader:
    return codec.RequestHeader(api_key, version, correlation_id, "fuzz")


def request_frame(api_key: int, version: int, body) -> bytes:
    return codec.encode_request(header(api_key, version), body)


def test_unknown_api_key():
    frame = struct.pack(">hhi", 999, 0, 42) + b"\x00\x00"
    with pytest.raises(codec.UnknownApiKeyError) as e:
        codec.decode_request(frame)
    assert e.value.correlation_id == 42


def test_unknown_version_keeps_the_header():
    frame = request_frame(3, 12, codec.module("MetadataRequest").MESSAGE())
    frame = frame[:2] + struct.pack(">h", 99) + frame[4:]
    with pytest.raises(codec.UnsupportedVersionError) as e:
        codec.decode_request(frame)
    assert e.value.header.correlation_id == 7


def test_future_api_versions_request_header_is_read():
    body = codec.module("ApiVersionsRequest").MESSAGE(client_software_name="x", client_software_version="1")
    frame = bytearray(request_frame(18, 3, body))
    frame[2:4] = struct.pack(">h", 77)
    with pytest.raises(codec.UnsupportedVersionError) as e:
        codec.decode_request(bytes(frame))
    assert e.value.header.request_api_version == 77
    assert e.value.header.client_id == "fuzz"


@pytest.mark.parametrize("cut", range(0, 40))
def test_truncated_metadata_request(cut):
    mod = codec.module("MetadataRequest")
    body = mod.MESSAGE(topics=[codec.module("MetadataRequest").MetadataRequestTopic(name="topic-a")])
    frame = request_frame(3, 4, body)
    if cut >= len(frame):
        return
    with pytest.raises(DecodeError):
        codec.decode_request(frame[:cut])


@pytest.mark.parametrize("count", [-2, -(2**31), 2**31 - 1, 10**6])
def test_impossible_array_counts(count):
    # Metadata v4: header, then topics array count.
    frame = codec.encode_request(header(3, 4), codec.module("MetadataRequest").MESSAGE(topics=[]))
    pos = len(frame) - 5  # int32 count + bool
    bad = frame[:pos] + struct.pack(">i", count) + frame[pos + 4 :]
    with pytest.raises(DecodeError):
        codec.decode_request(bad)


def test_negative_string_length_in_required_string():
    mod = codec.module("FindCoordinatorRequest")
    frame = request_frame(10, 0, mod.MESSAGE(key="g"))
    bad = frame[:-3] + struct.pack(">h", -5) + frame[-1:]
    with pytest.raises(DecodeError):
        codec.decode_request(bad)


def test_invalid_varint_in_flexible_request():
    mod = codec.module("MetadataRequest")
    frame = request_frame(3, 12, mod.MESSAGE(topics=None))
    # Replace everything after the header's tagged section with an endless varint.
    hdr = codec.decode_request_header(frame)[1]
    bad = frame[:hdr] + b"\xff" * 12
    with pytest.raises(DecodeError):
        codec.decode_request(bad)


def test_huge_string_length_does_not_allocate():
    frame = struct.pack(">hhih", 10, 0, 1, 0x7FFF) + b"x" * 10
    with pytest.raises(DecodeError):
        codec.decode_request(frame)


def test_produce_records_are_not_copied():
    mod = codec.module("ProduceRequest")
    records = bytes(1 << 20)
    body = mod.MESSAGE(acks=1, timeout_ms=100, topic_data=[mod.TopicProduceData(
        name="t", partition_data=[mod.PartitionProduceData(index=0, records=records)])])
    frame = bytearray(request_frame(0, 9, body))
    _, decoded = codec.decode_request(frame)
    got = decoded.topic_data[0].partition_data[0].records
    assert isinstance(got, memoryview) and got.obj is frame
    assert len(got) == len(records)


def test_fetch_response_keeps_large_records_out_of_line():
    mod = codec.module("FetchResponse")

    class Region:
        size = 5 << 20

    part = mod.PartitionData(partition_index=0, records=Region())
    body = mod.MESSAGE(responses=[mod.FetchableTopicResponse(topic="t", partitions=[part])])
    buf = codec.encode_response_buffer(1, 11, codec.ResponseHeader(correlation_id=3), body)
    assert len(buf) < 200
    assert buf.total_size() == len(buf) + Region.size
    assert any(isinstance(p, Region) for p in buf.parts())


def _mutate(rng: random.Random, frame: bytes) -> bytes:
    data = bytearray(frame)
    choice = rng.randrange(4)
    if choice == 0 and data:  # flip bits
        for _ in range(rng.randint(1, 4)):
            i = rng.randrange(len(data))
            data[i] ^= 1 << rng.randrange(8)
    elif choice == 1:  # truncate
        del data[rng.randrange(len(data) + 1):]
    elif choice == 2 and len(data) > 8:  # overwrite a 4-byte window with a hostile value
        i = rng.randrange(8, len(data))
        data[i:i + 4] = struct.pack(">i", rng.choice([-1, -2, 2**31 - 1, 0x7FFF, 1 << 20]))
    else:  # splice random bytes
        i = rng.randrange(len(data) + 1)
        data[i:i] = rng.randbytes(rng.randint(1, 16))
    return bytes(data)


@settings(max_examples=250)
@given(st.data())
def test_fuzz_mutated_frames_raise_only_decode_errors(data):
    """250 valid frames of random APIs and versions, 20 mutations each: 5000 hostile frames."""
    spec = REQUESTS[data.draw(st.sampled_from(sorted(REQUESTS)))]
    version = data.draw(st.integers(spec.valid.low, spec.valid.high))
    frame = request_frame(spec.api_key, version, data.draw(message_strategy(spec, version)))
    rng = random.Random(data.draw(st.integers(0, 2**32)))
    for _ in range(20):
        try:
            codec.decode_request(_mutate(rng, frame))
        except DecodeError:
            pass


@settings(max_examples=300)
@given(st.binary(max_size=200))
def test_random_bytes_raise_only_decode_errors(data):
    try:
        codec.decode_request(data)
    except DecodeError:
        pass


@given(st.sampled_from(sorted(APIS)), st.binary(min_size=0, max_size=60))
def test_random_bodies_for_every_api(api_key, body):
    lo, hi = APIS[api_key][3], APIS[api_key][4]
    for version in (lo, hi):
        head = EncodeBuffer()
        hv = codec.request_header_version(api_key, version)
        codec._request_header.WRITERS[hv](header(api_key, version), head)
        try:
            codec.decode_request(bytes(head) + body)
        except DecodeError:
            pass
