"""Encode and decode whole Kafka request and response frames (sans-I/O).

A frame here is the bytes after the 4-byte size prefix (see ``framing``)::

    request  = request header (v0: api_key int16, api_version int16, correlation_id int32;
               v1 adds client_id nullable string; v2 adds a tagged-field section) + body
    response = response header (v0: correlation_id int32; v1 adds tagged fields) + body

The header version follows from the API and its version: flexible versions use request
header v2 and response header v1, others v1 and v0, with two exceptions Kafka makes: the
ApiVersions response always uses header v0 (a client must be able to read it before it knows
what the broker speaks), and ControlledShutdown v0 uses request header v0.

Decoding never copies ``records`` fields: they come back as memoryviews into the frame, so the
caller must keep the frame alive (and unmodified) while it uses them.
"""

from __future__ import annotations

import importlib
import struct
from types import ModuleType

from odradek.protocol._produce_codec import within_entry_budget
from odradek.protocol.generated import APIS, MODULES, ApiKey
from odradek.protocol.generated.request_header import RequestHeader
from odradek.protocol.generated.response_header import ResponseHeader
from odradek.protocol.generated import request_header as _request_header
from odradek.protocol.generated import response_header as _response_header
from odradek.protocol.primitives import DecodeError, EncodeBuffer

__all__ = [
    "DecodeError", "UnknownApiKeyError", "UnsupportedVersionError", "RequestHeader",
    "ResponseHeader", "decode_request", "decode_request_header", "decode_request_body",
    "encode_request", "decode_response", "encode_response", "encode_response_buffer",
    "encode_response_frame",
]

_API_PREFIX = struct.Struct(">hhi")
_modules: dict[str, ModuleType] = {}


class UnknownApiKeyError(DecodeError):
    """The request names an API key Kafka does not define."""

    def __init__(self, api_key: int, correlation_id: int) -> None:
        super().__init__(f"unknown API key {api_key}")
        self.api_key = api_key
        self.correlation_id = correlation_id


class UnsupportedVersionError(DecodeError):
    """The API exists but not at this version (in Kafka's specs)."""

    def __init__(self, header: RequestHeader) -> None:
        super().__init__(
            f"unsupported version {header.request_api_version} of API {header.request_api_key}"
        )
        self.header = header


def module(name: str) -> ModuleType:
    """The generated module of a message, by its spec name (``"FetchRequest"``)."""
    mod = _modules.get(name)
    if mod is None:
        mod = importlib.import_module(f"odradek.protocol.generated.{MODULES[name]}")
        _modules[name] = mod
    return mod


def request_module(api_key: int) -> ModuleType:
    return module(_spec_name(api_key, "Request"))


def response_module(api_key: int) -> ModuleType:
    return module(_spec_name(api_key, "Response"))


def _spec_name(api_key: int, suffix: str) -> str:
    return APIS[api_key][0] + suffix


def is_flexible(api_key: int, api_version: int) -> bool:
    first = request_module(api_key).FLEXIBLE_FROM
    return first is not None and api_version >= first


def request_header_version(api_key: int, api_version: int) -> int:
    if api_key == ApiKey.CONTROLLED_SHUTDOWN and api_version == 0:
        return 0
    return 2 if is_flexible(api_key, api_version) else 1


def response_header_version(api_key: int, api_version: int) -> int:
    if api_key == ApiKey.API_VERSIONS:
        return 0
    return 1 if is_flexible(api_key, api_version) else 0


def version_known(api_key: int, api_version: int) -> bool:
    api = APIS.get(api_key)
    return api is not None and api[3] <= api_version <= api[4]


# --- requests ----------------------------------------------------------------------------

# The functions that read a request of one (API key, version), looked up once per kind and
# kept by ``_kind(api_key, api_version)``: a request then costs one dict lookup here, not the
# half dozen calls (module, spec name, header version) that finding them again takes. The
# keys are bounded by Kafka's specs (only known API versions get an entry).
_request_plans: dict[int, tuple] = {}


def _kind(api_key: int, api_version: int) -> int:
    return (api_key << 16) | (api_version & 0xFFFF)


def _request_plan(api_key: int, api_version: int) -> tuple | None:
    """``(header reader, body reader, module)`` for a known version, else None."""
    kind = _kind(api_key, api_version)
    plan = _request_plans.get(kind)
    if plan is None and version_known(api_key, api_version):
        mod = request_module(api_key)
        header_reader = _request_header.READERS[request_header_version(api_key, api_version)]
        plan = _request_plans[kind] = (header_reader, mod.READERS[api_version], mod)
    return plan


