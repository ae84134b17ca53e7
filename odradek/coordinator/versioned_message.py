"""Keys and values of coordinator records: an int16 version, then the generated message of
that version (Kafka's ``CoordinatorRecordSerde`` framing, the same for ``__consumer_offsets``
and ``__transaction_state``). ``module`` is a generated message module
(``odradek.protocol.generated.*``: ``NAME``, ``VALID_VERSIONS``, ``READERS``, ``WRITERS``)."""

from __future__ import annotations

import struct

from odradek.protocol.primitives import DecodeError, EncodeBuffer

VERSION = struct.Struct(">h")


def encode(module, version: int, message) -> bytes:
    """``message`` framed with ``version``."""
    out = EncodeBuffer()
    out += VERSION.pack(version)
    module.WRITERS[version](message, out)
    return bytes(out)


def read_version(data, error: type[Exception], what: str) -> int:
    """The version prefix of ``data``; raises ``error`` ("``what`` shorter than its version")
    when ``data`` is None or shorter than two bytes."""
    if data is None or len(data) < 2:
        raise error(f"{what} shorter than its version")
    return VERSION.unpack_from(data, 0)[0]


def decode(module, version: int, data, error: type[Exception]):
    """The message of ``version`` after the prefix of ``data``, which it must consume whole;
    raises ``error`` for a version ``module`` does not know or malformed bytes. Decoded bytes
    fields may be views into ``data``."""
    if not module.VALID_VERSIONS[0] <= version <= module.VALID_VERSIONS[1]:
        raise error(f"{module.NAME} version {version} is unknown")
    try:
        message, end = module.READERS[version](memoryview(data), 2)
    except (DecodeError, struct.error, ValueError, IndexError, TypeError) as e:
        raise error(f"bad {module.NAME} v{version}: {e}") from None
    if end != len(data):
        raise error(f"{len(data) - end} trailing bytes after {module.NAME} v{version}")
    return message
