"""Golden frames from real clients must decode and re-encode byte for byte.

The fixtures were captured by tools/capture_golden.py: kafka-python, confluent-kafka
(librdkafka), aiokafka and kcat talking to Tansu through a recording proxy. Each
file is one frame without its 4-byte size prefix; index.json says which client
sent or received it and the api key, version and correlation id it carries.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from odradek.protocol import codec

FIXTURES = Path(__file__).parent / "fixtures"
INDEX = json.loads((FIXTURES / "index.json").read_text())
ENTRIES = INDEX["fixtures"]
REQUESTS = [e for e in ENTRIES if e["direction"] == "request"]
RESPONSES = [e for e in ENTRIES if e["direction"] == "response"]
# The APIs a consumer-group and admin session needs; kcat has no admin mode.
EXPECTED_APIS = {
    "ApiVersions", "Metadata", "Produce", "Fetch", "ListOffsets", "FindCoordinator",
    "JoinGroup", "SyncGroup", "OffsetCommit", "OffsetFetch", "Heartbeat", "LeaveGroup",
    "CreateTopics", "DeleteTopics", "InitProducerId",
}
ADMIN_APIS = {"CreateTopics", "DeleteTopics"}
CLIENTS = {"kafka-python": EXPECTED_APIS, "confluent-kafka": EXPECTED_APIS,
           "aiokafka": EXPECTED_APIS, "kcat": EXPECTED_APIS - ADMIN_APIS}


def frame_of(entry: dict) -> bytes:
    return (FIXTURES / entry["file"]).read_bytes()


def first_difference(expected: bytes, actual: bytes) -> str:
    """Where two byte strings part, with the bytes around it, for the failure message."""
    at = next((i for i, (a, b) in enumerate(zip(expected, actual)) if a != b),
              min(len(expected), len(actual)))
    return (f"first difference at byte {at} (lengths {len(expected)} vs {len(actual)}): "
            f"captured {expected[at:at + 16].hex()} re-encoded {actual[at:at + 16].hex()}")


@pytest.mark.parametrize("entry", REQUESTS, ids=[e["file"] for e in REQUESTS])
def test_request_round_trips(entry):
    frame = frame_of(entry)
    header, body = codec.decode_request(frame)
    assert (header.request_api_key, header.request_api_version, header.correlation_id) == (
        entry["api_key"], entry["api_version"], entry["correlation_id"])
    encoded = codec.encode_request(header, body)
    assert encoded == frame, f"{entry['file']}: {first_difference(frame, encoded)}; {header}"


@pytest.mark.parametrize("entry", RESPONSES, ids=[e["file"] for e in RESPONSES])
def test_response_round_trips(entry):
    """Responses come from the peer broker (Tansu), which writes some tagged fields that hold
    their default values; Kafka's encoders (and ours) leave those out. Such a frame must
    decode to the same value as our canonical re-encoding of it, and re-encode byte for byte
    from then on; every other response must round-trip exactly."""
    frame = frame_of(entry)
    api_key, api_version = entry["api_key"], entry["api_version"]
    header, body = codec.decode_response(api_key, api_version, frame)
    assert header.correlation_id == entry["correlation_id"]
    encoded = codec.encode_response(api_key, api_version, header, body)
    if entry["file"] in NON_CANONICAL_RESPONSES:
        assert encoded != frame and len(encoded) < len(frame)
        assert codec.decode_response(api_key, api_version, encoded) == (header, body)
        frame = encoded
        encoded = codec.encode_response(api_key, api_version, *codec.decode_response(api_key, api_version, frame))
    assert encoded == frame, f"{entry['file']}: {first_difference(frame, encoded)}; {header}"


# Tansu's responses that carry default-valued tagged fields (see test_response_round_trips).
NON_CANONICAL_RESPONSES = {
    "confluent-kafka/ApiVersions-v3-response.bin",
    "kafka-python/ApiVersions-v4-response.bin",
    "confluent-kafka/Fetch-v16-response.bin",
    "kafka-python/CreateTopics-v7-response.bin",
}


@pytest.mark.parametrize("client", sorted(CLIENTS))
def test_fixtures_cover_each_clients_session(client):
    """Every API of a produce/consume/admin session is there, in both directions."""
    for direction in ("request", "response"):
        have = {e["api_name"] for e in ENTRIES
                if e["client"] == client and e["direction"] == direction}
        assert CLIENTS[client] <= have, f"{client} {direction}s lack {CLIENTS[client] - have}"


def test_index_matches_files():
    """index.json and the .bin files agree: no stray file, no missing one, sizes match."""
    on_disk = {p.relative_to(FIXTURES).as_posix() for p in FIXTURES.glob("*/*.bin")}
    assert on_disk == {e["file"] for e in ENTRIES}
    for entry in ENTRIES:
        assert len(frame_of(entry)) == entry["size"] <= 64 * 1024, entry["file"]
