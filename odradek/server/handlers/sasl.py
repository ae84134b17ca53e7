"""SaslHandshake (key 17) and SaslAuthenticate (key 36): the connection's
``SaslServerAuthenticator`` (``server/sasl_authenticator.py``) does the work; a refusal comes
back as a coroutine that answers after ``connection.failed.authentication.delay.ms``
(``server/failed_authentication.py``). On a listener without SASL both answer
ILLEGAL_SASL_STATE, as Kafka's ``KafkaApis`` does."""

from __future__ import annotations

from odradek.protocol.generated.error_codes import ErrorCode
from odradek.protocol.generated.sasl_authenticate_response import SaslAuthenticateResponse
from odradek.protocol.generated.sasl_handshake_response import SaslHandshakeResponse


def handle_handshake(ctx, request):
    sasl = getattr(ctx.connection, "sasl", None)
    if sasl is None:
        return SaslHandshakeResponse(error_code=ErrorCode.ILLEGAL_SASL_STATE, mechanisms=[])
    return sasl.handshake(ctx.api_version, request.mechanism)


def handle_authenticate(ctx, request):
    sasl = getattr(ctx.connection, "sasl", None)
    if sasl is None:
        return SaslAuthenticateResponse(error_code=ErrorCode.ILLEGAL_SASL_STATE,
                                        error_message="SaslAuthenticate request received after successful "
                                                      "authentication")
    return sasl.authenticate(ctx.api_version, bytes(request.auth_bytes))
