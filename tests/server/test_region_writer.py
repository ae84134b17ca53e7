"""Fetch responses whose record regions outgrow the socket's buffer (``server/region_writer.py``).

A region the socket cannot take at once is sent with sendfile as the socket drains, and every
later response waits behind it: the client, reading through a small receive buffer, gets each
fetch's bytes whole and in order, exactly the log's, and the pipelined responses after it.
"""

from __future__ import annotations

import socket
import struct

import pytest

from odradek.protocol import codec
from odradek.records.reader import iter_batches
from odradek.testing.broker import InProcessBroker
from tests.server.clients import unique_topic
from tests.server.group_clients import create_topic
from tests.server.wire import WireClient, produce_body, simple_batch

BATCHES = 30
RECORDS = 200  # of 1,000 bytes: ~200 KB a batch, ~6 MB a fetch (more than loopback buffers)


@pytest.fixture
def broker(tmp_path):
    with InProcessBroker(tmp_path / "data") as b:
        yield b


def fetch_request(client: WireClient, topic: str, offset: int) -> bytes:
    m = codec.module("FetchRequest")
    body = m.MESSAGE(replica_id=-1, max_wait_ms=0, min_bytes=0, max_bytes=64 << 20,
                     topics=[m.FetchTopic(topic=topic, partitions=[m.FetchPartition(
                         partition=0, fetch_offset=offset, partition_max_bytes=64 << 20)])])
    return client.frame("Fetch", 11, body)


def test_regions_larger_than_the_socket_buffer_arrive_whole_and_in_order(broker):
    topic = unique_topic("region-writer")
    create_topic(broker.bootstrap, topic, 1)
    producer = WireClient(broker.bootstrap)
    sent = []
    try:
        for i in range(BATCHES):
            values = [(b"%d-%d" % (i, j)).ljust(1000, b".") for j in range(RECORDS)]
            _, body = producer.request("Produce", 9, produce_body(topic, 0, simple_batch(values)))
            assert body.responses[0].partition_responses[0].error_code == 0
            sent += values
    finally:
        producer.close()
    reader = WireClient(broker.bootstrap)
    try:
        # A small receive buffer: the broker's socket fills long before a fetch's region is out.
        reader.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 16 * 1024)
        offsets = (0, RECORDS * 2, 0)
        reader.send_raw(b"".join(fetch_request(reader, topic, o) for o in offsets))
        api_versions = reader.frame("ApiVersions", 0, codec.module("ApiVersionsRequest").MESSAGE())
        reader.send_raw(api_versions)
        for n, offset in enumerate(offsets):
            frame = reader.recv_frame()
            assert struct.unpack_from(">i", frame)[0] == n + 1  # correlation ids in order
            _, body = codec.decode_response(1, 11, frame)
            records = body.responses[0].partitions[0].records
            values = [r.value for b in iter_batches(bytes(records)) for r in b.records()]
            assert values == sent[offset:]
        _, answer = codec.decode_response(18, 0, reader.recv_frame())
        assert answer.error_code == 0
    finally:
        reader.close()
