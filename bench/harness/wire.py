"""A raw Kafka connection for the load generators: pre-built request frames over a socket.

The load generators must not be the bottleneck, so nothing here runs per record: a Produce
request is encoded once (``produce_frame``) and then sent as it is, only its correlation id
patched; a Fetch response is read into one reused buffer (``recv_frame_into``) and only the
parts the caller needs are decoded. Framing, as in every Kafka request and response::

    int32 size (big-endian, excluding itself) + size bytes
    request bytes 0..7 of the frame after the size: int16 api_key, int16 api_version,
                                                     int32 correlation_id, ...
    response bytes 0..3: int32 correlation_id, ...

Versions: Produce v9 and Fetch v12 (the newest that name topics rather than topic ids, so one
frame serves every broker), ListOffsets v7, Metadata v12. Blocking sockets: a generator runs
its sender and its receiver in two threads (socket calls release the GIL).
"""

from __future__ import annotations

import socket
import struct

from odradek.protocol import codec
from odradek.protocol.generated import ApiKey
from odradek.records.batch import iter_batch_positions, read_header

CLIENT_ID = "odradek-bench"
PRODUCE_VERSION, FETCH_VERSION, LIST_OFFSETS_VERSION, METADATA_VERSION = 9, 12, 7, 12
_SIZE = struct.Struct(">i")
_CORRELATION_AT = 8  # size prefix (4) + api_key (2) + api_version (2)


class BrokerError(RuntimeError):
    """A broker answered a benchmark request with an error code."""


def _frame(api_key: int, version: int, correlation_id: int, body) -> bytearray:
    header = codec.RequestHeader(request_api_key=api_key, request_api_version=version,
                                 correlation_id=correlation_id, client_id=CLIENT_ID)
    payload = codec.encode_request(header, body)
    return bytearray(_SIZE.pack(len(payload)) + payload)


def set_correlation_id(frame: bytearray, correlation_id: int) -> None:
    _SIZE.pack_into(frame, _CORRELATION_AT, correlation_id)


def produce_frame(topic: str, batches: dict[int, bytes], acks: int, correlation_id: int = 0,
                  timeout_ms: int = 30_000) -> bytearray:
    """A Produce v9 request carrying ``batches`` (partition -> v2 record batch bytes)."""
    m = codec.module("ProduceRequest")
    parts = [m.PartitionProduceData(index=p, records=b) for p, b in batches.items()]
    body = m.MESSAGE(acks=acks, timeout_ms=timeout_ms,
                     topic_data=[m.TopicProduceData(name=topic, partition_data=parts)])
    return _frame(ApiKey.PRODUCE, PRODUCE_VERSION, correlation_id, body)


def fetch_frame(topic: str, offsets: dict[int, int], max_bytes: int, partition_max_bytes: int,
                max_wait_ms: int = 0, min_bytes: int = 0, correlation_id: int = 0) -> bytearray:
    """A Fetch v12 request (sessionless) for ``offsets`` (partition -> fetch offset)."""
    m = codec.module("FetchRequest")
    parts = [m.FetchPartition(partition=p, fetch_offset=o, partition_max_bytes=partition_max_bytes)
             for p, o in offsets.items()]
    body = m.MESSAGE(max_wait_ms=max_wait_ms, min_bytes=min_bytes, max_bytes=max_bytes,
                     topics=[m.FetchTopic(topic=topic, partitions=parts)])
    return _frame(ApiKey.FETCH, FETCH_VERSION, correlation_id, body)


def check_produce_response(frame) -> int:
    """Decode a Produce response; raise BrokerError on any partition's error; return the
    number of partitions it answered."""
    _, body = codec.decode_response(ApiKey.PRODUCE, PRODUCE_VERSION, frame)
    n = 0
    for topic in body.responses:
        for p in topic.partition_responses:
            if p.error_code:
                raise BrokerError(f"produce to {topic.name}-{p.index}: error {p.error_code}"
                                  f" {p.error_message or ''}")
            n += 1
    return n


def fetch_partitions(frame) -> list:
    """The partitions of a Fetch response (records are memoryviews into ``frame``)."""
    _, body = codec.decode_response(ApiKey.FETCH, FETCH_VERSION, frame)
    if body.error_code:
        raise BrokerError(f"fetch: error {body.error_code}")
    out = []
    for topic in body.responses:
        for p in topic.partitions:
            if p.error_code:
                raise BrokerError(f"fetch {topic.topic}-{p.partition_index}: error {p.error_code}")
            out.append(p)
    return out


