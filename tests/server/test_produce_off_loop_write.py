"""The produce fast path with its appends written off the loop (``storage/pending_appends.py``,
``server/written_appends.py``), through a real broker.

With ``OFF_LOOP_APPEND_BYTES`` set (off by default), a request whose append is at least that
is answered only once written;
until then fetches see neither its records nor a high watermark past them; requests from
several connections to one partition land in order with contiguous offsets; a failed write
is answered KAFKA_STORAGE_ERROR and leaves nothing behind. ``_segment_writer.hold()`` keeps
the writer's thread from writing, so the test can look while an append is pending.
"""

from __future__ import annotations

import os
import socket
import threading

import pytest

from odradek.protocol.generated.error_codes import ErrorCode
from odradek.records.reader import iter_batches
from odradek.replication import partition as partition_module
from odradek.storage import _segment_writer
from odradek.testing.broker import InProcessBroker
from tests.server.clients import unique_topic
from tests.server.full_disk import full_disk  # noqa: F401 (the fixture)
from tests.server.group_clients import create_topic, wait_for
from tests.server.wire import WireClient, fetch_body, produce_body, simple_batch

RECORD = 1000
OFF_LOOP_APPEND_BYTES = 256 * 1024  # (off by default: replication/partition.py)


@pytest.fixture(autouse=True)
def off_loop(monkeypatch):
    monkeypatch.setattr(partition_module, "OFF_LOOP_APPEND_BYTES", OFF_LOOP_APPEND_BYTES)


def big_batch(tag: bytes) -> bytes:
    """One batch above OFF_LOOP_APPEND_BYTES (so written off the loop)."""
    count = OFF_LOOP_APPEND_BYTES // RECORD + 10
    return simple_batch([tag.ljust(RECORD, b".") for _ in range(count)])


@pytest.fixture
def broker(tmp_path):
    with InProcessBroker(tmp_path / "data") as b:
        yield b


def produce(client: WireClient, records: bytes):
    _, body = client.request("Produce", 9, produce_body(topic_of(client), 0, records))
    answer = body.responses[0].partition_responses[0]
    return answer.error_code, answer.base_offset


def topic_of(client):
    return client.topic


def connect(broker, topic) -> WireClient:
    client = WireClient(broker.bootstrap)
    client.topic = topic
    return client


def fetched(client: WireClient, offset: int):
    """(high watermark, [(offset, value)]) of a Fetch of partition 0 from ``offset``."""
    _, body = client.request("Fetch", 11, fetch_body(client.topic, 0, offset))
    part = body.responses[0].partitions[0]
    records = [(r.offset, r.value) for b in iter_batches(bytes(part.records or b"")) for r in b.records()]
    return part.high_watermark, records


def test_answered_once_written_and_invisible_before(broker):
    topic = unique_topic("off-loop-visible")
    create_topic(broker.bootstrap, topic, 1)
    producer, consumer = connect(broker, topic), connect(broker, topic)
    log = broker.broker.replica_manager.partitions[(topic, 0)].log
    try:
        assert produce(producer, simple_batch([b"small"])) == (ErrorCode.NONE, 0)
        _segment_writer.hold()
        try:
            batch = big_batch(b"big")
            producer.send_raw(producer.frame("Produce", 9, produce_body(topic, 0, batch)))
            wait_for(lambda: log.next_offset > 1)  # begun: its offsets are taken
            assert fetched(consumer, 0) == (1, [(0, b"small")])
            assert fetched(consumer, 1) == (1, [])
            assert log.log_end_offset == 1
            producer.sock.settimeout(0.3)
            with pytest.raises(socket.timeout):  # no answer while the write cannot happen
                producer.recv_frame()
            producer.sock.settimeout(10)
        finally:
            _segment_writer.release()
        _, body = producer.response("Produce", 9)
        answer = body.responses[0].partition_responses[0]
        assert (answer.error_code, answer.base_offset) == (ErrorCode.NONE, 1)
        count = len(list(iter_batches(batch))[0].records())
        high_watermark, records = fetched(consumer, 1)
        assert high_watermark == 1 + count and [o for o, _ in records] == list(range(1, 1 + count))
    finally:
        producer.close()
        consumer.close()


def test_concurrent_producers_land_in_order_with_contiguous_offsets(broker):
    topic = unique_topic("off-loop-order")
    create_topic(broker.bootstrap, topic, 1)
    clients = [connect(broker, topic) for _ in range(3)]
    answers: dict[int, list] = {}

    def run(i: int, client: WireClient) -> None:
        frames = [client.frame("Produce", 9, produce_body(topic, 0, big_batch(b"c%d-%d" % (i, k))))
                  for k in range(4)]
        client.send_raw(b"".join(frames))  # pipelined: several pending at once
        answers[i] = []
        for k in range(4):
            _, body = client.response("Produce", 9)
            answer = body.responses[0].partition_responses[0]
            answers[i].append((answer.error_code, answer.base_offset, b"c%d-%d" % (i, k)))

    threads = [threading.Thread(target=run, args=(i, c)) for i, c in enumerate(clients)]
    try:
        for t in threads:
            t.start()
        for t in threads:
            t.join(30)
        count = OFF_LOOP_APPEND_BYTES // RECORD + 10
        placed = sorted((base, tag) for a in answers.values() for error, base, tag in a if error == 0)
        assert len(placed) == 12 and [base for base, _ in placed] == [k * count for k in range(12)]
        for i in range(3):  # each connection's requests in its order
            bases = [base for _, base, _ in answers[i]]
            assert bases == sorted(bases)
        offset, seen = 0, []
        while True:
            high_watermark, records = fetched(clients[0], offset)
            if not records:
                break
            seen += records
            offset = records[-1][0] + 1
        assert high_watermark == 12 * count and [o for o, _ in seen] == list(range(12 * count))
        for base, tag in placed:
            assert {v.rstrip(b".") for _, v in seen[base:base + count]} == {tag}
    finally:
        for c in clients:
            c.close()


def test_a_failed_write_is_answered_storage_error_and_leaves_nothing(full_disk):  # noqa: F811
    """A full disk (ENOSPC: not a failed directory) refuses the write made off the loop."""
    broker = full_disk
    topic = unique_topic("off-loop-error")
    create_topic(broker.bootstrap, topic, 1)
    client = connect(broker, topic)
    log = broker.broker.replica_manager.partitions[(topic, 0)].log
    try:
        assert produce(client, simple_batch([b"small"])) == (ErrorCode.NONE, 0)
        segment = log.active_segment
        size = segment.size
        broker.fs.fill()
        assert produce(client, big_batch(b"lost"))[0] == ErrorCode.KAFKA_STORAGE_ERROR
        assert log.log_end_offset == log.next_offset == 1
        assert segment.size == size and os.path.getsize(segment.log_path) == size
        broker.fs.free()
        assert produce(client, big_batch(b"kept")) == (ErrorCode.NONE, 1)
        _, records = fetched(client, 0)
        assert records[0] == (0, b"small") and {v.rstrip(b".") for _, v in records[1:]} == {b"kept"}
    finally:
        client.close()
