"""What a handler knows about the request it is answering."""

from __future__ import annotations

from dataclasses import dataclass

from odradek.protocol.api_keys import ApiKey

# A handler returns this for requests that get no response (Produce with acks=0).
NO_RESPONSE = object()
# A handler returns this to close the connection once the responses queued before this
# request are written (an acks=0 produce that failed: the client's only way to learn of it).
CLOSE_CONNECTION = object()


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