def whole_batches(records) -> tuple[int, int, int]:
    """``(batches, records, next_offset)`` of the whole batches in a fetched region.

    A broker may end a region with part of a batch (Kafka does, when the limit cuts it);
    that tail is ignored, as a consumer does. next_offset is -1 when no batch is whole.
    """
    if records is None:
        return 0, 0, -1
    batches = count = 0
    next_offset = -1
    for pos, size in iter_batch_positions(records):
        if pos + size > len(records):
            break
        h = read_header(records, pos)
        batches += 1
        count += h.records_count
        next_offset = h.base_offset + h.last_offset_delta + 1
    return batches, count, next_offset


class RawConnection:
    """One blocking TCP connection to a broker on loopback."""

    def __init__(self, bootstrap: str, timeout: float = 60.0) -> None:
        host, port = bootstrap.rsplit(":", 1)
        if host not in ("127.0.0.1", "localhost"):
            raise ValueError("the benchmark only talks to loopback brokers")
        self.sock = socket.create_connection((host, int(port)), timeout=timeout)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self._head = bytearray(4)
        self._correlation = 0

    def close(self) -> None:
        self.sock.close()

    def __enter__(self) -> "RawConnection":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def send(self, frame) -> None:
        self.sock.sendall(frame)

    def _recv_exactly(self, view: memoryview) -> None:
        got, n = 0, len(view)
        while got < n:
            k = self.sock.recv_into(view[got:], n - got)
            if k == 0:
                raise ConnectionError("broker closed the connection")
            got += k

    def recv_frame(self) -> bytearray:
        """The next response frame, without its size prefix."""
        self._recv_exactly(memoryview(self._head))
        (size,) = _SIZE.unpack(self._head)
        frame = bytearray(size)
        self._recv_exactly(memoryview(frame))
        return frame

    def recv_frame_into(self, buf: bytearray) -> memoryview:
        """The next response frame read into ``buf`` (grown if too small); a view of it."""
        self._recv_exactly(memoryview(self._head))
        (size,) = _SIZE.unpack(self._head)
        if size > len(buf):
            buf.extend(bytes(size - len(buf)))
        view = memoryview(buf)[:size]
        self._recv_exactly(view)
        return view

    def next_correlation_id(self) -> int:
        self._correlation = (self._correlation + 1) & 0x7FFFFFFF
        return self._correlation

    def round_trip(self, api_key: int, version: int, body):
        """Send one request and decode its response (for set-up calls, not the hot loop)."""
        frame = _frame(api_key, version, self.next_correlation_id(), body)
        self.send(frame)
        _, response = codec.decode_response(api_key, version, self.recv_frame())
        return response

    def log_end_offsets(self, topic: str, partitions) -> dict[int, int]:
        """ListOffsets(latest) for the partitions of ``topic``.

        Tansu 0.6 answers with the last batch's base offset + 1 rather than the log end offset,
        so workloads count what they wrote instead of asking this.
        """
        m = codec.module("ListOffsetsRequest")
        body = m.MESSAGE(replica_id=-1, topics=[m.ListOffsetsTopic(name=topic, partitions=[
            m.ListOffsetsPartition(partition_index=p, timestamp=-1) for p in partitions])])
        response = self.round_trip(ApiKey.LIST_OFFSETS, LIST_OFFSETS_VERSION, body)
        out = {}
        for t in response.topics:
            for p in t.partitions:
                if p.error_code:
                    raise BrokerError(f"list offsets {topic}-{p.partition_index}: {p.error_code}")
                out[p.partition_index] = p.offset
        return out


def high_watermarks(bootstrap: str, topic: str, partitions) -> dict[int, int]:
    """The high watermark of each partition, from one small Fetch (see ``log_end_offsets``
    for why not ListOffsets)."""
    with RawConnection(bootstrap) as conn:
        conn.send(fetch_frame(topic, {p: 0 for p in partitions}, 1, 1, 100, 1))
        return {p.partition_index: p.high_watermark for p in fetch_partitions(conn.recv_frame())}
