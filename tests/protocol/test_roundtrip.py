"""Every message at every valid version round-trips through the generated codec."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from odradek.protocol import codec
from odradek.protocol.primitives import EncodeBuffer
from tests.protocol.strategies import SPECS, message_strategy

CASES = [(s, v) for s in SPECS for v in s.valid]


@pytest.mark.parametrize("spec,version", CASES, ids=[f"{s.name}-v{v}" for s, v in CASES])
@settings(max_examples=8)
@given(data=st.data())
def test_roundtrip(spec, version, data):
    mod = codec.module(spec.name)
    value = data.draw(message_strategy(spec, version))
    out = EncodeBuffer()
    mod.WRITERS[version](value, out)
    encoded = out.to_bytes()
    decoded, end = mod.READERS[version](memoryview(encoded), 0)
    assert end == len(encoded)
    assert decoded == value
    again = EncodeBuffer()
    mod.WRITERS[version](decoded, again)
    assert again.to_bytes() == encoded
