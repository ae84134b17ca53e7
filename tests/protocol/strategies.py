"""Hypothesis strategies that draw any message at any version from Kafka's specs.

The specs come from ``message_schemas.py``, the field table that ``tools/generate_protocol.py``
writes beside the codec, so a clone without the specs themselves runs every round trip.
"""

from __future__ import annotations

from hypothesis import strategies as st
from protocol_model import Field, Spec, Struct
from schema_table import load_specs

from odradek.protocol import codec
from tests.protocol.message_schemas import SCHEMAS

# Every message, header and coordinator record spec, sorted by name.
SPECS: list[Spec] = load_specs(SCHEMAS)

_INTS = {
    "int8": (-(2**7), 2**7 - 1), "int16": (-(2**15), 2**15 - 1), "uint16": (0, 2**16 - 1),
    "int32": (-(2**31), 2**31 - 1), "uint32": (0, 2**32 - 1), "int64": (-(2**63), 2**63 - 1),
}


def _scalar(type_: str) -> st.SearchStrategy:
    if type_ in _INTS:
        return st.integers(*_INTS[type_])
    return {
        "bool": st.booleans(),
        "float64": st.floats(allow_nan=False),
        "uuid": st.uuids(),
        "string": st.text(max_size=12),
        "bytes": st.binary(max_size=12),
        "records": st.binary(max_size=40),
    }[type_]


def _value(spec: Spec, f: Field, v: int, mod, tagged: bool) -> st.SearchStrategy:
    if f.is_struct:
        element = struct_strategy(spec, f.struct, v, mod)
    else:
        element = _scalar(f.element_type)
    value = st.lists(element, max_size=3) if f.is_array else element
    if v in f.nullable:
        value = st.none() | value
    return value


def struct_strategy(spec: Spec, s: Struct, v: int, mod) -> st.SearchStrategy:
    cls = getattr(mod, s.name)
    flexible = v in spec.flexible
    kwargs = {}
    for f in s.fields:
        if v in f.versions:
            kwargs[f.attr] = _value(spec, f, v, mod, flexible and v in f.tagged)
    return st.builds(cls, **kwargs)


_cache: dict[tuple[str, int], st.SearchStrategy] = {}


def message_strategy(spec: Spec, v: int) -> st.SearchStrategy:
    key = (spec.name, v)
    if key not in _cache:
        _cache[key] = struct_strategy(spec, spec.root, v, codec.module(spec.name))
    return _cache[key]
