"""Requests a broker must survive: real frames damaged, and well-formed requests of odd values.

Each input goes to a fresh connection of one running broker (``fuzz_connection``: the real
``Connection`` on the broker's loop, bytes in through a fake transport), followed on that
connection by an ApiVersions request. The contract checked for every input:

- damaged frames: an answer or a clean close; when the connection stays open, the
  ApiVersions after it is answered too (unless a handler is legitimately waiting: a long-poll
  fetch or a join that waits for its group);
- decodable requests: an answer, never a close (except Produce with acks=0 that failed,
  which Kafka answers by closing: the client's only way to learn of it);
- always: no exception out of the connection's callbacks, no ERROR or traceback in the
  broker's log, and a bystander connection opened before keeps being answered
  (ApiVersions and Metadata).
"""

from __future__ import annotations

import logging
import os
import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from odradek.protocol import codec
from odradek.protocol.api_keys import SUPPORTED, ApiKey
from odradek.protocol.generated.error_codes import ErrorCode
from odradek.testing.broker import InProcessBroker
from tests.protocol.strategies import SPECS as ALL_SPECS
from tests.protocol.test_fuzz_decoder import GOLDEN
from tests.server.fuzz_connection import Outcome, exchange
from tests.server.fuzz_requests import Known, mutated, odd_request
from tests.server.test_bad_input import create_topic
from tests.server.wire import WireClient, message, simple_batch

SPECS = {s.api_key: s for s in ALL_SPECS if s.type == "request"}
CASES = [(SPECS[key], v) for key, (lo, hi) in sorted(SUPPORTED.items()) for v in range(lo, hi + 1)]
# Handlers that may wait on purpose (long poll, a group's join and sync barriers, topic
# operations waiting up to their timeout for the controller to carry them out).
MAY_WAIT = {ApiKey.FETCH, ApiKey.JOIN_GROUP, ApiKey.SYNC_GROUP, ApiKey.PRODUCE,
            ApiKey.CREATE_TOPICS, ApiKey.DELETE_TOPICS, ApiKey.CREATE_PARTITIONS}
PROBE_ID = 0x5EED
# How long an exchange waits for the answers: briefly where a handler may wait on purpose,
# long enough elsewhere for the slow ones (topic creation writes metadata off the loop) on a
# loaded machine.
SHORT_PATIENCE, PATIENCE = 0.1, 10.0
# Longer runs: ODRADEK_FUZZ_SCALE=50 multiplies every example count here.
SCALE = int(os.environ.get("ODRADEK_FUZZ_SCALE", "1"))


class _Trouble(logging.Handler):
    """Keeps the broker's log records that report a failure: ERROR and above, tracebacks."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        if record.levelno >= logging.ERROR or record.exc_info:
            self.records.append(record)


@pytest.fixture(scope="module")
def fuzzed(tmp_path_factory):
    """``(broker, bystander client, Known, log trouble)`` shared by the module's examples."""
    trouble = _Trouble()
    root = logging.getLogger()
    root.addHandler(trouble)
    with InProcessBroker(tmp_path_factory.mktemp("fuzz") / "data") as b:
        bystander = WireClient(b.bootstrap)
        create_topic(bystander, "fuzz", partitions=2)
        tid = b.broker.metadata_image().topic("fuzz").topic_id
        member_id = join_group(bystander, "fuzz")
        yield b, bystander, Known(("fuzz", member_id), (tid,), simple_batch([b"fuzz"])), trouble
        bystander.close()
    root.removeHandler(trouble)


def join_group(c: WireClient, group: str) -> str:
    """A member of ``group`` (generation 1, the group Stable), so that drawn group requests
    can name a real group and member."""
    jg = codec.module("JoinGroupRequest")
    c.request("FindCoordinator", 3, message("FindCoordinatorRequest", key=group, key_type=0))
    _, joined = c.request("JoinGroup", 3, jg.MESSAGE(
        group_id=group, session_timeout_ms=600_000, rebalance_timeout_ms=10_000, member_id="",
        protocol_type="consumer", protocols=[jg.JoinGroupRequestProtocol(name="range", metadata=b"")]))
    assert joined.error_code == ErrorCode.NONE, joined
    _, synced = c.request("SyncGroup", 3, message(
        "SyncGroupRequest", group_id=group, generation_id=joined.generation_id, member_id=joined.member_id,
        assignments=[]))
    assert synced.error_code == ErrorCode.NONE, synced
    return joined.member_id


def framed(payload: bytes) -> bytes:
    return struct.pack(">i", len(payload)) + payload


PROBE = framed(codec.encode_request(codec.RequestHeader(ApiKey.API_VERSIONS, 0, PROBE_ID, "probe"),
                                    message("ApiVersionsRequest")))


def probe_answered(outcome: Outcome) -> bool:
    for frame in outcome.responses:
        if struct.unpack_from(">i", frame)[0] == PROBE_ID:
            _, body = codec.decode_response(ApiKey.API_VERSIONS, 0, frame)
            return body.error_code == ErrorCode.NONE
    return False


def check_unharmed(fuzzed) -> None:
    _, bystander, _, trouble = fuzzed
    records, trouble.records = trouble.records, []
    assert not records, [r.getMessage() for r in records]
    _, resp = bystander.request("ApiVersions", 3, message("ApiVersionsRequest", client_software_name="b",
                                                           client_software_version="1"))
    assert resp.error_code == ErrorCode.NONE
    _, meta = bystander.request("Metadata", 12, message("MetadataRequest", topics=None))
    assert meta.brokers


@st.composite
def odd_frame(draw, known: Known) -> bytes:
    """A request frame of any served API and version, built by the generated codec."""
    spec, version = draw(st.sampled_from(CASES))
    body = draw(odd_request(spec, version, known))
    return codec.encode_request(codec.RequestHeader(spec.api_key, version, 77, "odd"), body)


@settings(max_examples=400 * SCALE)
@given(data=st.data())
def test_damaged_frames_get_an_answer_or_a_clean_close(fuzzed, data):
    """Seeds: the golden frames of real clients, and codec-built frames of every served
    API and version."""
    b, _, known, _ = fuzzed
    frame = data.draw(mutated([data.draw(st.sampled_from(GOLDEN) | odd_frame(known))]))
    api_key = struct.unpack_from(">h", frame)[0] if len(frame) >= 2 else -1
    outcome = exchange(b, [framed(frame), PROBE], SHORT_PATIENCE if api_key in MAY_WAIT else PATIENCE)
    assert outcome.closed or probe_answered(outcome) or (outcome.waiting and api_key in MAY_WAIT), outcome
    check_unharmed(fuzzed)


@pytest.mark.parametrize("spec,version", CASES, ids=[f"{s.name[:-7]}-v{v}" for s, v in CASES])
@settings(max_examples=8 * SCALE)
@given(data=st.data())
def test_decodable_odd_requests_are_answered_never_closed(fuzzed, spec, version, data):
    b, _, known, _ = fuzzed
    body = data.draw(odd_request(spec, version, known))
    payload = codec.encode_request(codec.RequestHeader(spec.api_key, version, 77, "odd"), body)
    outcome = exchange(b, [framed(payload), PROBE], SHORT_PATIENCE if spec.api_key in MAY_WAIT else PATIENCE)
    failed_acks0 = spec.api_key == ApiKey.PRODUCE and body.acks == 0
    if outcome.closed:
        assert failed_acks0, outcome
    else:
        assert probe_answered(outcome) or (outcome.waiting and spec.api_key in MAY_WAIT), outcome
    check_unharmed(fuzzed)
