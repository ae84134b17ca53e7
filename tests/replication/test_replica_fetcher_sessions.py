"""A replica fetcher keeps a KIP-227 fetch session with its leader
(``protocol/fetch_session_handler.py``): after the first full Fetch it sends incremental
ones, and still copies what the leader appends."""

from __future__ import annotations

import asyncio

from odradek.replication.replica_fetcher import InitialFetchState
from odradek.replication.replica_fetcher_manager import ReplicaFetcherManager
from tests.replication.test_replica_fetcher import _bytes, _leading, _until, follower, leader  # noqa: F401
from tests.server.wire import WireClient, produce_body
from tests.storage.helpers import make_batch


def test_a_follower_fetches_through_an_incremental_session(leader, follower):
    topic, lpart = _leading(leader, isr=(1,))
    fpart = follower.follow(topic, lpart.topic_id)

    def follower_sessions():
        cache = getattr(leader.broker, "fetch_sessions", None)
        return [s.epoch for s in cache.sessions.values() if s.privileged] if cache is not None else []

    async def run():
        manager = ReplicaFetcherManager(follower)
        manager.add_partitions({(topic, 0): InitialFetchState(lpart.topic_id, 1, 1, 0)})
        await _until(lambda: fpart.high_watermark == 5, "the follower's high watermark")
        wire = WireClient(leader.bootstrap)
        wire.request("Produce", 9, produce_body(topic, 0, make_batch(0, 2, producer_id=11, base_sequence=2)))
        wire.close()
        await _until(lambda: fpart.high_watermark == 7, "the records appended later")
        epochs = leader.call(follower_sessions)
        await manager.shutdown()
        return epochs
    epochs = asyncio.run(run())
    assert epochs and max(epochs) > 2  # incremental fetches, each moving the session's epoch on
    assert _bytes(fpart) == leader.call(_bytes, lpart)
