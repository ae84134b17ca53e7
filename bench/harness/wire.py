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
frame serves every broker), ListOffsets v7, Metadata v12. Blocking sockets: a throughput
generator runs its sender and its receiver in two threads (socket calls release the GIL). The
latency generator must not hand the GIL back and forth at every tick, so it reads its acks on
the sending thread: ``FrameReader`` takes whole frames off a non-blocking socket, and
``check_produce_ack`` / ``fetch_records`` read the one partition of a response in place,
falling back to the full decode for any other shape.
"""

from __future__ import annotations

import socket
import struct

from odradek.protocol import codec
from odradek.protocol.generated import ApiKey
from odradek.protocol.varint import VarintError, read_uvarint
from odradek.records.batch import iter_batch_positions, read_header

CLIENT_ID = "odradek-bench"
PRODUCE_VERSION, FETCH_VERSION, LIST_OFFSETS_VERSION, METADATA_VERSION = 9, 12, 7, 12
_SIZE = struct.Struct(">i")
_I16 = struct.Struct(">h")
_I64 = struct.Struct(">q")
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


class _OtherShape(Exception):
    """A response the in-place readers do not cover: decode it in full instead."""


def _past_header_tags(buf, pos: int) -> int:
    """Past the (flexible) response header's tagged fields, which must be none."""
    tags, pos = read_uvarint(buf, pos)
    if tags:
        raise _OtherShape
    return pos


def _one(buf, pos: int) -> int:
    """Past a compact array length that must say one element."""
    n, pos = read_uvarint(buf, pos)
    if n != 2:  # compact arrays store length + 1
        raise _OtherShape
    return pos


def _past_name(buf, pos: int) -> int:
    n, pos = read_uvarint(buf, pos)
    if n == 0:
        raise _OtherShape
    return pos + n - 1


def check_produce_ack(frame) -> None:
    """Raise BrokerError unless a Produce v9 response to a one-partition request says error 0.

    Read in place::

        int32 correlation_id, uvarint header tags (0), uvarint topics (1 + 1),
        compact string name, uvarint partitions (1 + 1), int32 index, int16 error_code, ...

    A non-zero code, or any other shape, goes through the full decode
    (``check_produce_response``), which raises with the broker's message.
    """
    try:
        pos = _past_header_tags(frame, 4)
        pos = _one(frame, _past_name(frame, _one(frame, pos)))
        (error,) = _I16.unpack_from(frame, pos + 4)
    except (_OtherShape, VarintError, struct.error, IndexError):
        error = -1
    if error:
        check_produce_response(frame)


def fetch_records(frame):
    """``(high_watermark, records)`` of the first partition of a Fetch v12 response.

    In place for one topic with one partition (records is a memoryview of ``frame``, None for
    null records)::

        int32 correlation_id, uvarint header tags (0), int32 throttle_time_ms,
        int16 error_code, int32 session_id, uvarint topics (1 + 1), compact string topic,
        uvarint partitions (1 + 1), int32 partition_index, int16 error_code,
        int64 high_watermark, int64 last_stable_offset, int64 log_start_offset,
        uvarint aborted (n + 1, 0 = null) x {int64, int64, uvarint tags (0)},
        int32 preferred_read_replica, uvarint records length + 1 (0 = null), records, ...

    Errors raise ``BrokerError``; other shapes go through the full decode (no partition at
    all gives ``(-1, None)``).
    """
    buf = memoryview(frame)
    try:
        pos = _past_header_tags(buf, 4)
        (error,) = _I16.unpack_from(buf, pos + 4)
        pos = _one(buf, _past_name(buf, _one(buf, pos + 10)))
        (p_error,) = _I16.unpack_from(buf, pos + 4)
        (hw,) = _I64.unpack_from(buf, pos + 6)
        aborted, pos = read_uvarint(buf, pos + 30)
        for _ in range(aborted - 1):
            tags, pos = read_uvarint(buf, pos + 16)
            if tags:
                raise _OtherShape
        n, pos = read_uvarint(buf, pos + 4)
        if error or p_error or pos + n - 1 > len(buf):
            raise _OtherShape
    except (_OtherShape, VarintError, struct.error, IndexError):
        parts = fetch_partitions(buf)
        return (parts[0].high_watermark, parts[0].records) if parts else (-1, None)
    return hw, (buf[pos:pos + n - 1] if n else None)


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


class FrameReader:
    """Whole frames (size prefixes removed) from a non-blocking socket, as they arrive."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self._buf = bytearray()

    def frames(self) -> list[bytes]:
        """Every whole frame readable now, without blocking; ConnectionError at EOF."""
        chunk_size = 1 << 16
        while True:
            try:
                chunk = self.sock.recv(chunk_size)
            except (BlockingIOError, InterruptedError):
                break
            if not chunk:
                raise ConnectionError("broker closed the connection")
            self._buf += chunk
            if len(chunk) < chunk_size:
                break  # drained: spare the call that would only say EAGAIN
        buf, pos, out = self._buf, 0, []
        while len(buf) - pos >= 4:
            (size,) = _SIZE.unpack_from(buf, pos)
            if len(buf) - pos - 4 < size:
                break
            out.append(bytes(buf[pos + 4:pos + 4 + size]))
            pos += 4 + size
        del buf[:pos]
        return out


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
