"""Large requests are received in place, into a buffer the connection reuses: whatever the
way they arrive (one by one, pipelined, split at random), every batch lands in the log as
sent and every request gets its answer."""

from __future__ import annotations

import random
import time

from odradek.protocol.generated.error_codes import ErrorCode
from odradek.server.connection import FRAME_REUSE_LIMIT
from tests.server.test_bad_input import create_topic, fetch_values
from tests.server.wire import WireClient, produce_body, simple_batch


def big_batch(tag: int, count: int = 500) -> tuple[bytes, list[bytes]]:
    """A ~100-250 KB batch of records whose values say which batch and record they are."""
    values = [b"%04d:%05d:" % (tag, i) + bytes([65 + tag % 26]) * (100 + 40 * (tag % 5)) for i in range(count)]
    return simple_batch(values), values


def produce_frames(client: WireClient, topic: str, batches: list[bytes]) -> list[bytes]:
    return [client.frame("Produce", 9, produce_body(topic, 0, b)) for b in batches]


def check_answers(client: WireClient, n: int) -> list[int]:
    offsets = []
    for _ in range(n):
        _, resp = client.response("Produce", 9)
        part = resp.responses[0].partition_responses[0]
        assert part.error_code == ErrorCode.NONE
        offsets.append(part.base_offset)
    return offsets


def test_large_produces_one_by_one_pipelined_and_split_land_verbatim(broker):
    client = WireClient(broker.bootstrap)
    create_topic(client, "big")
    made = [big_batch(i) for i in range(10)]
    frames = produce_frames(client, "big", [b for b, _ in made])
    # One by one, each answered before the next is sent.
    for f in frames[:4]:
        client.send_raw(f)
        check_answers(client, 1)
    # Pipelined: four frames in one send.
    client.send_raw(b"".join(frames[4:8]))
    check_answers(client, 4)
    # Split at random points, so frames begin mid-read and end across reads.
    stream = b"".join(frames[8:])
    rng = random.Random(8)
    pos = 0
    while pos < len(stream):
        n = rng.choice([1, 7, 4096, 65_536, 300_000])
        client.send_raw(stream[pos:pos + n])
        pos += n
    offsets = check_answers(client, len(frames) - 8)
    assert offsets == sorted(offsets)
    expected = [v for _, values in made for v in values]
    got = []
    while len(got) < len(expected):
        got += fetch_values(client, "big", len(got))
    assert got == expected
    client.close()


def test_a_corrupt_batch_among_pipelined_ones_of_other_sizes_is_refused_alone(broker):
    """Frames received in place, cut at random, one of them with a flipped record byte: that
    one is answered CORRUPT_MESSAGE and stored nowhere, the others land as sent."""
    client = WireClient(broker.bootstrap)
    create_topic(client, "crc")
    made = [big_batch(i) for i in range(5)]
    batches = [b for b, _ in made]
    corrupt = bytearray(batches[2])
    corrupt[corrupt.index(b"0002:00250:") + 12] ^= 0x01  # a value byte: only the CRC can tell
    batches[2] = bytes(corrupt)
    stream = b"".join(produce_frames(client, "crc", batches))
    rng = random.Random(2)
    pos = 0
    while pos < len(stream):
        n = rng.choice([3, 4096, 70_000, 250_000])
        client.send_raw(stream[pos:pos + n])
        pos += n
    errors = []
    for _ in batches:
        _, resp = client.response("Produce", 9)
        errors.append(resp.responses[0].partition_responses[0].error_code)
    assert errors == [0, 0, ErrorCode.CORRUPT_MESSAGE, 0, 0]
    expected = [v for i, (_, values) in enumerate(made) if i != 2 for v in values]
    got = []
    while len(got) < len(expected):
        got += fetch_values(client, "crc", len(got))
    assert got == expected
    client.close()


def test_a_connection_closed_mid_frame_gives_back_its_memory_and_others_go_on(broker):
    client = WireClient(broker.bootstrap)
    create_topic(client, "half")
    batch, values = big_batch(1)
    (whole,) = produce_frames(client, "half", [batch])
    client.send_raw(whole)
    check_answers(client, 1)
    client.send_raw(whole[: len(whole) // 2])  # into the connection's kept buffer, then gone
    client.close()
    other = WireClient(broker.bootstrap)
    other.send_raw(produce_frames(other, "half", [batch])[0])
    check_answers(other, 1)
    got = []
    while len(got) < 2 * len(values):
        got += fetch_values(other, "half", len(got))
    assert got == values + values
    pool = broker.broker.memory_pool
    deadline = time.monotonic() + 10
    while pool.used and time.monotonic() < deadline:
        time.sleep(0.01)
    assert pool.used == 0
    other.close()


def test_a_request_beyond_the_kept_buffer_gets_its_own_and_the_next_reuses_the_kept_one(broker):
    """A request above ``FRAME_REUSE_LIMIT`` (four ~0.7 MB batches in one partition's records)
    between ordinary big ones, all pipelined and cut at random: each lands verbatim."""
    client = WireClient(broker.bootstrap)
    create_topic(client, "huge")
    made = [big_batch(tag, count=6000 if 2 <= k <= 5 else 500) for k, tag in enumerate((0, 1, 5, 10, 15, 20, 3))]
    records = [b for b, _ in made]
    frames = [client.frame("Produce", 9, produce_body("huge", 0, r)) for r in
              [records[0], records[1], b"".join(records[2:6]), records[6]]]
    assert len(frames[2]) > FRAME_REUSE_LIMIT
    stream = b"".join(frames)
    rng = random.Random(5)
    pos = 0
    while pos < len(stream):
        n = rng.choice([5, 65_536, 400_000, 1_500_000])
        client.send_raw(stream[pos:pos + n])
        pos += n
    offsets = check_answers(client, len(frames))
    assert offsets == sorted(offsets)
    expected = [v for _, values in made for v in values]
    got = []
    while len(got) < len(expected):
        got += fetch_values(client, "huge", len(got))
    assert got == expected
    client.close()
