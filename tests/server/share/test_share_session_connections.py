"""Share sessions and the client connection that owns them, without sockets: a closed
connection's sessions are removed and their members' acquired records released (written
through the persister, waiting ShareFetches woken); a session the member moved to a newer
connection (reopened at epoch 0) survives the old connection's close."""

from __future__ import annotations

import asyncio
import uuid

from odradek.coordinator.share.memory_persister import InMemoryPersister
from odradek.protocol.generated.error_codes import ErrorCode as E
from odradek.server.share.record_state import RecordState
from odradek.server.share.share_session_cache import ShareSessionCache
from tests.server.share.harness import log
from tests.server.share.test_share_partition_manager import KEY, T, initialized, manager


def test_close_removes_only_the_sessions_the_connection_owns():
    cache = ShareSessionCache()
    cache.share_fetch("g", "a", 0, [(T, 0)], connection_id="c1")
    cache.share_fetch("g", "b", 0, [(T, 0)], connection_id="c1")
    cache.share_fetch("g", "c", 0, [(T, 0)], connection_id="c2")
    assert cache.remove_connection("c9") == []
    removed = cache.remove_connection("c1")
    assert sorted(s.member_id for s in removed) == ["a", "b"]
    assert cache.get("g", "a") is None and cache.get("g", "c") is not None and len(cache) == 1
    assert cache.remove_connection("c1") == []


def test_session_reopened_on_a_new_connection_survives_the_old_close():
    cache = ShareSessionCache()
    cache.share_fetch("g", "a", 0, [(T, 0)], connection_id="old")
    again = cache.share_fetch("g", "a", 0, [(T, 0)], connection_id="new")
    assert again.closed is not None and again.session.connection_id == "new"
    assert cache.remove_connection("old") == []
    assert cache.get("g", "a") is again.session
    assert [s.member_id for s in cache.remove_connection("new")] == ["a"]


def test_session_belongs_to_the_connection_that_opened_it():
    """Only epoch 0 records the connection (Kafka's maybeCreateSession): requests continuing
    the session elsewhere do not move it, and the opener's close ends it."""
    cache = ShareSessionCache()
    cache.share_fetch("g", "a", 0, [(T, 0)], connection_id="opener")
    assert cache.share_fetch("g", "a", 1, connection_id="other").error is E.NONE
    assert cache.share_acknowledge("g", "a", 2).error is E.NONE
    assert cache.remove_connection("other") == []
    assert [s.member_id for s in cache.remove_connection("opener")] == ["a"]
    assert cache.share_fetch("g", "a", 3).error is E.SHARE_SESSION_NOT_FOUND


def test_closed_session_is_no_longer_the_connections():
    cache = ShareSessionCache()
    cache.share_fetch("g", "a", 0, [(T, 0)], connection_id="c1")
    assert cache.share_fetch("g", "a", -1).closed is not None
    cache.share_fetch("g", "a", 0, [(T, 0)], connection_id="c2")  # the member comes back elsewhere
    assert cache.remove_connection("c1") == [] and cache.get("g", "a") is not None


def test_connection_close_releases_the_members_records():
    async def run():
        persister = InMemoryPersister()
        m = manager(persister)
        sp = await initialized(m, persister)
        m.sessions.share_fetch("g", "a", 0, [(T, 0)], connection_id="c1")
        m.sessions.share_fetch("g", "b", 0, [(T, 0)], connection_id="c2")
        assert sp.acquire("a", log(0, 9), 5)[0].last_offset == 4
        assert sp.acquire("b", log(5, 9), 2)[0].last_offset == 6
        waiting = asyncio.ensure_future(m.wait_for_release([KEY], 30))
        await asyncio.sleep(0)
        task = m.on_connection_close("c1")
        await task
        assert m.sessions.get("g", "a") is None and m.sessions.get("g", "b") is not None
        assert waiting.done()  # the waiting ShareFetch was woken, long before its 30 s
        states = [(lo, hi, st) for lo, hi, st, _, _ in sp.in_flight()]
        assert states == [(0, 4, RecordState.AVAILABLE), (5, 6, RecordState.ACQUIRED)]
        got = sp.acquire("b", log(0, 9), 100)
        assert [(a.first_offset, a.last_offset, a.delivery_count) for a in got] == [(0, 4, 2), (7, 9, 1)]
        assert m.on_connection_close("c1") is None  # nothing owned any more
    asyncio.run(run())


def test_connection_close_release_is_written_through_the_persister():
    """The release is a state write like any other: a member that acquired 0-4 and accepted
    0-1 before its connection closed leaves 2-4 AVAILABLE in the persisted state, so a new
    leader would not hand out what was accepted."""
    from odradek.server.share.share_types import AcknowledgementBatch

    async def run():
        persister = InMemoryPersister()
        m = manager(persister)
        sp = await initialized(m, persister)
        m.sessions.share_fetch("g", "a", 0, [(T, 0)], connection_id="c1")
        sp.acquire("a", log(0, 9), 5)
        assert await m.acknowledge(KEY, "a", [AcknowledgementBatch(0, 1, (1,))]) is E.NONE
        before = persister.calls.count(("write_state", KEY))
        await m.on_connection_close("c1")
        assert persister.calls.count(("write_state", KEY)) == before + 1
        state = await persister.read_state("g", T, 0, 0)
        assert state.start_offset == 2
        assert all(b.delivery_state == RecordState.AVAILABLE.value for b in state.batches
                   if b.last_offset >= 2)
    asyncio.run(run())


def test_old_connection_close_keeps_a_session_reopened_elsewhere():
    async def run():
        persister = InMemoryPersister()
        m = manager(persister)
        sp = await initialized(m, persister)
        m.sessions.share_fetch("g", "a", 0, [(T, 0)], connection_id="old")
        replaced = m.sessions.share_fetch("g", "a", 0, [(T, 0)], connection_id="new")
        await m.release_session(replaced.closed)
        sp.acquire("a", log(0, 9), 3)
        assert m.on_connection_close("old") is None
        assert m.sessions.get("g", "a") is replaced.session
        assert [st for _, _, st, _, _ in sp.in_flight()] == [RecordState.ACQUIRED]
    asyncio.run(run())
