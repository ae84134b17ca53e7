"""ApiVersions (key 18): which APIs and versions this broker serves.

Answered in the version asked. A request of a version we do not serve gets
UNSUPPORTED_VERSION with our ranges in the v0 layout, from which a client picks a version
both sides know and asks again. No tagged fields are set: the librdkafka in Debian's kcat
(1.7) cannot skip non-empty ones in this response.
"""

from __future__ import annotations

from odradek.protocol.api_keys import SUPPORTED
from odradek.protocol.generated.api_versions_response import ApiVersion, ApiVersionsResponse
from odradek.protocol.generated.error_codes import ErrorCode


def _api_keys() -> list[ApiVersion]:
    return [ApiVersion(api_key=int(k), min_version=lo, max_version=hi) for k, (lo, hi) in sorted(SUPPORTED.items())]


def handle(ctx, request) -> ApiVersionsResponse:
    return ApiVersionsResponse(error_code=ErrorCode.NONE, api_keys=_api_keys(), throttle_time_ms=0)


def unsupported() -> ApiVersionsResponse:
    return ApiVersionsResponse(error_code=ErrorCode.UNSUPPORTED_VERSION, api_keys=_api_keys())
