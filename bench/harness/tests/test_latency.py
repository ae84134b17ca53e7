"""The latency generator's parts, without timing: the in-place readers of Produce and Fetch
responses against odradek's codec, the non-blocking frame reader, the patched Fetch frame,
the stamps read from fetched batches, and the single-threaded paced producer against a fake
broker on a socket pair. Run: ``.venv/bin/pytest bench/harness/tests -q``."""

from __future__ import annotations

import socket
import struct
import sys
import threading
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))

import pytest

from bench.harness import latency, wire
from bench.harness.raw_produce import build_batch
from odradek.protocol import codec
from odradek.protocol.generated import ApiKey
from odradek.records.batch import set_base_offset, validate

PRODUCE = codec.module("ProduceResponse")
FETCH = codec.module("FetchResponse")


def _produce_response(correlation_id: int, errors: list[int]) -> bytes:
    parts = [PRODUCE.PartitionProduceResponse(index=i, error_code=e, base_offset=100)
             for i, e in enumerate(errors)]
    body = PRODUCE.MESSAGE(responses=[PRODUCE.TopicProduceResponse(name="lat-topic",
                                                                    partition_responses=parts)])
    return codec.encode_response(ApiKey.PRODUCE, wire.PRODUCE_VERSION,
                                 codec.ResponseHeader(correlation_id=correlation_id), body)


def _fetch_response(partitions: list, error_code: int = 0) -> bytes:
    body = FETCH.MESSAGE(error_code=error_code, responses=[
        FETCH.FetchableTopicResponse(topic="lat-topic", partitions=partitions)])
    return codec.encode_response(ApiKey.FETCH, wire.FETCH_VERSION,
                                 codec.ResponseHeader(correlation_id=3), body)


def _partition(index=0, records=b"", error_code=0, aborted=None, hw=42):
    return FETCH.PartitionData(partition_index=index, error_code=error_code, high_watermark=hw,
                               last_stable_offset=hw, log_start_offset=0,
                               aborted_transactions=aborted, records=records)


def test_check_produce_ack_passes_a_good_ack_and_raises_on_any_error():
    wire.check_produce_ack(_produce_response(1, [0]))
    with pytest.raises(wire.BrokerError, match="error 6"):
        wire.check_produce_ack(_produce_response(1, [6]))
    # Another shape goes through the full decode, which still sees the second partition.
    wire.check_produce_ack(_produce_response(1, [0, 0]))
    with pytest.raises(wire.BrokerError, match="lat-topic-1: error 7"):
        wire.check_produce_ack(_produce_response(1, [0, 7]))


def test_check_produce_ack_hands_a_truncated_ack_to_the_full_decode():
    with pytest.raises(codec.DecodeError):
        wire.check_produce_ack(_produce_response(1, [0])[:9])


@pytest.mark.parametrize("aborted", [None, [], [(7, 10), (8, 20)]])
@pytest.mark.parametrize("records", [None, b"", bytes(build_batch(3, 10))])
def test_fetch_records_reads_in_place_what_the_codec_decodes(aborted, records):
    txns = None if aborted is None else [FETCH.AbortedTransaction(producer_id=p, first_offset=o)
                                         for p, o in aborted]
    frame = _fetch_response([_partition(records=records, aborted=txns)])
    hw, got = wire.fetch_records(frame)
    (expected,) = wire.fetch_partitions(frame)
    assert hw == expected.high_watermark == 42
    assert (None if got is None else bytes(got)) == (
        None if expected.records is None else bytes(expected.records))


def test_fetch_records_other_shapes_and_errors():
    batch = bytes(build_batch(2, 10))
    two = _fetch_response([_partition(0, batch, hw=5), _partition(1, b"", hw=9)])
    hw, records = wire.fetch_records(two)
    assert (hw, bytes(records)) == (5, batch)
    assert wire.fetch_records(_fetch_response([])) == (-1, None)
    with pytest.raises(wire.BrokerError, match="error 1"):
        wire.fetch_records(_fetch_response([_partition(error_code=1)]))
    with pytest.raises(wire.BrokerError, match="fetch: error 15"):
        wire.fetch_records(_fetch_response([_partition()], error_code=15))


