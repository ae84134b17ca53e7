"""The FetchSessionHandler (follower and consumer) without sockets: full, then incremental requests with only
what changed; resets after session errors."""

from __future__ import annotations

import uuid
from types import SimpleNamespace

from odradek.protocol.generated.error_codes import ErrorCode
from odradek.protocol.generated.fetch_request import FetchPartition, FetchTopic
from odradek.protocol.fetch_session_handler import FetchSessionHandler

TID = uuid.UUID(int=7)


def _topics(**offsets) -> list[FetchTopic]:
    """partition name p<N> -> fetch offset."""
    return [FetchTopic(topic="t", topic_id=TID, partitions=[
        FetchPartition(partition=int(k[1:]), fetch_offset=v, partition_max_bytes=100) for k, v in offsets.items()])]


def _ok(session_id: int):
    return SimpleNamespace(error_code=ErrorCode.NONE, session_id=session_id)


def _sent(built) -> dict:
    return {p.partition: p.fetch_offset for t in built.topics for p in t.partitions}


def test_full_then_incremental_with_changes_and_forgotten_partitions():
    h = FetchSessionHandler()
    full = h.build(_topics(p0=0, p1=0))
    assert (full.session_id, full.epoch, _sent(full)) == (0, 0, {0: 0, 1: 0})
    assert h.handle_response(_ok(42))
    inc = h.build(_topics(p0=5, p1=0, p2=0))
    assert (inc.session_id, inc.epoch, _sent(inc), inc.forgotten) == (42, 1, {0: 5, 2: 0}, [])
    assert h.handle_response(_ok(42))
    inc = h.build(_topics(p0=5))
    assert (inc.epoch, _sent(inc)) == (2, {})
    assert [(f.topic_id, sorted(f.partitions)) for f in inc.forgotten] == [(TID, [1, 2])]


def test_session_errors_reset_to_a_full_request():
    h = FetchSessionHandler()
    h.build(_topics(p0=0))
    h.handle_response(_ok(42))
    h.build(_topics(p0=1))
    assert not h.handle_response(SimpleNamespace(error_code=ErrorCode.INVALID_FETCH_SESSION_EPOCH, session_id=0))
    again = h.build(_topics(p0=1))  # closes session 42 on the leader and asks for a new one
    assert (again.session_id, again.epoch, _sent(again)) == (42, 0, {0: 1})
    assert not h.handle_response(SimpleNamespace(error_code=ErrorCode.FETCH_SESSION_ID_NOT_FOUND, session_id=0))
    assert (h.build(_topics(p0=1)).session_id, h.epoch) == (0, 0)
    assert h.handle_response(_ok(0))  # the leader keeps no session: full requests go on
    assert (h.build(_topics(p0=1)).epoch, _sent(h.build(_topics(p0=1)))) == (0, {0: 1})


def test_close_sends_the_final_epoch_once_then_starts_over():
    h = FetchSessionHandler()
    assert h.close() is None  # no session yet: nothing to close
    h.build(_topics(p0=0))
    h.handle_response(_ok(42))
    h.build(_topics(p0=1))
    closing = h.close()
    assert (closing.session_id, closing.epoch, closing.topics, closing.forgotten) == (42, -1, [], [])
    assert h.close() is None
    again = h.build(_topics(p0=1))
    assert (again.session_id, again.epoch, _sent(again)) == (0, 0, {0: 1})
