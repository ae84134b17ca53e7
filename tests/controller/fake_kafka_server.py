"""A minimal Kafka-speaking server for the controller edge's tests: answers ApiVersions with
the given ranges and every other request with ``answer(api_key, version, body)`` (None: drop
the connection without answering), recording what it received."""

from __future__ import annotations

import asyncio
import struct

from odradek.protocol import codec
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.generated.api_versions_response import ApiVersion, ApiVersionsResponse

_SIZE = struct.Struct(">i")


class FakeKafkaServer:
    def __init__(self, ranges: dict[int, tuple[int, int]], answer) -> None:
        self.ranges = {ApiKey.API_VERSIONS: (0, 3), **ranges}
        self.answer = answer
        self.received: list = []
        self.connections = 0
        self.server = None
        self.port = 0

    async def start(self) -> int:
        self.server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        self.port = self.server.sockets[0].getsockname()[1]
        return self.port

    async def _serve(self, reader, writer) -> None:
        self.connections += 1
        try:
            while True:
                (size,) = _SIZE.unpack(await reader.readexactly(4))
                header, body = codec.decode_request(await reader.readexactly(size))
                key, version = header.request_api_key, header.request_api_version
                if key == ApiKey.API_VERSIONS:
                    response = ApiVersionsResponse(api_keys=[
                        ApiVersion(k, lo, hi) for k, (lo, hi) in sorted(self.ranges.items())])
                else:
                    self.received.append((key, version, body))
                    response = self.answer(key, version, body)
                    if response is None:
                        break
                frame = codec.encode_response_frame(key, version, header.correlation_id, response)
                writer.write(frame.to_bytes())
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()

    async def close(self) -> None:
        self.server.close()
        await self.server.wait_closed()
