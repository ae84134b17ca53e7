"""A share consumer's connection closing abruptly ends its share session at once (Kafka 4.2's
ShareSessionCache connectionDisconnectListener): what the member acquired goes to another
member with delivery count 2. The broker's group.share.record.lock.duration.ms is 60000 and
the test gives up well before (the helper's deadline), so only the release on close can
explain the redelivery; nothing asserts on timing."""

from __future__ import annotations

import socket
import struct
import uuid

import pytest

from odradek.protocol.generated.error_codes import ErrorCode as E
from odradek.testing.broker import InProcessBroker
from tests.server.group_clients import create_topic, produce, wait_for
from tests.server.group_wire import WireClient
from tests.server.test_share_fetch_wire import offsets, share_fetch
from tests.server.test_share_group_heartbeat import join, settled

LOCK_MS = 60_000


@pytest.fixture
def long_lock_broker(tmp_path):
    with InProcessBroker(tmp_path / "data", **{"group.share.record.lock.duration.ms": LOCK_MS}) as b:
        yield b


def abort(c: WireClient) -> None:
    """Close the socket with a reset (SO_LINGER 0), as a killed process's socket goes."""
    c.sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    c.close()


def test_abrupt_close_releases_the_members_records(long_lock_broker):
    broker = long_lock_broker
    create_topic(broker.bootstrap, "q", 1)
    topic_id = broker.broker.metadata_image().topic("q").topic_id
    a, b = str(uuid.uuid4()), str(uuid.uuid4())
    ca, cb = WireClient(broker.port), WireClient(broker.port)
    try:
        settled(ca, "sg", a, join(ca, "sg", a), 1)
        settled(cb, "sg", b, join(cb, "sg", b), 1)
        opened = share_fetch(ca, "sg", a, 0, topic_id)  # share.auto.offset.reset latest
        assert opened.error_code == E.NONE and opened.acquisition_lock_timeout_ms == LOCK_MS
        assert share_fetch(cb, "sg", b, 0, topic_id).error_code == E.NONE
        produce(broker.bootstrap, "q", [b"v%d" % i for i in range(5)], partitions=1)
        (pd,) = share_fetch(ca, "sg", a, 1, topic_id, max_wait_ms=5000).responses[0].partitions
        assert offsets(pd) == [0, 1, 2, 3, 4] and [x.delivery_count for x in pd.acquired_records] == [1]
        abort(ca)
        epoch = {"n": 1}

        def redelivered():
            r = share_fetch(cb, "sg", b, epoch["n"], topic_id, max_wait_ms=2000)
            assert r.error_code == E.NONE
            epoch["n"] += 1
            got = [p for t in r.responses for p in t.partitions if p.acquired_records]
            return got[0] if got else None
        pd = wait_for(redelivered, timeout=20)
        assert offsets(pd) == [0, 1, 2, 3, 4] and {x.delivery_count for x in pd.acquired_records} == {2}
        assert broker.broker.share_partition_manager.sessions.get("sg", a) is None
    finally:
        ca.close()
        cb.close()
