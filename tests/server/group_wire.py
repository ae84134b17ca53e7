"""A minimal blocking Kafka client for the group protocol tests: one request at a time,
any API and version, built from the generated message classes."""

from __future__ import annotations

import socket
import struct
from typing import Self

from odradek.protocol import codec
from odradek.protocol.generated import ApiKey


class WireClient:
    def __init__(self, port: int, client_id: str = "wire-test", timeout: float = 20.0) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=timeout)
        self.client_id = client_id
        self.correlation_id = 0

    def close(self) -> None:
        self.sock.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def send(self, api: ApiKey, version: int, **fields) -> int:
        self.correlation_id += 1
        body = codec.request_module(api).MESSAGE(**fields)
        header = codec.RequestHeader(request_api_key=api, request_api_version=version,
                                     correlation_id=self.correlation_id, client_id=self.client_id)
        frame = codec.encode_request(header, body)
        self.sock.sendall(struct.pack(">i", len(frame)) + frame)
        return self.correlation_id

    def receive(self, api: ApiKey, version: int):
        size = struct.unpack(">i", self._read(4))[0]
        _, body = codec.decode_response(api, version, self._read(size))
        return body

    def call(self, api: ApiKey, version: int, **fields):
        self.send(api, version, **fields)
        return self.receive(api, version)

    def _read(self, n: int) -> bytes:
        out = bytearray()
        while len(out) < n:
            chunk = self.sock.recv(n - len(out))
            if not chunk:
                raise ConnectionError("broker closed the connection")
            out += chunk
        return bytes(out)


def module(name: str):
    """The generated module of a message (``"JoinGroupRequest"``), for nested classes."""
    return codec.module(name)
