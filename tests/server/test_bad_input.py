"""Malformed, hostile and unusual traffic: errors or closed connections, never a crash.

After each of these the broker is still up, other connections are undisturbed and nothing
stored is lost.
"""

from __future__ import annotations

import json
import logging
import random
import struct
from pathlib import Path

import pytest

from odradek.protocol.generated.error_codes import ErrorCode
from odradek.records.reader import iter_batches
from tests.server.wire import WireClient, fetch_body, message, produce_body, simple_batch

FIXTURES = Path(__file__).resolve().parent.parent / "protocol" / "fixtures"


def create_topic(client: WireClient, name: str, partitions: int = 1) -> None:
    m = __import__("odradek.protocol.codec", fromlist=["module"]).module("CreateTopicsRequest")
    body = m.MESSAGE(topics=[m.CreatableTopic(name=name, num_partitions=partitions, replication_factor=1)],
                     timeout_ms=5000)
    _, resp = client.request("CreateTopics", 5, body)
    assert resp.topics[0].error_code == ErrorCode.NONE, resp


def fetch_values(client: WireClient, topic: str, offset: int = 0) -> list[bytes]:
    _, resp = client.request("Fetch", 11, fetch_body(topic, 0, offset))
    part = resp.responses[0].partitions[0]
    assert part.error_code == ErrorCode.NONE
    return [r.value for b in iter_batches(part.records) for r in b.records()]


def test_api_versions_of_an_unknown_version_answers_in_v0(broker):
    c = WireClient(broker.bootstrap)
    frame = bytearray(c.frame("ApiVersions", 3, message("ApiVersionsRequest", client_software_name="x",
                                                          client_software_version="1")))
    frame[6:8] = struct.pack(">h", 99)  # the version field, after the 4-byte size and api key
    c.send_raw(bytes(frame))
    _, resp = c.response("ApiVersions", 0)
    assert resp.error_code == ErrorCode.UNSUPPORTED_VERSION
    assert any(k.api_key == 18 for k in resp.api_keys)
    _, ok = c.request("ApiVersions", 3, message("ApiVersionsRequest", client_software_name="x",
                                                 client_software_version="1"))
    assert ok.error_code == 0


@pytest.mark.parametrize("raw", [
    struct.pack(">i", 104857601),                        # bigger than socket.request.max.bytes
    struct.pack(">i", -5),                               # negative size
    struct.pack(">ihhi", 8, 9999, 0, 1),                 # unknown API key
    struct.pack(">ihhi", 8, 3, 99, 1),                   # unknown Metadata version
    struct.pack(">ihhih", 10, 0, 3, 1, 0x7FFF),          # header's client id runs past the frame
    struct.pack(">ihhihi", 14, 0, 9, 1, -1, 0x7FFFFFFF),  # Produce body with an impossible count
])
def test_bad_frames_close_only_their_connection(broker, raw):
    bystander = WireClient(broker.bootstrap)
    bad = WireClient(broker.bootstrap)
    bad.send_raw(raw)
    assert bad.is_closed()
    _, resp = bystander.request("ApiVersions", 0, message("ApiVersionsRequest"))
    assert resp.error_code == 0


def test_a_flood_of_bad_frames_is_a_few_log_lines(broker, caplog):
    caplog.set_level(logging.WARNING)
    for api_key in range(1000, 1200):  # 200 connections, each closed for an unknown API key
        bad = WireClient(broker.bootstrap)
        bad.send_raw(struct.pack(">ihhi", 8, api_key, 0, 1))
        assert bad.is_closed()
        bad.close()
    closes = [r for r in caplog.records if "closing connection" in r.getMessage()]
    assert len(closes) == 1, [r.getMessage() for r in closes]


