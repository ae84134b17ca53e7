"""The C Produce codec agrees with the generated codec, byte for byte, or answers None.

``parse_request`` must return exactly what ``codec.decode_request`` decodes for the common
Produce request (v3-11, no transactional id, no null records), and None for anything else;
``encode_response`` must write exactly what ``codec.encode_response_frame`` writes.
"""

from __future__ import annotations

import json
import struct
import sys
import tracemalloc
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from odradek.protocol import codec
from odradek.protocol._produce_codec import encode_response, parse_request, within_entry_budget
from odradek.protocol.framing import FrameParser, frame as size_prefixed
from odradek.protocol.generated import ApiKey
from odradek.protocol.generated.produce_request import (
    PartitionProduceData, ProduceRequest, TopicProduceData)
from odradek.protocol.generated.produce_response import (
    PartitionProduceResponse, ProduceResponse, TopicProduceResponse)
from odradek.protocol.primitives import DecodeError

VERSIONS = range(3, 12)
FIXTURES = Path(__file__).parent / "fixtures"

INT16 = st.integers(-(2**15), 2**15 - 1)
INT32 = st.integers(-(2**31), 2**31 - 1)
INT64 = st.integers(-(2**63), 2**63 - 1)
# Long names and records too, so that compact lengths take more than one varint byte.
NAMES = st.text(max_size=12) | st.text(min_size=64, max_size=150)
RECORDS = st.binary(max_size=40) | st.binary(min_size=127, max_size=400)


def tagged_fields(version: int):
    """Unknown tagged fields (sorted by tag, as Kafka writes them) for a flexible version."""
    if version < 9:
        return st.none()
    fields = st.lists(st.tuples(st.integers(0, 2**31), st.binary(max_size=20)),
                      max_size=3, unique_by=lambda f: f[0])
    return st.none() | fields.map(sorted)


@st.composite
def produce_requests(draw, version: int, common: bool = True):
    """(header, body) of a Produce request; ``common=False`` also draws the shapes the fast
    path leaves to the generic codec (a transactional id, null records)."""
    records = RECORDS if common else st.none() | RECORDS
    partition = st.builds(PartitionProduceData, index=INT32, records=records,
                          unknown_tagged_fields=tagged_fields(version))
    topic = st.builds(TopicProduceData, name=NAMES, partition_data=st.lists(partition, max_size=4),
                      unknown_tagged_fields=tagged_fields(version))
    body = draw(st.builds(
        ProduceRequest, transactional_id=st.none() if common else st.none() | NAMES,
        acks=INT16, timeout_ms=INT32, topic_data=st.lists(topic, max_size=3),
        unknown_tagged_fields=tagged_fields(version)))
    header = codec.RequestHeader(ApiKey.PRODUCE, version, draw(INT32), draw(st.none() | NAMES),
                                 unknown_tagged_fields=draw(tagged_fields(version)))
    return header, body


def encode(header, body) -> bytearray:
    return bytearray(codec.encode_request(header, body))


def generic(frame):
    """What the fast path must answer, by the generic decoder: the tuple, or None for a
    request the fast path leaves alone. Raises DecodeError for a malformed frame."""
    header, body = codec.decode_request(bytes(frame))
    if header.request_api_key != ApiKey.PRODUCE or not 3 <= header.request_api_version <= 11:
        return None
    if body.transactional_id is not None:
        return None
    if any(p.records is None for t in body.topic_data for p in t.partition_data):
        return None
    return (header.request_api_version, header.correlation_id, header.client_id, body.acks,
            body.timeout_ms,
            tuple((t.name, tuple((p.index, bytes(p.records)) for p in t.partition_data))
                  for t in body.topic_data))


def plain(result):
    """``parse_request``'s result with its records views made bytes (for comparison)."""
    if result is None:
        return None
    *head, topics = result
    return (*head, tuple((name, tuple((i, bytes(r)) for i, r in parts)) for name, parts in topics))


def example(version: int, client_id: str | None = "c", txn: str | None = None, records=b"batch",
            tagged: bool = True):
    """A fixed request: one topic of two partitions, with tagged fields where allowed."""
    tags = [(3, b"x")] if version >= 9 and tagged else None
    parts = [PartitionProduceData(0, records, unknown_tagged_fields=tags),
             PartitionProduceData(7, b"more records", unknown_tagged_fields=None)]
    body = ProduceRequest(txn, -1, 30000, [TopicProduceData("topic", parts, tags)], tags)
    header = codec.RequestHeader(ApiKey.PRODUCE, version, 42, client_id, unknown_tagged_fields=tags)
    return encode(header, body)


