"""Record headers as users give them (a dict, or ``(key, value)`` pairs, values as bytes or
str) turned into what records carry: a tuple of ``(str, bytes | None)``."""

from __future__ import annotations

__all__ = ["normalize_headers"]


def normalize_headers(headers) -> tuple:
    """Headers as a tuple of ``(str, bytes | None)``: from a dict or ``(key, value)`` pairs;
    str values are encoded as UTF-8. Raises TypeError for a key that is not a str."""
    if isinstance(headers, dict):
        headers = headers.items()
    out = []
    for key, value in headers:
        if not isinstance(key, str):
            raise TypeError(f"header key {key!r} is not a str")
        if isinstance(value, str):
            value = value.encode()
        out.append((key, value))
    return tuple(out)
