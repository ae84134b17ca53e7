"""A console request the console itself refuses (malformed JSON, a missing field, a number
that is not one), with the Kafka error code a broker would give for it; the app answers it
as JSON ``{"error_code": 42, "error": "INVALID_REQUEST", "message": "..."}`` with HTTP 400,
as it answers the brokers' own errors (app.py)."""

from __future__ import annotations

from odradek.protocol.generated.error_codes import ErrorCode


class RequestError(Exception):
    def __init__(self, code: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def invalid(message: str) -> RequestError:
    return RequestError(ErrorCode.INVALID_REQUEST, message)


def integer(body: dict, name: str, default: int | None = None, minimum: int | None = None) -> int | None:
    """``body[name]`` as an int (a JSON number or a decimal string), else ``default``."""
    value = body.get(name, default)
    if value is None or value == "":
        return default
    if isinstance(value, bool):
        raise invalid(f"{name} must be a whole number, not {value!r}")
    try:
        number = int(value)
    except (TypeError, ValueError):
        raise invalid(f"{name} must be a whole number, not {value!r}") from None
    if isinstance(value, float) and value != number:
        raise invalid(f"{name} must be a whole number, not {value!r}")
    if minimum is not None and number < minimum:
        raise invalid(f"{name} must be at least {minimum}, not {number}")
    return number
