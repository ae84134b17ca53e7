"""Kafka's ClientRequestQuotaManager: handler time as a percentage of one event loop thread,
the throttle (rate - quota) / quota * span bounded by one window, the exemptions, the larger of
a request's throttles in its response, the mute extended to the later end; and against a broker
with confluent-kafka: a client whose request_percentage is tiny is told throttle times while
a client without a quota is not."""

import asyncio
import dataclasses
import time
from types import SimpleNamespace

import pytest
from confluent_kafka import Producer

from odradek.client.admin_quotas import ClientQuotaAlteration
from odradek.client.sync import AdminClient
from odradek.protocol.api_keys import ApiKey
from odradek.server.client_quota_configs import make_entity as e
from odradek.server.client_quota_manager import QuotaCache
from odradek.server.client_request_quota import ClientRequestQuotaManager, exempt
from odradek.server.principal import KafkaPrincipal
from odradek.server.request import NO_RESPONSE, RequestContext
from odradek.server.throttled_channel import ThrottledChannel
from odradek.storage.clock import FakeClock
from odradek.testing.broker import InProcessBroker

KEY = "request_percentage"
SECOND = 10**9  # ns


class FakeTimer:
    """ns that move only when a test's handler says so."""

    def __init__(self) -> None:
        self.now = 0
        self.calls = 0

    def __call__(self) -> int:
        self.calls += 1
        return self.now


@dataclasses.dataclass
class Response:
    throttle_time_ms: int = 0


class FakeConnection:
    def __init__(self, user: str = "alice") -> None:
        self.principal = KafkaPrincipal.user(user)
        self.throttles: list[int] = []

    def throttle(self, ms: int) -> None:
        self.throttles.append(ms)


def _manager(quota: float | None = 10.0, entity=e(client_id="busy")):
    cache, timer = QuotaCache(), FakeTimer()
    if quota is not None:
        cache.update(entity, {KEY: quota})
    return ClientRequestQuotaManager(cache, FakeClock(), window_num=11, window_size_seconds=1, timer=timer), timer


def _ctx(connection, api_key=ApiKey.METADATA, client_id="busy"):
    return RequestContext(connection, api_key, 0, 1, client_id, 0)