def test_frame_reader_returns_whole_frames_as_they_complete():
    a, b = socket.socketpair()
    with a, b:
        b.setblocking(False)
        reader = wire.FrameReader(b)
        assert reader.frames() == []
        big = bytes(range(256)) * 1000  # more than one read, and than the socket buffer
        stream = b"".join(struct.pack(">i", len(p)) + p for p in (b"one", big, b"three"))
        writer = threading.Thread(target=a.sendall, args=(stream[:-3],))
        writer.start()
        got = []
        while len(got) < 2:
            got += reader.frames()
        writer.join(10)
        assert got == [b"one", big]
        a.sendall(stream[-3:])
        while len(got) < 3:
            got += reader.frames()
        assert got[2] == b"three"
        a.shutdown(socket.SHUT_WR)
        with pytest.raises(ConnectionError):
            while True:
                reader.frames()


def test_fetch_template_patches_the_fetch_offset():
    frame, at = latency.fetch_template("lat-topic")
    struct.pack_into(">q", frame, at, 123_456)
    _, body = codec.decode_request(bytes(frame[4:]))
    (p,) = body.topics[0].partitions
    assert (body.topics[0].topic, p.fetch_offset, p.partition_max_bytes) == ("lat-topic", 123_456, 4 << 20)
    assert (body.min_bytes, body.max_wait_ms) == (1, 100)


def _stamped(base_offset: int, records: int, stamp: int) -> bytearray:
    batch, at = latency.stamp_template(records, 100)
    struct.pack_into(">q", batch, at, stamp)
    set_base_offset(batch, 0, base_offset)
    return batch


def test_stamped_batches_reads_each_whole_batch_once():
    _, at = latency.stamp_template(3, 100)
    region = bytes(_stamped(0, 3, 111) + _stamped(3, 3, 222) + _stamped(6, 3, 333))
    assert latency.stamped_batches(region, 0, at) == (9, [111, 222, 333])
    assert latency.stamped_batches(region, 3, at) == (9, [222, 333])  # older batches skipped
    assert latency.stamped_batches(region[:-10], 0, at) == (6, [111, 222])  # cut tail
    assert latency.stamped_batches(None, 4, at) == (4, [])


def _fake_broker(sock: socket.socket, requests: int, seen: list, error_at: int = -1) -> None:
    """Answer ``requests`` Produce requests in order; record (correlation id, stamp, batch)."""
    conn = wire.RawConnection.__new__(wire.RawConnection)
    conn.sock, conn._head = sock, bytearray(4)
    for _ in range(requests):
        try:
            frame = conn.recv_frame()
        except (ConnectionError, OSError):
            return  # the producer gave up (the error test) and closed its end
        _, body = codec.decode_request(bytes(frame))
        correlation = struct.unpack_from(">i", frame, 4)[0]
        seen.append((correlation, bytes(body.topic_data[0].partition_data[0].records)))
        answer = _produce_response(correlation, [6 if correlation == error_at else 0])
        try:
            sock.sendall(struct.pack(">i", len(answer)) + answer)
        except (ConnectionError, OSError):
            return  # the producer gave up after an earlier error and closed its end meanwhile


def _paced(monkeypatch, ticks: int, error_at: int = -1):
    ours, theirs = socket.socketpair()
    seen: list = []
    broker = threading.Thread(target=_fake_broker, args=(theirs, ticks, seen, error_at),
                              daemon=True)
    broker.start()

    class Conn(wire.RawConnection):
        def __init__(self, bootstrap):
            self.sock, self._head = ours, bytearray(4)

    monkeypatch.setattr(latency, "RawConnection", Conn)
    template, first_value = latency.stamp_template(50, 100)
    frame = wire.produce_frame("lat-topic", {0: bytes(template)}, acks=1)
    batch_at = frame.index(latency._MARK) - first_value
    try:
        return latency._produce_paced("127.0.0.1:1", frame, batch_at, len(template),
                                      batch_at + first_value, ticks, 0.0005), seen, first_value
    finally:
        broker.join(10)
        theirs.close()


def test_paced_producer_sends_every_batch_stamped_with_its_due_time(monkeypatch):
    (t0, lags, acks), seen, stamp_at = _paced(monkeypatch, 40)
    assert len(lags) == len(acks) == 40 and min(lags) >= 0
    assert [c for c, _ in seen] == list(range(40))
    for i, (_, batch) in enumerate(seen):
        validate(batch)  # the CRC was recomputed after the stamp
        assert struct.unpack_from(">q", batch, stamp_at)[0] == t0 + i * 500_000


def test_paced_producer_raises_the_brokers_error(monkeypatch):
    with pytest.raises(wire.BrokerError, match="error 6"):
        _paced(monkeypatch, 10, error_at=4)
