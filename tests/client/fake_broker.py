"""Scripted Kafka brokers on 127.0.0.1, for the client behaviour a real single broker cannot
show on demand: leaders that move, answers that never come or come out of order, errors.

A ``FakeBroker`` decodes each request with ``odradek.protocol.codec``, records it, answers
ApiVersions itself (with odradek's supported ranges, or ``versions`` given), and hands every
other request to ``handler(broker, header, body)``, which returns a response body, None (no
answer at all) or an awaitable of one. ``metadata_response`` builds the Metadata answer of a
fake cluster.
"""

from __future__ import annotations

import asyncio
import inspect
import struct
import uuid

from odradek.protocol import codec
from odradek.protocol.api_keys import SUPPORTED
from odradek.protocol.generated import ApiKey
from odradek.protocol.generated.api_versions_response import (
    ApiVersion,
    ApiVersionsResponse,
)
from odradek.protocol.generated.metadata_response import (
    MetadataResponse,
    MetadataResponseBroker,
    MetadataResponsePartition,
    MetadataResponseTopic,
)
from odradek.protocol.generated.response_header import ResponseHeader

TOPIC_IDS = {}


class FakeBroker:
    def __init__(self, node_id: int, handler, versions: dict | None = None) -> None:
        self.node_id = node_id
        self.handler = handler
        self.versions = SUPPORTED if versions is None else versions
        self.requests: list[tuple] = []  # (header, body), in arrival order
        self.port = 0
        self._server = None
        self._writers = []

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def of(self, api_key: int) -> list:
        """Bodies of the requests of one API received so far."""
        return [body for header, body in self.requests if header.request_api_key == api_key]

    async def start(self) -> FakeBroker:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    async def close(self) -> None:
        for writer in self._writers:
            writer.close()
        self._server.close()
        await self._server.wait_closed()

    async def _serve(self, reader, writer) -> None:
        self._writers.append(writer)
        try:
            while True:
                size = struct.unpack(">i", await reader.readexactly(4))[0]
                frame = await reader.readexactly(size)
                header, body = codec.decode_request(frame)
                self.requests.append((header, body))
                response = self._answer(header, body)
                if inspect.isawaitable(response):
                    asyncio.ensure_future(self._send_later(writer, header, response))
                elif response is not None:
                    self.write(writer, header, response)
        except (asyncio.IncompleteReadError, ConnectionError):
            pass

    def _answer(self, header, body):
        if header.request_api_key == ApiKey.API_VERSIONS:
            keys = [ApiVersion(k, lo, hi) for k, (lo, hi) in self.versions.items()]
            return ApiVersionsResponse(error_code=0, api_keys=keys)
        return self.handler(self, header, body)

    async def _send_later(self, writer, header, awaitable) -> None:
        response = await awaitable
        if response is not None:
            self.write(writer, header, response)

    @staticmethod
    def write(writer, header, response) -> None:
        payload = codec.encode_response(header.request_api_key, header.request_api_version,
                                        ResponseHeader(header.correlation_id), response)
        writer.write(struct.pack(">i", len(payload)) + payload)


def metadata_response(brokers: list[FakeBroker], topics: dict[str, list[int]], controller: int | None = None):
    """Metadata naming ``brokers``; ``topics`` maps a topic to the leader of each partition."""
    return MetadataResponse(
        brokers=[MetadataResponseBroker(b.node_id, "127.0.0.1", b.port) for b in brokers],
        cluster_id="fake", controller_id=brokers[0].node_id if controller is None else controller,
        topics=[
            MetadataResponseTopic(
                error_code=0, name=name, topic_id=TOPIC_IDS.setdefault(name, uuid.uuid4()),
                partitions=[MetadataResponsePartition(0, p, leader, 0, [leader], [leader])
                            for p, leader in enumerate(leaders)])
            for name, leaders in topics.items()
        ],
    )
