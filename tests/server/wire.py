"""A tiny blocking Kafka wire client for tests that need exact control over the bytes."""

from __future__ import annotations

import socket
import struct

from odradek.protocol import codec
from odradek.records.builder import BatchSpec, build_batch
from odradek.records.record import Record


class WireClient:
    def __init__(self, bootstrap: str, timeout: float = 10.0) -> None:
        host, port = bootstrap.rsplit(":", 1)
        self.sock = socket.create_connection((host, int(port)), timeout=timeout)
        self.correlation_id = 0

    def close(self) -> None:
        self.sock.close()

    def send_raw(self, data: bytes) -> None:
        self.sock.sendall(data)

    def frame(self, name: str, version: int, body, correlation_id: int | None = None) -> bytes:
        if correlation_id is None:
            self.correlation_id += 1
            correlation_id = self.correlation_id
        mod = codec.module(name + "Request")
        header = codec.RequestHeader(mod.API_KEY, version, correlation_id, "wire-test")
        payload = codec.encode_request(header, body)
        return struct.pack(">i", len(payload)) + payload

    def recv_frame(self) -> bytes:
        size = struct.unpack(">i", self._recv_exact(4))[0]
        return self._recv_exact(size)

    def _recv_exact(self, n: int) -> bytes:
        chunks = []
        while n:
            chunk = self.sock.recv(n)
            if not chunk:
                raise ConnectionError("closed by broker")
            chunks.append(chunk)
            n -= len(chunk)
        return b"".join(chunks)

    def request(self, name: str, version: int, body):
        """Send one request and decode its response; returns (correlation_id, body)."""
        self.send_raw(self.frame(name, version, body))
        return self.response(name, version)

    def response(self, name: str, version: int):
        mod = codec.module(name + "Request")
        header, body = codec.decode_response(mod.API_KEY, version, self.recv_frame())
        return header.correlation_id, body

    def is_closed(self, timeout: float = 5.0) -> bool:
        """True when the broker closed this connection (reads EOF)."""
        self.sock.settimeout(timeout)
        try:
            return self.sock.recv(1) == b""
        except (ConnectionResetError, BrokenPipeError):
            return True
        except socket.timeout:
            return False


def message(name: str, **fields):
    return codec.module(name).MESSAGE(**fields)


def produce_body(topic: str, partition: int, records: bytes, acks: int = 1):
    m = codec.module("ProduceRequest")
    return m.MESSAGE(acks=acks, timeout_ms=5000, topic_data=[m.TopicProduceData(
        name=topic, partition_data=[m.PartitionProduceData(index=partition, records=records)])])


def simple_batch(values: list[bytes], timestamp: int = 1_700_000_000_000) -> bytes:
    return build_batch([Record(offset=i, timestamp=timestamp, key=None, value=v, headers=())
                        for i, v in enumerate(values)], BatchSpec())


def fetch_body(topic: str, partition: int, offset: int, max_wait_ms: int = 0, min_bytes: int = 0):
    m = codec.module("FetchRequest")
    return m.MESSAGE(replica_id=-1, max_wait_ms=max_wait_ms, min_bytes=min_bytes, max_bytes=1 << 20,
                     topics=[m.FetchTopic(topic=topic, partitions=[m.FetchPartition(
                         partition=partition, fetch_offset=offset, partition_max_bytes=1 << 20)])])
