"""What a handler knows about the request it is answering: the request header's values and
the connection the request came in on.

It lives with the codec so that every layer that runs a request through a broker's handlers
builds the same context: the server's connections (``server/connection.py``, one per request
read off the wire) and the controller's in-process requests to its own broker
(``controller/channel_manager.deliver_locally``). ``connection`` is opaque here: the server's
``Connection`` or the controller's ``LocalConnection``; handlers reach the broker through it
(``ctx.broker`` is ``ctx.connection.broker``).
"""

from __future__ import annotations

from dataclasses import dataclass

from odradek.protocol.api_keys import ApiKey


@dataclass(slots=True)
class RequestContext:
    connection: object
    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None
    # The version the response is encoded in: the request's, except for an ApiVersions
    # request of a version we don't serve, which is answered in the v0 layout.
    response_version: int

    @classmethod
    def for_header(cls, connection, header, response_version: int | None = None) -> "RequestContext":
        return cls(
            connection,
            header.request_api_key,
            header.request_api_version,
            header.correlation_id,
            header.client_id,
            header.request_api_version if response_version is None else response_version,
        )

    @property
    def broker(self):
        return self.connection.broker

    @property
    def api_name(self) -> str:
        return ApiKey(self.api_key).name