def decode_request_header(frame) -> tuple[RequestHeader, int]:
    """Decode the header; return it and the position where the body starts.

    Raises UnknownApiKeyError for an API Kafka does not define, UnsupportedVersionError (with
    the decoded header) for a version Kafka's specs do not define, DecodeError otherwise.
    An ApiVersions request of a version newer than we know is decoded with header v2 (every
    newer ApiVersions version is flexible) so the broker can answer it in the v0 layout.
    """
    buf = memoryview(frame)
    if len(buf) < 8:
        raise DecodeError("request header truncated")
    api_key, api_version, correlation_id = _API_PREFIX.unpack_from(buf, 0)
    plan = _request_plans.get(_kind(api_key, api_version))
    if plan is None:
        if api_key not in APIS:
            raise UnknownApiKeyError(api_key, correlation_id)
        plan = _request_plan(api_key, api_version)
        if plan is None:
            raise UnsupportedVersionError(_unknown_version_header(buf, api_key, api_version))
    try:
        return plan[0](buf, 0)
    except DecodeError:
        raise
    except (struct.error, ValueError, IndexError) as e:
        raise DecodeError(f"bad request header: {e}") from None


def _unknown_version_header(buf, api_key: int, api_version: int) -> RequestHeader:
    """The header of a request of a version the specs do not define, read as well as we can
    guess its layout (for the error and, for ApiVersions, the answer)."""
    newer_api_versions = api_key == ApiKey.API_VERSIONS and api_version > APIS[api_key][4]
    try:
        header, _ = _request_header.READERS[2 if newer_api_versions else 1](buf, 0)
    except DecodeError:
        raise
    except (struct.error, ValueError, IndexError) as e:
        raise DecodeError(f"bad request header: {e}") from None
    return header


def decode_request_body(header: RequestHeader, frame, pos: int):
    """Decode the body of a request whose header ``decode_request_header`` returned."""
    api_key, api_version = header.request_api_key, header.request_api_version
    plan = _request_plan(api_key, api_version)
    if api_key == 0 and not within_entry_budget(frame):
        # Tiny topic and partition entries would decode to ~50x the frame in objects.
        raise DecodeError("Produce request holds more topic and partition entries than its "
                          "size allows (64 + size / 32)")
    try:
        body, _ = plan[1](memoryview(frame), pos)
    except DecodeError:
        raise
    except (struct.error, ValueError, IndexError, TypeError) as e:
        raise DecodeError(f"bad {plan[2].NAME} v{api_version}: {e}") from None
    return body


def decode_request(frame):
    """``(RequestHeader, body)`` of one request frame."""
    header, pos = decode_request_header(frame)
    return header, decode_request_body(header, frame, pos)


def encode_request(header: RequestHeader, body) -> bytes:
    """Bytes of a request frame (without the size prefix)."""
    key, version = header.request_api_key, header.request_api_version
    out = EncodeBuffer()
    _request_header.WRITERS[request_header_version(key, version)](header, out)
    request_module(key).WRITERS[version](body, out)
    return out.to_bytes()


# --- responses ---------------------------------------------------------------------------


def decode_response(api_key: int, api_version: int, frame):
    """``(ResponseHeader, body)`` of a response to a request of this API and version."""
    buf = memoryview(frame)
    mod = response_module(api_key)
    try:
        header, pos = _response_header.READERS[response_header_version(api_key, api_version)](buf, 0)
        body, _ = mod.READERS[api_version](buf, pos)
    except DecodeError:
        raise
    except (struct.error, ValueError, IndexError, TypeError) as e:
        raise DecodeError(f"bad {mod.NAME} v{api_version}: {e}") from None
    return header, body


def encode_response_buffer(api_key: int, api_version: int, header: ResponseHeader, body) -> EncodeBuffer:
    """The response frame as an EncodeBuffer: large records stay out of line as regions."""
    out = EncodeBuffer()
    _response_header.WRITERS[response_header_version(api_key, api_version)](header, out)
    response_module(api_key).WRITERS[api_version](body, out)
    return out


# Per response kind: (1 if its header has a tagged-field section else 0, body writer).
_response_plans: dict[int, tuple[int, object]] = {}
_SIZE_AND_CORRELATION = struct.Struct(">ii")


def encode_response_frame(api_key: int, api_version: int, correlation_id: int, body) -> EncodeBuffer:
    """The whole response frame, size prefix and header included (a header with no tagged
    fields, which is every header a broker sends), as one EncodeBuffer; large records stay
    out of line as regions, counted in the size prefix."""
    kind = _kind(api_key, api_version)
    plan = _response_plans.get(kind)
    if plan is None:
        plan = _response_plans[kind] = (
            response_header_version(api_key, api_version), response_module(api_key).WRITERS[api_version])
    flexible_header, writer = plan
    out = EncodeBuffer(8 + flexible_header)  # size, correlation id, [empty tagged fields]
    writer(body, out)
    _SIZE_AND_CORRELATION.pack_into(out, 0, out.total_size() - 4, correlation_id)
    return out


def encode_response(api_key: int, api_version: int, header: ResponseHeader, body) -> bytes:
    """Bytes of a response frame (without the size prefix)."""
    return encode_response_buffer(api_key, api_version, header, body).to_bytes()