# --- parse_request: agreement with the generic decoder -------------------------------------


@pytest.mark.parametrize("version", VERSIONS)
@settings(max_examples=60)
@given(data=st.data())
def test_parse_agrees_with_the_generic_decoder(version, data):
    frame = encode(*data.draw(produce_requests(version)))
    result = parse_request(frame)
    assert result is not None
    assert plain(result) == generic(frame)
    for _, partitions in result[5]:
        for _, records in partitions:
            assert isinstance(records, memoryview) and not records.readonly


@pytest.mark.parametrize("version", VERSIONS)
@settings(max_examples=30)
@given(data=st.data())
def test_parse_leaves_transactions_and_null_records_to_the_generic_path(version, data):
    frame = encode(*data.draw(produce_requests(version, common=False)))
    assert plain(parse_request(frame)) == generic(frame)


FIXTURE_REQUESTS = [e["file"] for e in json.loads((FIXTURES / "index.json").read_text())["fixtures"]
                    if e["api_name"] == "Produce" and e["direction"] == "request"]


@pytest.mark.parametrize("name", FIXTURE_REQUESTS)
def test_real_clients_requests_take_the_fast_path(name):
    frame = bytearray((FIXTURES / name).read_bytes())
    result = parse_request(frame)
    assert result is not None
    assert plain(result) == generic(frame)


def test_big_request_with_multibyte_lengths():
    """300 partitions and 70 KB records: counts and lengths of several varint bytes."""
    for version in (8, 9, 11):
        parts = [PartitionProduceData(i, bytes([i % 251]) * (70_000 if i == 5 else 200))
                 for i in range(300)]
        body = ProduceRequest(None, 1, 5, [TopicProduceData("t" * 300, parts)])
        frame = encode(codec.RequestHeader(0, version, 1, "é" * 100), body)
        assert plain(parse_request(frame)) == generic(frame)


def test_records_are_views_that_write_through_to_the_frame():
    frame = example(9)
    records = parse_request(frame)[5][0][1][0][1]
    at = frame.find(b"batch")
    records[0:5] = b"BATCH"
    assert frame[at:at + 5] == b"BATCH"
    frame[at] = ord("Z")
    assert bytes(records) == b"ZATCH"


def test_records_behave_as_slices_of_the_frame():
    frame = example(7)
    at = frame.find(b"batch")
    records = parse_request(frame)[5][0][1][0][1]
    same = memoryview(frame)[at:at + 5]
    assert records == same and records.obj is frame
    assert (records.nbytes, records.shape, records.strides, records.format) == (
        same.nbytes, same.shape, same.strides, same.format)
    assert records.c_contiguous and records.contiguous and not records.readonly
    assert bytes(records[1:3]) == b"at" and records[-1] == ord("h")
    assert records.tobytes() == b"batch" and bytes(records[::2]) == b"bth"
    records.release()
    del same
    frame.append(0)  # no export of the frame is left: it may be resized again


def test_records_of_a_memoryview_frame_write_through_to_its_buffer():
    """The broker's frames can be views of the receive buffer, with other bytes after them."""
    payload = example(7)
    buffer = bytearray(b"\x00" * 4 + payload + b"junk")
    frame = memoryview(buffer)[4:4 + len(payload)]
    records = parse_request(frame)[5][0][1][0][1]
    assert records.obj is buffer
    records[0] = ord("B")
    assert buffer[4 + payload.find(b"batch")] == ord("B")


# --- parse_request: None for everything else ------------------------------------------------


@pytest.mark.parametrize("version", VERSIONS)
def test_transactional_id_or_null_records_give_none(version):
    assert parse_request(example(version)) is not None
    assert parse_request(example(version, txn="txn")) is None
    assert parse_request(example(version, txn="")) is None
    assert parse_request(example(version, records=None)) is None


@pytest.mark.parametrize("version", [0, 1, 2])
def test_versions_before_3_give_none(version):
    frame = example(version)
    assert codec.decode_request(bytes(frame))[1].topic_data  # a fine request, but not ours
    assert parse_request(frame) is None


@pytest.mark.parametrize("version", [12, 13, 100, -1])
def test_versions_after_11_give_none(version):
    frame = example(11)
    frame[2:4] = struct.pack(">h", version)
    assert parse_request(frame) is None