def test_corrupt_batch_is_refused_and_nothing_is_stored(broker):
    c = WireClient(broker.bootstrap)
    create_topic(c, "corrupt")
    good = simple_batch([b"a", b"b"])
    _, resp = c.request("Produce", 9, produce_body("corrupt", 0, good))
    assert resp.responses[0].partition_responses[0].error_code == 0
    for flip in (21, 30, 61, len(good) - 1):  # attributes, timestamps, records: CRC-covered
        bad = bytearray(simple_batch([b"x"]))
        flip = min(flip, len(bad) - 1)
        bad[flip] ^= 0x10
        _, resp = c.request("Produce", 9, produce_body("corrupt", 0, bytes(bad)))
        assert resp.responses[0].partition_responses[0].error_code == ErrorCode.CORRUPT_MESSAGE
    truncated = simple_batch([b"y"])[:-3]
    _, resp = c.request("Produce", 9, produce_body("corrupt", 0, truncated))
    assert resp.responses[0].partition_responses[0].error_code == ErrorCode.CORRUPT_MESSAGE
    assert fetch_values(c, "corrupt") == [b"a", b"b"]


def test_pipelined_requests_are_answered_in_order(broker):
    c = WireClient(broker.bootstrap)
    create_topic(c, "pipe")
    frames = []
    for i in range(50):
        frames.append(c.frame("Produce", 9, produce_body("pipe", 0, simple_batch([b"%d" % i]))))
        frames.append(c.frame("ApiVersions", 0, message("ApiVersionsRequest")))
    c.send_raw(b"".join(frames))
    expected = list(range(2, 102))  # correlation id 1 was the CreateTopics request
    got = []
    for i in range(100):
        name = "Produce" if i % 2 == 0 else "ApiVersions"
        cid, resp = c.response(name, 9 if name == "Produce" else 0)
        got.append(cid)
        if name == "Produce":
            assert resp.responses[0].partition_responses[0].base_offset == i // 2
    assert got == expected


def test_acks_zero_gets_no_response(broker):
    c = WireClient(broker.bootstrap)
    create_topic(c, "fire")
    c.send_raw(c.frame("Produce", 9, produce_body("fire", 0, simple_batch([b"z"]), acks=0)))
    cid, _ = c.request("ApiVersions", 0, message("ApiVersionsRequest"))
    assert cid == 3  # CreateTopics was 1; the produce, 2, got no response
    assert fetch_values(c, "fire") == [b"z"]


def test_long_poll_fetch_is_woken_by_an_append(broker):
    c = WireClient(broker.bootstrap)
    producer = WireClient(broker.bootstrap)
    create_topic(c, "wake")
    c.send_raw(c.frame("Fetch", 11, fetch_body("wake", 0, 0, max_wait_ms=20000, min_bytes=1)))
    producer.request("Produce", 9, produce_body("wake", 0, simple_batch([b"hello"])))
    c.sock.settimeout(10)
    _, resp = c.response("Fetch", 11)
    records = resp.responses[0].partitions[0].records
    assert [r.value for b in iter_batches(records) for r in b.records()] == [b"hello"]


def _golden_frames() -> list[bytes]:
    index = json.loads((FIXTURES / "index.json").read_text())["fixtures"]
    return [(FIXTURES / e["file"]).read_bytes() for e in index if e["direction"] == "request"]


def _mutate(rng: random.Random, frame: bytes) -> bytes:
    data = bytearray(frame)
    kind = rng.randrange(4)
    if kind == 0:
        for _ in range(rng.randint(1, 6)):
            i = rng.randrange(len(data))
            data[i] ^= 1 << rng.randrange(8)
    elif kind == 1:
        del data[rng.randrange(len(data)):]
    elif kind == 2 and len(data) > 12:
        i = rng.randrange(8, len(data) - 4)
        data[i:i + 4] = struct.pack(">i", rng.choice([-1, -7, 0x7FFFFFFF, 1 << 24]))
    else:
        data[rng.randrange(len(data)):] = rng.randbytes(rng.randint(1, 40))
    return struct.pack(">i", len(data)) + bytes(data)


