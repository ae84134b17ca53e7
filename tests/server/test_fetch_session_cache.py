"""FetchSessionCache without sockets: ids, epochs, Kafka's eviction rule."""

from __future__ import annotations

import random

from odradek.server.fetch_session_cache import INVALID_SESSION_ID, FetchSessionCache, next_epoch


def _parts(n: int) -> dict:
    return {("t", p): None for p in range(n)}


def test_ids_are_non_zero_and_distinct_and_epochs_start_at_one():
    cache = FetchSessionCache(max_entries=10, eviction_ms=1000, rng=random.Random(7))
    ids = {cache.maybe_create_session(0, False, True, _parts(1)) for _ in range(10)}
    assert len(ids) == 10 and INVALID_SESSION_ID not in ids
    assert all(-2**31 <= i < 2**31 and cache.get(i).epoch == 1 for i in ids)
    assert (next_epoch(1), next_epoch(2**31 - 1), next_epoch(-1)) == (2, 1, -1)


def test_full_cache_evicts_only_a_stale_session():
    cache = FetchSessionCache(max_entries=2, eviction_ms=1000)
    a = cache.maybe_create_session(0, False, True, _parts(1))
    b = cache.maybe_create_session(10, False, True, _parts(1))
    assert cache.maybe_create_session(500, False, True, _parts(5)) == INVALID_SESSION_ID  # none evictable yet
    cache.touch(cache.get(a), 900)
    c = cache.maybe_create_session(1011, False, True, _parts(1))  # b idle > 1000 ms: least recently used
    assert c != INVALID_SESSION_ID and cache.get(b) is None and cache.get(a) is not None
    assert cache.evictions == 1


def test_old_sessions_evicted_by_value_small_before_large():
    cache = FetchSessionCache(max_entries=2, eviction_ms=1000)
    small = cache.maybe_create_session(0, False, True, _parts(1))
    large = cache.maybe_create_session(0, False, True, _parts(9))
    for s in (small, large):
        cache.touch(cache.get(s), 1500)  # older than eviction_ms since creation: evictable by all
    assert cache.maybe_create_session(1600, False, True, _parts(0)) == INVALID_SESSION_ID  # worth less than both
    new = cache.maybe_create_session(1600, False, True, _parts(3))
    assert new != INVALID_SESSION_ID and cache.get(small) is None and cache.get(large) is not None


def test_a_follower_evicts_a_young_consumer_session_but_not_a_young_follower_session():
    cache = FetchSessionCache(max_entries=2, eviction_ms=1000)
    consumer = cache.maybe_create_session(0, False, True, _parts(50))
    follower = cache.maybe_create_session(0, True, True, _parts(1))
    assert cache.maybe_create_session(10, False, True, _parts(100)) == INVALID_SESSION_ID  # young: not by a consumer
    other = cache.maybe_create_session(10, True, True, _parts(1))
    assert other != INVALID_SESSION_ID and cache.get(consumer) is None and cache.get(follower) is not None
    assert cache.maybe_create_session(20, True, True, _parts(100)) == INVALID_SESSION_ID  # young followers stay