@pytest.mark.parametrize("api_key", [1, 3, 18, -1, 999])
def test_other_api_keys_give_none(api_key):
    frame = example(9)
    frame[0:2] = struct.pack(">h", api_key)
    assert parse_request(frame) is None


@pytest.mark.parametrize("version", VERSIONS)
def test_trailing_bytes_give_none(version):
    assert parse_request(example(version) + b"\x00") is None


@pytest.mark.parametrize("version", VERSIONS)
def test_every_truncation_gives_none(version):
    whole = example(version)
    # As bytearrays, and as views of a buffer that holds the rest of the frame after them
    # (bytes the parser must not read).
    for n in range(len(whole)):
        assert parse_request(whole[:n]) is None
        assert parse_request(memoryview(whole)[:n]) is None


def test_invalid_utf8_gives_none():
    for version in (7, 10):
        frame = example(version, client_id="cc")
        at = frame.find(b"cc")
        frame[at:at + 2] = b"\xff\xfe"
        assert parse_request(frame) is None
        frame = example(version)
        at = frame.find(b"topic")
        frame[at] = 0xC0  # a lone lead byte
        assert parse_request(frame) is None
        with pytest.raises(DecodeError):
            codec.decode_request(bytes(frame))


def test_null_client_id_and_empty_topic_list():
    for version in VERSIONS:
        header = codec.RequestHeader(0, version, 5, None)
        frame = encode(header, ProduceRequest(None, 0, 1, []))
        assert parse_request(frame) == (version, 5, None, 0, 1, ())


# A v9 request with client id "c", one topic and no tagged fields: api_key, api_version, correlation_id (8),
# client_id (2 + 1), header tags (1), transactional_id (1), acks (2), timeout (4): the topic
# count is byte 19; the topic name's length then byte 20.
TOPIC_COUNT = 19


def test_compact_null_arrays_give_none():
    frame = example(9, tagged=False)
    assert frame[TOPIC_COUNT] == 2  # one topic
    null_topics = frame[:TOPIC_COUNT] + b"\x00" + frame[TOPIC_COUNT + 1:]
    assert parse_request(null_topics) is None
    name_end = TOPIC_COUNT + 2 + len("topic")
    assert frame[name_end] == 3  # two partitions
    null_partitions = frame[:name_end] + b"\x00" + frame[name_end + 1:]
    assert parse_request(null_partitions) is None


def test_over_long_varints_give_none_and_five_bytes_are_read_as_the_generic_decoder_does():
    frame = example(9, tagged=False)
    five = frame[:TOPIC_COUNT] + b"\x82\x80\x80\x80\x00" + frame[TOPIC_COUNT + 1:]
    assert plain(parse_request(five)) == generic(five) == plain(parse_request(frame))
    six = frame[:TOPIC_COUNT] + b"\x82\x80\x80\x80\x80\x00" + frame[TOPIC_COUNT + 1:]
    assert parse_request(six) is None


def test_impossible_counts_and_lengths_give_none_without_allocating():
    frame = example(7)
    for count in (2**31 - 1, -5, -1):
        topics = frame.find(b"\x00\x00\x00\x01\x00\x05topic")
        bad = frame[:topics] + struct.pack(">i", count) + frame[topics + 4:]
        assert parse_request(bad) is None
    frame = example(10)
    at = frame.find(b"\x06topic")  # compact name length 5 + 1
    for huge in (b"\xff\xff\xff\xff\x07", b"\xff\xff\xff\xff\x0f"):
        assert parse_request(frame[:at] + huge + frame[at + 1:]) is None


def test_non_buffers_raise_type_error():
    for bad in (None, 7, "text", b"read-only bytes"):
        with pytest.raises(TypeError):
            parse_request(bad)


@settings(max_examples=300)
@given(data=st.data())
def test_mutated_frames_give_none_or_what_the_generic_decoder_gives(data):
    """Random byte changes (and insertions and deletions) never crash the parser, and any
    tuple it returns is the generic decoder's answer for the same bytes."""
    version = data.draw(st.sampled_from(VERSIONS))
    frame = encode(*data.draw(produce_requests(version)))
    for _ in range(data.draw(st.integers(1, 4))):
        at = data.draw(st.integers(0, len(frame) - 1))
        kind = data.draw(st.sampled_from(["set", "insert", "delete"]))
        byte = data.draw(st.integers(0, 255) | st.sampled_from([0, 1, 0x7F, 0x80, 0xFF]))
        if kind == "set":
            frame[at] = byte
        elif kind == "insert":
            frame.insert(at, byte)
        elif len(frame) > 1:
            del frame[at]
    result = parse_request(frame)
    if result is not None:
        assert plain(result) == generic(frame)