def test_fuzz_many_connections_then_clients_still_work(broker):
    """3000 random and mutated frames over many connections; the broker serves afterwards."""
    from kafka import KafkaConsumer, KafkaProducer

    rng = random.Random(1121)
    golden = _golden_frames()
    bystander = WireClient(broker.bootstrap)
    create_topic(bystander, "survivor")
    sent = 0
    while sent < 3000:
        c = WireClient(broker.bootstrap, timeout=5)
        try:
            for _ in range(rng.randint(1, 4)):
                if rng.random() < 0.15:
                    payload = rng.randbytes(rng.randint(0, 64))
                    c.send_raw(struct.pack(">i", len(payload)) + payload)
                else:
                    c.send_raw(_mutate(rng, rng.choice(golden)))
                sent += 1
        except OSError:
            pass  # the broker closed this connection: expected for bad frames
        finally:
            c.close()
    _, resp = bystander.request("ApiVersions", 0, message("ApiVersionsRequest"))
    assert resp.error_code == 0
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap)
    producer.send("survivor", b"still here").get(10)
    producer.close()
    consumer = KafkaConsumer("survivor", bootstrap_servers=broker.bootstrap, group_id=None,
                             auto_offset_reset="earliest", consumer_timeout_ms=5000)
    assert [m.value for m in consumer][-1:] == [b"still here"]
    consumer.close()


def test_slow_reader_does_not_block_others(tmp_path):
    """A client that pipelines big fetches and never reads: others are still served."""
    from odradek.testing.broker import InProcessBroker

    with InProcessBroker(tmp_path / "data", queued_max_requests=20) as b:
        c = WireClient(b.bootstrap)
        create_topic(c, "big")
        for _ in range(4):
            c.request("Produce", 9, produce_body("big", 0, simple_batch([b"x" * 200_000])))
        slow = WireClient(b.bootstrap)
        slow.sock.setsockopt(__import__("socket").SOL_SOCKET, __import__("socket").SO_RCVBUF, 4096)
        frame = slow.frame("Fetch", 11, fetch_body("big", 0, 0))
        slow.sock.settimeout(2)
        try:
            for _ in range(2000):  # 1.6 GB of responses if the broker buffered them all
                slow.send_raw(frame)
        except (TimeoutError, OSError):
            pass  # the broker stopped reading from us: backpressure
        for _ in range(3):
            _, resp = c.request("ApiVersions", 0, message("ApiVersionsRequest"))
            assert resp.error_code == 0
        conn = next(x for x in b.broker.connections if len(x.pending) > 0 or x._reading_paused)
        assert conn.transport.get_write_buffer_size() < 8 << 20
        assert len(conn.pending) <= 20


def test_idle_connections_are_closed(tmp_path):
    from odradek.testing.broker import InProcessBroker

    with InProcessBroker(tmp_path / "data", connections_max_idle_ms=300) as b:
        c = WireClient(b.bootstrap)
        c.request("ApiVersions", 0, message("ApiVersionsRequest"))
        assert c.is_closed(timeout=5)


def test_unknown_partition_number_is_unknown_topic_or_partition(broker):
    c = WireClient(broker.bootstrap)
    create_topic(c, "one")
    _, resp = c.request("Produce", 9, produce_body("one", 7, simple_batch([b"x"])))
    assert resp.responses[0].partition_responses[0].error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    _, resp = c.request("Fetch", 11, fetch_body("one", 7, 0))
    assert resp.responses[0].partitions[0].error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    _, resp = c.request("Produce", 9, produce_body("nope", 0, simple_batch([b"x"])))
    assert resp.responses[0].partition_responses[0].error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


def test_failed_acks_zero_produce_closes_the_connection(broker):
    c = WireClient(broker.bootstrap)
    create_topic(c, "zero")
    c.send_raw(c.frame("ApiVersions", 0, message("ApiVersionsRequest")))
    c.send_raw(c.frame("Produce", 9, produce_body("zero", 3, simple_batch([b"z"]), acks=0)))
    cid, _ = c.response("ApiVersions", 0)  # what was queued before is still answered
    assert cid == 2
    assert c.is_closed()
