"""Kafka's ClientQuotaManager: the most specific quota wins (DefaultQuotaCallback's order),
rates over quota.window.num samples, throttle time (rate - quota) / quota * span."""

from odradek.server.client_quota_configs import make_entity as e
from odradek.server.client_quota_manager import ClientQuotaManager, QuotaCache
from odradek.storage.clock import FakeClock

KEY = "producer_byte_rate"


def test_precedence_is_kafkas():
    cache = QuotaCache()
    assert cache.empty and cache.find(KEY, "alice", "c") is None
    order = [e(user="alice", client_id="c"), e(user="alice", client_id=None), e(user="alice"),
             e(user=None, client_id="c"), e(user=None, client_id=None), e(user=None),
             e(client_id="c"), e(client_id=None)]
    for i, entity in enumerate(order):
        cache.update(entity, {KEY: float(i + 1)})
    for i, entity in enumerate(order):
        assert cache.find(KEY, "alice", "c") == (entity, float(i + 1))
        cache.update(entity, {})
    assert cache.empty
    cache.update(e(user="bob"), {"consumer_byte_rate": 1.0})
    assert cache.find(KEY, "bob", "c") is None  # another kind of quota does not count


def test_under_the_quota_nothing_is_throttled_and_over_it_the_throttle_is_kafkas():
    clock, cache = FakeClock(), QuotaCache()
    cache.update(e(client_id="greedy"), {KEY: 1000.0})
    manager = ClientQuotaManager(KEY, cache, clock, window_num=11, window_size_seconds=1)
    assert manager.record_and_get_throttle_time_ms("ANONYMOUS", "other", 10**9) == 0  # no quota
    # the span is at least 10 windows: 10,000 bytes at once is exactly 1000 B/s
    assert manager.record_and_get_throttle_time_ms("ANONYMOUS", "greedy", 10_000) == 0
    # 20,000 bytes over 10 s is 2000 B/s: (2000 - 1000) / 1000 * 10,000 ms
    assert manager.record_and_get_throttle_time_ms("ANONYMOUS", "greedy", 10_000) == 10_000
    # 11 windows later those samples are gone
    clock.advance(11_000)
    assert manager.record_and_get_throttle_time_ms("ANONYMOUS", "greedy", 100) == 0


def test_clients_sharing_a_default_quota_are_measured_apart():
    clock, cache = FakeClock(), QuotaCache()
    cache.update(e(client_id=None), {KEY: 1000.0})
    manager = ClientQuotaManager(KEY, cache, clock)
    assert manager.record_and_get_throttle_time_ms("u", "a", 10_000) == 0
    assert manager.record_and_get_throttle_time_ms("u", "b", 10_000) == 0
    assert manager.record_and_get_throttle_time_ms("u", "a", 10_000) > 0


def test_the_throttle_is_capped_at_the_measured_span():
    clock, cache = FakeClock(), QuotaCache()
    cache.update(e(user="u"), {KEY: 1.0})
    manager = ClientQuotaManager(KEY, cache, clock, window_num=3, window_size_seconds=1)
    assert manager.record_and_get_throttle_time_ms("u", "c", 10**6) == 2000