# --- the frame parser's buffer reuse ---------------------------------------------------------


def test_views_hold_the_frame_exactly_while_alive():
    frame = example(10)
    before = sys.getrefcount(frame)
    result = parse_request(frame)
    assert sys.getrefcount(frame) > before
    del result
    assert sys.getrefcount(frame) == before
    parse_request(frame[:-1])  # None: nothing of the frame is kept
    assert sys.getrefcount(frame) == before


def _receive(parser: FrameParser, data: bytes):
    parser.feed(data)
    return list(parser.frames())


def test_frame_parser_reuses_its_buffer_once_the_records_are_dropped():
    """Buffers are told apart by id (a reference to one would itself keep it from reuse)."""
    parser = FrameParser(scratch_size=16, reuse_limit=4096)
    (first,) = _receive(parser, size_prefixed(example(9)))
    assert isinstance(first, memoryview)  # received in place
    first_buffer = id(first.obj)
    result = parse_request(first)
    del first
    (second,) = _receive(parser, size_prefixed(example(9)))
    assert id(second.obj) != first_buffer  # the kept records are never overwritten
    assert bytes(result[5][0][1][0][1]) == b"batch"
    second_buffer = id(second.obj)
    del second, result
    (third,) = _receive(parser, size_prefixed(example(9)))
    assert id(third.obj) == second_buffer  # reused: no view of it is left
    parse_request(third)  # a result dropped at once
    del third
    (fourth,) = _receive(parser, size_prefixed(example(9)))
    assert id(fourth.obj) == second_buffer


# --- encode_response ---------------------------------------------------------------------------


def generic_response(version, correlation_id, responses, throttle_time_ms=0) -> bytes:
    body = ProduceResponse(
        responses=[TopicProduceResponse(name=name, partition_responses=[
            PartitionProduceResponse(index=i, error_code=e, base_offset=b, log_append_time_ms=t,
                                     log_start_offset=s, error_message=None, current_leader=None)
            for i, e, b, t, s in partitions]) for name, partitions in responses],
        throttle_time_ms=throttle_time_ms)
    return codec.encode_response_frame(ApiKey.PRODUCE, version, correlation_id, body).to_bytes()


RESPONSES = st.lists(st.tuples(NAMES, st.lists(st.tuples(INT32, INT16, INT64, INT64, INT64),
                                               max_size=5)), max_size=4)


@pytest.mark.parametrize("version", VERSIONS)
@settings(max_examples=40)
@given(correlation_id=INT32, responses=RESPONSES, throttle=INT32)
def test_encode_response_is_the_generic_encoding(version, correlation_id, responses, throttle):
    out = encode_response(version, correlation_id, responses, throttle)
    assert out == generic_response(version, correlation_id, responses, throttle)
    assert struct.unpack_from(">i", out)[0] == len(out) - 4
    header, body = codec.decode_response(ApiKey.PRODUCE, version, out[4:])
    assert header.correlation_id == correlation_id
    assert [(t.name, [(p.index, p.error_code, p.base_offset) for p in t.partition_responses])
            for t in body.responses] == [(n, [p[:3] for p in ps]) for n, ps in responses]


def test_encode_response_defaults_keywords_and_sequences():
    responses = [("topic", [(0, 0, 100, -1, 0), (1, 6, -1, -1, -1)])]
    for version in VERSIONS:
        expected = generic_response(version, 9, responses)
        assert encode_response(version, 9, responses) == expected
        assert encode_response(version, 9, responses, throttle_time_ms=0) == expected
        assert encode_response(api_version=version, correlation_id=9, responses=responses) == expected
        as_tuples = tuple((n, tuple(ps)) for n, ps in responses)
        assert encode_response(version, 9, as_tuples) == expected


def test_encode_big_response_grows_its_buffer():
    responses = [(f"topic-{t}" * 20, [(p, 0, p * 1000, -1, 0) for p in range(200)])
                 for t in range(30)]
    for version in (3, 8, 9, 11):
        assert encode_response(version, 1, responses) == generic_response(version, 1, responses)


