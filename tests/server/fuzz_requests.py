"""Hypothesis strategies for requests a broker must answer: real frames mutated, and
well-formed bodies of odd values.

``odd_request(spec, version, known)`` draws any body of a request, like
``tests.protocol.strategies``, but with the values that reach a handler's interesting
branches drawn often: the names of topics and groups that exist, the ids of existing topics
and the zero id, -1, 0, the extremes of each integer type, empty and null strings, a valid
record batch. ``mutated(frames)`` draws a real request frame and damages it: bit flips,
bytes replaced (often at a length or count field), truncations, insertions.
"""

from __future__ import annotations

import struct
import uuid
from dataclasses import dataclass

from hypothesis import strategies as st
from protocol_model import Field, Spec, Struct

from odradek.protocol import codec

_INTS = {
    "int8": (-(2**7), 2**7 - 1), "int16": (-(2**15), 2**15 - 1), "uint16": (0, 2**16 - 1),
    "int32": (-(2**31), 2**31 - 1), "uint32": (0, 2**32 - 1), "int64": (-(2**63), 2**63 - 1),
}


@dataclass(frozen=True)
class Known:
    """What exists on the broker under test, so drawn requests name it."""
    names: tuple[str, ...]
    topic_ids: tuple[uuid.UUID, ...]
    batch: bytes


def _int(type_: str) -> st.SearchStrategy:
    lo, hi = _INTS[type_]
    special = [v for v in (-1, 0, 1, 2, lo, hi, -2) if lo <= v <= hi]
    return st.sampled_from(special) | st.integers(lo, hi)


def _scalar(type_: str, known: Known) -> st.SearchStrategy:
    if type_ in _INTS:
        return _int(type_)
    return {
        "bool": st.booleans(),
        "float64": st.floats(allow_nan=False),
        "uuid": st.sampled_from((uuid.UUID(int=0),) + known.topic_ids) | st.uuids(),
        "string": st.sampled_from(known.names + ("",)) | st.text(max_size=8),
        "bytes": st.binary(max_size=12),
        "records": st.just(known.batch) | st.binary(max_size=40),
    }[type_]


def _value(spec: Spec, f: Field, v: int, mod, known: Known) -> st.SearchStrategy:
    element = _struct(spec, f.struct, v, mod, known) if f.is_struct else _scalar(f.element_type, known)
    value = st.lists(element, max_size=3) if f.is_array else element
    if v in f.nullable:
        value = st.none() | value
    return value


def _struct(spec: Spec, s: Struct, v: int, mod, known: Known) -> st.SearchStrategy:
    kwargs = {f.attr: _value(spec, f, v, mod, known) for f in s.fields if v in f.versions}
    return st.builds(getattr(mod, s.name), **kwargs)


def odd_request(spec: Spec, v: int, known: Known) -> st.SearchStrategy:
    return _struct(spec, spec.root, v, codec.module(spec.name), known)


def _damage(data: bytearray, draw) -> None:
    kind = draw(st.integers(0, 4))
    if kind == 0:  # bit flips
        for i in draw(st.lists(st.integers(0, len(data) - 1), min_size=1, max_size=6)):
            data[i] ^= 1 << draw(st.integers(0, 7))
    elif kind == 1:  # a length or count field (int16/int32/varint-sized) replaced
        i = draw(st.integers(0, len(data) - 1))
        value = draw(st.sampled_from([-1, -2, 0, 1, 0x7F, 0xFF, 0x7FFF, 0x7FFFFFFF, -(2**31)]))
        width = draw(st.sampled_from([1, 2, 4]))
        data[i:i + width] = struct.pack(">q", value)[8 - width:]
    elif kind == 2:  # truncation
        del data[draw(st.integers(0, len(data))):]
    elif kind == 3:  # insertion
        i = draw(st.integers(0, len(data)))
        data[i:i] = draw(st.binary(min_size=1, max_size=16))
    else:  # a run of bytes replaced
        i = draw(st.integers(0, len(data) - 1))
        chunk = draw(st.binary(min_size=1, max_size=16))
        data[i:i + len(chunk)] = chunk


@st.composite
def mutated(draw, frames: list[bytes]) -> bytes:
    """One of ``frames`` (request frames without their size prefix), damaged 1-3 times;
    the api key and version stay readable when the draw says so, so that most mutants
    reach a body decoder rather than the header check."""
    data = bytearray(draw(st.sampled_from(frames)))
    keep_prefix = draw(st.booleans())
    prefix = bytes(data[:4])
    for _ in range(draw(st.integers(1, 3))):
        if data:
            _damage(data, draw)
    if keep_prefix and len(data) >= 4:
        data[:4] = prefix
    return bytes(data)
