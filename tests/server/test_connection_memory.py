"""Connections and the broker's request memory (``queued.max.request.bytes``): what is
reserved when, who waits, and that a waiting connection is always woken."""

from __future__ import annotations

import asyncio

from odradek.server.connection import Connection
from odradek.server.memory_pool import MemoryPool
from tests.server.test_connection_writes import FakeBroker, FakeTransport, receive, request_frame, response_ids


def connect(broker) -> tuple[Connection, FakeTransport]:
    transport = FakeTransport()
    conn = Connection(broker, "PLAINTEXT")
    conn.connection_made(transport)
    return conn, transport


def test_a_request_begun_while_the_pool_is_full_waits_and_is_admitted_at_the_release():
    """A admits a big request (the pool was under its limit), B's and C's arrive while A's
    fills the pool: B, mid-request, and C, between requests, stop reading, holding only
    what they received. A's completion releases its bytes and wakes both; B's request is
    admitted then, and everything is answered."""
    async def scenario():
        broker = FakeBroker()
        broker.memory_pool = pool = MemoryPool(1000)
        a, a_out = connect(broker)
        b, b_out = connect(broker)
        c, c_out = connect(broker)
        big, small = request_frame(1, "a" * 5000), request_frame(2, "b" * 200)
        receive(a, big[:100])
        assert pool.used == len(big) and not a._reading_paused  # admitted: reads on
        receive(b, small[:10])
        assert pool.used == len(big) and b._reading_paused  # not admitted: waits
        receive(c, request_frame(3))  # complete in its read: handled, then C waits too
        assert pool.used == len(big) and c._reading_paused and response_ids(c_out.writes[0]) == [3]
        receive(a, big[100:])
        assert response_ids(a_out.writes[0]) == [1]
        assert pool.used == len(small)  # B's request admitted at the release
        assert not a._reading_paused and not b._reading_paused and not c._reading_paused
        receive(b, small[10:])
        assert response_ids(b_out.writes[0]) == [2] and pool.used == 0
        return pool.waits

    assert asyncio.run(scenario()) == 2


def test_closing_releases_what_the_connection_reserved():
    async def scenario():
        broker = FakeBroker()
        broker.memory_pool = pool = MemoryPool(-1)  # unbounded: still counted
        conn, _ = connect(broker)
        receive(conn, request_frame(1, "x" * 3000)[:50])
        assert pool.used > 3000
        conn.connection_lost(None)
        return pool.used

    assert asyncio.run(scenario()) == 0
