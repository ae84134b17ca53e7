"""``FetchSet`` (``replication/fetch_set.py``): a replica fetcher's partitions filed by state
from the keys touched, and the KIP-227 session view that turns them into incremental requests;
then a real follower whose quiet rounds send no partition and whose requests carry only the
partition that changed."""

from __future__ import annotations

import asyncio
import uuid

from odradek.replication import replica_fetcher
from odradek.replication.fetch_set import FetchSet, forgotten_topics
from odradek.replication.replica_fetcher import (
    FENCED, FETCHING, TRUNCATING, InitialFetchState, PartitionFetchState,
)
from odradek.replication.replica_fetcher_manager import ReplicaFetcherManager
from tests.replication.test_replica_fetcher import _bytes, _leading, _until, follower, leader  # noqa: F401
from tests.server.wire import WireClient, produce_body
from tests.storage.helpers import make_batch

A, B, C = ("a", 0), ("b", 0), ("c", 1)
ID = uuid.uuid4()


def _fields(key, state):
    return (state.fetch_offset, state.leader_epoch)


def _set(**states):
    partitions = {}
    fs = FetchSet(partitions, TRUNCATING, FETCHING)
    for key, state in states.items():
        partitions[key] = state
        fs.touch(key)
    return partitions, fs


def _state(offset: int = 0, state: str = FETCHING, delayed_until: float = 0.0):
    return PartitionFetchState(ID, 1, offset, state=state, delayed_until=delayed_until)


def test_touched_keys_are_filed_by_state_and_delay():
    partitions, fs = _set()
    partitions.update({A: _state(), B: _state(state=TRUNCATING), C: _state(delayed_until=5.0)})
    for key in (A, B, C):
        fs.touch(key)
    fs.refresh(now=1.0)
    assert list(fs.fetchable) == [A] and list(fs.truncating) == [B] and fs.delayed == {C: 5.0}
    assert fs.next_due() == 5.0
    partitions[A].state = FENCED  # untouched: stays where it was until touched
    fs.refresh(now=2.0)
    assert list(fs.fetchable) == [A]
    fs.touch(A)
    fs.refresh(now=6.0)  # A fenced goes nowhere; C due comes back
    assert list(fs.fetchable) == [C] and not fs.delayed and fs.next_due() is None


def test_the_session_view_sends_only_what_changed_and_forgets_what_left():
    partitions, fs = _set()
    partitions.update({A: _state(0), B: _state(7)})
    fs.touch(A)
    fs.touch(B)
    fs.refresh(now=0.0)
    assert set(fs.full(_fields)) == {A, B}
    fs.refresh(now=1.0)
    assert fs.incremental(_fields) == ({}, [])  # a quiet round: nothing to send
    fs.touch(B)  # touched, but its fields are those sent
    fs.refresh(now=2.0)
    assert fs.incremental(_fields) == ({}, [])
    partitions[A].fetch_offset = 3
    fs.touch(A)
    fs.partition_changed(B)  # as ReplicaManager.notify tells it
    fs.refresh(now=3.0)
    changed, forgotten = fs.incremental(_fields)
    assert list(changed) == [A] and changed[A][1] == (3, 1) and forgotten == []
    gone = partitions.pop(B)
    fs.touch(B)
    partitions[C] = _state(1)
    fs.touch(C)
    fs.refresh(now=4.0)
    changed, forgotten = fs.incremental(_fields)
    assert list(changed) == [C] and forgotten == [(B, gone)]
    (ft,) = forgotten_topics(forgotten)  # by topic id too: the leader's session may be keyed by it
    assert (ft.topic, ft.topic_id, ft.partitions) == ("b", ID, [0])
    assert set(fs.sent) == {A, C}
    partitions[A] = _state(3)  # re-added (a new state object): sent again, though its fields match
    fs.touch(A)
    fs.refresh(now=5.0)
    assert list(fs.incremental(_fields)[0]) == [A]


def test_a_quiet_follower_sends_no_partition_and_then_only_the_one_that_changed(leader, follower, monkeypatch):
    topics = [_leading(leader, isr=(1,)) for _ in range(3)]
    parts = [follower.follow(topic, lpart.topic_id) for topic, lpart in topics]
    sent: list[tuple[bool, list]] = []

    async def run():
        manager = ReplicaFetcherManager(follower)
        manager.add_partitions({(topic, 0): InitialFetchState(lpart.topic_id, 1, 1, 0) for topic, lpart in topics})
        (fetcher,) = manager.fetchers.values()
        build = replica_fetcher.fetch_request

        def recording(broker, entries):
            sent.append((fetcher._session.full, sorted(entries)))
            return build(broker, entries)
        monkeypatch.setattr(replica_fetcher, "fetch_request", recording)
        await _until(lambda: all(p.high_watermark == 5 for p in parts), "the followers' high watermarks")
        await _until(lambda: sum(1 for full, keys in sent if not full and not keys) >= 3, "quiet rounds")
        del sent[:]
        wire = WireClient(leader.bootstrap)
        wire.request("Produce", 9, produce_body(topics[1][0], 0, make_batch(0, 2, producer_id=11, base_sequence=2)))
        wire.close()
        await _until(lambda: parts[1].high_watermark == 7, "the records appended later")
        await manager.shutdown()
    asyncio.run(run())
    assert sent and not any(full for full, _ in sent)
    assert {key for _, keys in sent for key in keys} == {(topics[1][0], 0)}
    assert all(_bytes(p) == leader.call(_bytes, lpart) for p, (_, lpart) in zip(parts, topics))
