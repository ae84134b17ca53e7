"""The request decoders against damaged real frames: every input decodes or raises
DecodeError (UnsupportedVersionError and UnknownApiKeyError are kinds of it), never anything
else, and the produce fast path's C parser returns a parse or None, never raises.

Seeds are the golden frames real clients sent (``fixtures/``: kafka-python, aiokafka,
confluent-kafka, kcat, compressed produce requests among them) and frames the generated codec
builds for every API and version Kafka defines; ``tests.server.fuzz_requests.mutated``
damages them (bit flips, length and count fields replaced, truncations, insertions).
"""

from __future__ import annotations

import json
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from odradek.protocol import codec
from odradek.protocol._produce_codec import parse_request
from odradek.protocol.primitives import DecodeError
from tests.protocol.strategies import SPECS, message_strategy
from tests.server.fuzz_requests import mutated

FIXTURES = Path(__file__).resolve().parent / "fixtures"
REQUESTS = [s for s in SPECS if s.type == "request"]
CASES = [(s, v) for s in REQUESTS for v in s.valid]


def golden_requests() -> list[bytes]:
    """Request frames (without their size prefix) captured from real clients."""
    index = json.loads((FIXTURES / "index.json").read_text())["fixtures"]
    return [(FIXTURES / e["file"]).read_bytes() for e in index if e["direction"] == "request"]


GOLDEN = golden_requests()


def decodes_or_refuses(frame: bytes) -> None:
    try:
        codec.decode_request(frame)
    except DecodeError:
        pass
    parsed = parse_request(bytearray(frame))
    assert parsed is None or isinstance(parsed, tuple)


@settings(max_examples=1500)
@given(mutated(GOLDEN))
def test_damaged_golden_frames(frame):
    decodes_or_refuses(frame)


@st.composite
def _generated_frame(draw) -> bytes:
    spec, version = draw(st.sampled_from(CASES))
    body = draw(message_strategy(spec, version))
    return codec.encode_request(codec.RequestHeader(spec.api_key, version, 9, "fuzz"), body)


@settings(max_examples=1000)
@given(_generated_frame().flatmap(lambda frame: mutated([frame])))
def test_damaged_generated_frames_of_every_api_and_version(frame):
    decodes_or_refuses(frame)


def test_golden_frames_are_seeds_that_decode():
    """The seeds themselves are whole requests (so mutants start from real structure)."""
    assert len(GOLDEN) > 30
    for frame in GOLDEN:
        codec.decode_request(frame)
