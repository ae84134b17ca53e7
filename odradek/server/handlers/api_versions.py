"""ApiVersions (key 18): which APIs and versions this broker serves.

Answered in the version asked. A request of a version we do not serve gets
UNSUPPORTED_VERSION with our ranges in the v0 layout, from which a client picks a version
both sides know and asks again. No tagged fields are set for other clients: the librdkafka in
Debian's kcat (1.7) cannot skip non-empty ones in this response. odradek's own client (v3+,
which names its software) is told of odradek's features (``protocol/features.py``);
``odradek.transaction.verification`` only while ``transaction.partition.verification.enable``
is on (``server/txn_verification.py``).
"""

from __future__ import annotations

from odradek.protocol.api_keys import SUPPORTED
from odradek.protocol.features import (
    BROKER_FEATURES,
    CLIENT_SOFTWARE_NAME,
    FINALIZED_FEATURES,
    TRANSACTION_VERIFICATION,
)
from odradek.protocol.generated.api_versions_response import (
    ApiVersion,
    ApiVersionsResponse,
    FinalizedFeatureKey,
    SupportedFeatureKey,
)
from odradek.protocol.generated.error_codes import ErrorCode
from odradek.server import txn_verification


def _api_keys() -> list[ApiVersion]:
    return [ApiVersion(api_key=int(k), min_version=lo, max_version=hi) for k, (lo, hi) in sorted(SUPPORTED.items())]


_FEATURES = [SupportedFeatureKey(name, lo, hi) for name, (lo, hi) in BROKER_FEATURES.items()]
_FEATURES_UNVERIFIED = [f for f in _FEATURES if f.name != TRANSACTION_VERIFICATION]
_FINALIZED = [FinalizedFeatureKey(name, level, level) for name, level in FINALIZED_FEATURES.items()]


def handle(ctx, request) -> ApiVersionsResponse:
    response = ApiVersionsResponse(error_code=ErrorCode.NONE, api_keys=_api_keys(), throttle_time_ms=0)
    if ctx.api_version >= 3 and request.client_software_name == CLIENT_SOFTWARE_NAME:
        response.supported_features = (_FEATURES if txn_verification.enabled(ctx.broker)
                                       else _FEATURES_UNVERIFIED)
        response.finalized_features = _FINALIZED
        response.finalized_features_epoch = 0
    return response


def unsupported() -> ApiVersionsResponse:
    return ApiVersionsResponse(error_code=ErrorCode.UNSUPPORTED_VERSION, api_keys=_api_keys())
