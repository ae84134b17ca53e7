"""What a handler knows about the request it is answering (``RequestContext``, kept in
``protocol/request_context.py`` so that the controller's in-process requests build the same
one), and what a handler may return instead of a response."""

from __future__ import annotations

from odradek.protocol.request_context import RequestContext

__all__ = ["CLOSE_CONNECTION", "NO_RESPONSE", "RequestContext"]

# A handler returns this for requests that get no response (Produce with acks=0).
NO_RESPONSE = object()
# A handler returns this to close the connection once the responses queued before this
# request are written (an acks=0 produce that failed: the client's only way to learn of it).
CLOSE_CONNECTION = object()