def test_handler_time_is_a_percentage_of_one_thread_and_the_throttle_is_bounded_by_a_window():
    manager, _ = _manager(10.0)
    assert manager.cache.requests
    # the span is at least 10 windows: 1 s of handling in it is exactly 10%
    assert manager.record_and_get_throttle_time_ms("alice", "busy", SECOND) == 0
    # 1.02 s in 10 s is 10.2%: (10.2 - 10) / 10 * 10,000 ms = 200 ms
    assert manager.record_and_get_throttle_time_ms("alice", "busy", SECOND // 50) == 200
    # 2 s in 10 s would earn 10 s; Kafka bounds a request throttle by one window (1 s)
    assert manager.record_and_get_throttle_time_ms("alice", "busy", SECOND) == 1000
    assert manager.record_and_get_throttle_time_ms("alice", "idle", 100 * SECOND) == 0  # no quota
    manager.clock.advance(11_000)  # the samples are gone
    assert manager.record_and_get_throttle_time_ms("alice", "busy", SECOND // 10) == 0


def test_the_cache_knows_whether_any_request_quota_exists():
    cache = QuotaCache()
    cache.update(e(user="u"), {"producer_byte_rate": 1.0})
    assert not cache.empty and not cache.requests
    cache.update(e(client_id=None), {KEY: 5.0})
    assert cache.requests
    cache.update(e(client_id=None), {})
    assert not cache.requests


def test_a_handler_over_the_quota_throttles_its_connection_and_says_so_in_a_copy_of_its_response():
    manager, timer = _manager(10.0)
    connection = FakeConnection()
    shared = Response()

    def slow(ctx, body):
        timer.now += 2 * SECOND
        return shared

    response = manager.handle(_ctx(connection), None, slow)
    assert response.throttle_time_ms == 1000 and connection.throttles == [1000]
    assert shared.throttle_time_ms == 0  # a handler's own object is left alone


def test_the_larger_of_a_byte_rate_throttle_and_the_request_throttle_is_answered():
    manager, timer = _manager(10.0)
    connection = FakeConnection()

    def throttled_for_bytes(ctx, body):
        timer.now += 2 * SECOND
        return Response(throttle_time_ms=5000)

    assert manager.handle(_ctx(connection), None, throttled_for_bytes).throttle_time_ms == 5000
    assert connection.throttles == [1000]  # the connection keeps the later end (ThrottledChannel)


def test_clients_without_a_request_quota_are_not_timed():
    manager, timer = _manager(10.0)
    connection = FakeConnection()
    response = manager.handle(_ctx(connection, client_id="other"), None, lambda ctx, body: Response())
    assert response.throttle_time_ms == 0 and timer.calls == 0 and connection.throttles == []


def test_cluster_actions_followers_in_process_requests_and_acks_0_are_exempt():
    manager, timer = _manager(0.001, e(client_id=None))
    connection = FakeConnection()

    def slow(ctx, body):
        timer.now += SECOND
        return Response()

    for api_key in (ApiKey.LEADER_AND_ISR, ApiKey.UPDATE_METADATA, ApiKey.STOP_REPLICA,
                    ApiKey.CONTROLLED_SHUTDOWN, ApiKey.WRITE_TXN_MARKERS, ApiKey.ALTER_PARTITION):
        assert manager.handle(_ctx(connection, api_key), None, slow).throttle_time_ms == 0
    follower = SimpleNamespace(replica_id=2, replica_state=None)
    follower_v15 = SimpleNamespace(replica_id=-1, replica_state=SimpleNamespace(replica_id=3))
    consumer = SimpleNamespace(replica_id=-1, replica_state=SimpleNamespace(replica_id=-1))
    assert exempt(_ctx(connection, ApiKey.FETCH), follower)
    assert exempt(_ctx(connection, ApiKey.FETCH), follower_v15)
    assert not exempt(_ctx(connection, ApiKey.FETCH), consumer)
    in_process = SimpleNamespace(in_process=True)
    assert manager.handle(_ctx(in_process), None, slow).throttle_time_ms == 0
    assert manager.handle(_ctx(connection, ApiKey.PRODUCE), None, lambda c, b: NO_RESPONSE) is NO_RESPONSE
    assert connection.throttles == []
    assert manager.handle(_ctx(connection), None, slow).throttle_time_ms == 1000  # others are not


def test_a_waiting_handler_is_charged_for_its_steps_not_for_its_wait():
    manager, timer = _manager(10.0)
    connection = FakeConnection()

    async def run():
        gate = asyncio.get_running_loop().create_future()

        async def long_poll(ctx, body):
            timer.now += SECOND // 2  # handling before the wait
            await gate
            timer.now += SECOND // 4  # and after it
            return Response()

        task = asyncio.ensure_future(manager.handle(_ctx(connection), None, long_poll))
        await asyncio.sleep(0)
        timer.now += 1000 * SECOND  # the wait: not charged
        gate.set_result(None)
        return await task

    # 0.5 + 0.25 s of steps in the 10 s span: 7.5%, under 10%
    assert asyncio.run(run()).throttle_time_ms == 0
    # the charge was 0.75 s: another 0.3 s makes 10.5%, (10.5 - 10) / 10 * 10 s = 500 ms
    assert manager.record_and_get_throttle_time_ms("alice", "busy", 3 * SECOND // 10) == 500


def test_a_mute_is_extended_to_the_later_end_and_never_shortened():
    class Muted:
        def __init__(self) -> None:
            self.states: list[bool] = []

        def mute(self, muted: bool) -> None:
            self.states.append(muted)

    async def run():
        loop = asyncio.get_running_loop()
        connection = Muted()
        channel = ThrottledChannel(connection, loop)
        channel.throttle(1000)
        first_end = channel._end
        channel.throttle(10)  # ends earlier: ignored
        assert channel._end == first_end
        channel.throttle(60_000)
        assert channel._end > first_end and channel._timer.when() == channel._end
        assert channel.active and connection.states == [True]  # muted once
        channel.end()
        assert not channel.active and connection.states == [True, False]

    asyncio.run(run())


# --- against a broker --------------------------------------------------------------------------

@pytest.fixture(scope="module")
def request_quota_broker(tmp_path_factory):
    # two 1 s windows: the span is at least 1 s, so a client's first requests are measured
    with InProcessBroker(tmp_path_factory.mktemp("request-quota") / "data", quota_window_num="2",
                         num_partitions="1") as b:
        admin = AdminClient(b.bootstrap)
        try:
            # 0.001% of the loop is 10 us per second: any request's handling goes over it
            assert set(admin.alter_client_quotas([
                ClientQuotaAlteration({"client-id": "busy"}, [(KEY, 0.001)])]).values()) == {None}
        finally:
            admin.close()
        yield b


def test_a_client_over_its_request_quota_is_told_its_throttle_time_and_another_is_not(request_quota_broker):
    throttles = {"busy": [], "free": []}

    def make(name):
        return Producer({"bootstrap.servers": request_quota_broker.bootstrap, "client.id": name, "linger.ms": 5,
                         "throttle_cb": lambda event: throttles[name].append(event.throttle_time)})

    producers = {name: make(name) for name in throttles}
    for name, producer in producers.items():
        for _ in range(20):
            producer.produce(f"request-quota-{name}", b"v" * 100)
    deadline = time.monotonic() + 30
    while not any(t > 0 for t in throttles["busy"]) and time.monotonic() < deadline:
        for producer in producers.values():
            producer.poll(0.1)
    for producer in producers.values():
        assert producer.flush(30) == 0
    assert any(0 < t <= 1000 for t in throttles["busy"]), throttles  # bounded by one window
    assert not any(t > 0 for t in throttles["free"]), throttles