@pytest.mark.parametrize("args,error", [
    ((2, 1, []), ValueError), ((12, 1, []), ValueError), ((9, 2**31, []), OverflowError),
    ((9, 1, [("t", [(2**31, 0, 0, 0, 0)])]), OverflowError),
    ((9, 1, [("t", [(0, 2**15, 0, 0, 0)])]), OverflowError),
    ((9, 1, [("t", [(0, 0, 2**63, 0, 0)])]), OverflowError),
    ((9, 1, [], 2**31), OverflowError),
    ((9, 1, [("t", [(0, 0, 0, 0)])]), ValueError), ((9, 1, [("t",)]), ValueError),
    ((9, 1, [(b"t", [])]), TypeError), ((9, 1, None), TypeError), ((9, 1, [("t", 5)]), TypeError),
    ((9, 1, [("t", [(0, 0, 0.5, 0, 0)])]), TypeError), ((9, "1", []), TypeError),
    ((3, 1, [("\ud800", [])]), UnicodeEncodeError), ((3, 1, [("t" * 40000, [])]), ValueError),
    ((9,), TypeError), ((9, 1, [], 0, 0), TypeError),
])
def test_encode_response_rejects_bad_arguments(args, error):
    with pytest.raises(error):
        encode_response(*args)
    with pytest.raises(TypeError):
        encode_response(9, 1, [], throttle=0)
    with pytest.raises(TypeError):
        encode_response(9, 1, [], api_version=9)


# --- what one request may decode into ---------------------------------------------------------


def tiny_entries_frame(version: int, topics: int, partitions: int = 0) -> bytearray:
    """A Produce request of ``topics`` minimal topics (empty names), the first of them with
    ``partitions`` minimal partitions (empty records): a few bytes per entry."""
    flexible = version >= 9
    count = (lambda n: encode_uvarint(n + 1)) if flexible else (lambda n: struct.pack(">i", n))
    tags = b"\x00" if flexible else b""
    header = struct.pack(">hhi", 0, version, 1) + struct.pack(">h", -1) + tags
    body = (b"\x00" if flexible else struct.pack(">h", -1)) + struct.pack(">hi", 1, 30000)
    name = b"\x01" if flexible else b"\x00\x00"  # an empty name
    partition = struct.pack(">i", 0) + (b"\x01" if flexible else b"\x00\x00\x00\x00") + tags
    first = name + count(partitions) + partition * partitions + tags
    rest = (name + count(0) + tags) * (topics - 1)
    return bytearray(header + body + count(topics) + first + rest + tags)


def encode_uvarint(n: int) -> bytes:
    out = bytearray()
    while n >= 0x80:
        out.append(n & 0x7F | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def peak_bytes(fn, *args) -> int:
    tracemalloc.start()
    try:
        fn(*args)
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


@pytest.mark.parametrize("version", [3, 9])
@pytest.mark.parametrize("topics, partitions", [(1_000_000, 0), (1, 500_000)])
def test_a_frame_of_tiny_entries_is_declined_with_bounded_memory(version, topics, partitions):
    """Megabytes of minimal topics (or partitions) would decode into 20-45 times their size
    in objects (64 MB for 3 MB); over 64 + size / 32 entries the fast path declines at the
    count, before allocating for it, and the generic decoder refuses it without decoding."""
    frame = tiny_entries_frame(version, topics, partitions)
    assert len(frame) >= 3_000_000
    assert peak_bytes(parse_request, frame) < 100_000
    assert parse_request(frame) is None
    assert not within_entry_budget(frame)

    def generic_decode():
        with pytest.raises(DecodeError, match="entries"):
            codec.decode_request(frame)

    assert peak_bytes(generic_decode) < 100_000


@pytest.mark.parametrize("version", [3, 9])
def test_entries_up_to_the_budget_decode_and_valid_requests_stay_far_below_it(version):
    frame = tiny_entries_frame(version, 10, 5)  # 15 entries: within the base of 64
    assert parse_request(frame) is not None and within_entry_budget(frame)
    codec.decode_request(frame)
    # Many topics of one partition each, each with the smallest record batch (61 bytes) and
    # one-letter names: the densest valid request, still within the budget.
    batch = b"b" * 61
    parts = lambda: [PartitionProduceData(0, batch)]  # noqa: E731
    body = ProduceRequest(None, 1, 30000, [TopicProduceData(chr(65 + i % 26), parts()) for i in range(5000)])
    header = codec.RequestHeader(ApiKey.PRODUCE, version, 42, None)
    frame = encode(header, body)
    assert within_entry_budget(frame)
    assert len(parse_request(frame)[5]) == 5000
