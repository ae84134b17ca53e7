"""Kafka's ClientQuotaManager: the most specific quota wins (DefaultQuotaCallback's order),
rates over quota.window.num samples, throttle time (rate - quota) / quota * span; and against a
broker with real clients: a greedy producer held to its quota and told its throttle time, an
unquota'd one not throttled, a consumer's fetch quota, a client ignoring its throttle muted
(the producers' plain batches answered by the produce fast path, as a spy shows)."""

import time

import pytest
from confluent_kafka import Consumer, Producer

from odradek.client.admin_quotas import ClientQuotaAlteration
from odradek.client.sync import AdminClient
from odradek.server.client_quota_configs import make_entity as e
from odradek.server.client_quota_manager import ClientQuotaManager, QuotaCache
from odradek.storage.clock import FakeClock
from odradek.testing.broker import InProcessBroker
from tests.server.group_clients import create_topic
from tests.server.test_produce_fast_path import Spy
from tests.server.wire import WireClient, fetch_body

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


def test_a_users_clients_share_the_users_quota():
    clock, cache = FakeClock(), QuotaCache()
    cache.update(e(user="alice"), {KEY: 1000.0})
    manager = ClientQuotaManager(KEY, cache, clock)
    assert manager.record_and_get_throttle_time_ms("alice", "a", 10_000) == 0
    assert manager.record_and_get_throttle_time_ms("alice", "b", 10_000) > 0  # the same rate
    assert manager.record_and_get_throttle_time_ms("bob", "a", 10**9) == 0  # no quota for bob


def test_one_huge_request_earns_a_long_throttle_as_in_kafka():
    clock, cache = FakeClock(), QuotaCache()
    cache.update(e(user="u"), {KEY: 1000.0})
    manager = ClientQuotaManager(KEY, cache, clock, window_num=3, window_size_seconds=1)
    # 1,000,000 bytes over the minimum span of 2 s: (500,000 - 1000) / 1000 * 2000 ms
    assert manager.record_and_get_throttle_time_ms("u", "c", 10**6) == 998_000


def test_a_response_not_sent_is_taken_back_and_one_window_bounds_a_request():
    clock = FakeClock(1_000.0)
    cache = QuotaCache()
    cache.update(e(client_id="c"), {"consumer_byte_rate": 1000.0})
    manager = ClientQuotaManager("consumer_byte_rate", cache, clock, window_num=11)
    assert manager.max_value_in_quota_window("u", "c") == 10_000  # quota x 10 whole windows
    assert manager.max_value_in_quota_window("u", "other") == float("inf")
    assert manager.record_and_get_throttle_time_ms("u", "c", 20_000) > 0
    manager.unrecord("u", "c", 20_000)  # answered empty: as if never fetched
    assert manager.record_and_get_throttle_time_ms("u", "c", 10_000) == 0


# --- enforcement against real clients ---------------------------------------------------------

QUOTA = 200 * 1024  # bytes/s


@pytest.fixture(scope="module")
def quota_broker(tmp_path_factory):
    # two 1 s windows: the measured span is at least 1 s, so a burst over the quota is caught
    # within a second rather than after Kafka's default ten
    with InProcessBroker(tmp_path_factory.mktemp("quota") / "data", quota_window_num="2",
                         num_partitions="1") as b:
        admin = AdminClient(b.bootstrap)
        try:
            assert set(admin.alter_client_quotas([
                ClientQuotaAlteration({"client-id": "greedy"}, [("producer_byte_rate", QUOTA)]),
                ClientQuotaAlteration({"client-id": "slow-reader"}, [("consumer_byte_rate", QUOTA)]),
                ClientQuotaAlteration({"client-id": "muted"}, [("producer_byte_rate", 1)]),
                ClientQuotaAlteration({"client-id": "wire-test"}, [("consumer_byte_rate", QUOTA)]),
            ]).values()) == {None}
        finally:
            admin.close()
        yield b


def _producer(broker, client_id, throttles):
    return Producer({"bootstrap.servers": broker.bootstrap, "client.id": client_id, "linger.ms": 5, "batch.size": 16384,
                     "throttle_cb": lambda event: throttles.append(event.throttle_time)})


def test_a_greedy_producer_is_held_to_its_quota_while_another_is_not_throttled(quota_broker):
    for topic in ("quota-greedy", "quota-polite"):  # (led here before the first produce)
        create_topic(quota_broker.bootstrap, topic, 1)
    spy = Spy(quota_broker)  # both produce plain batches: the fast path answers, throttle time included
    greedy_throttles, polite_throttles, acked = [], [], [0, 0]
    greedy = _producer(quota_broker, "greedy", greedy_throttles)
    polite = _producer(quota_broker, "polite", polite_throttles)
    value = b"x" * 1024

    def count(i):
        def on_delivery(err, msg):
            if err is None:
                acked[i] += len(msg.value())
        return on_delivery

    start = time.monotonic()
    while time.monotonic() - start < 2.0:
        try:
            greedy.produce("quota-greedy", value, on_delivery=count(0))
        except BufferError:
            pass
        if acked[1] < 100 * 1024 and len(polite) < 100:  # a little (and never a full queue)
            polite.produce("quota-polite", value, on_delivery=count(1))
        greedy.poll(0)
        polite.poll(0)
    elapsed = time.monotonic() - start
    greedy.poll(0.5)
    polite.flush(10)
    assert acked[0] > 0 and acked[0] / elapsed < 3 * QUOTA, (acked[0], elapsed)
    assert any(t > 0 for t in greedy_throttles), greedy_throttles
    assert acked[1] >= 100 * 1024 and not any(t > 0 for t in polite_throttles), polite_throttles
    assert spy.taken > 0 and spy.declined == 0, (spy.taken, spy.declined)
    greedy.purge()
    greedy.flush(0)


def test_a_consumer_over_its_fetch_quota_is_told_its_throttle_time(quota_broker):
    producer = _producer(quota_broker, "filler", [])
    for _ in range(1024):
        producer.produce("quota-fetch", b"y" * 1024)
        producer.poll(0)
    producer.flush(10)
    throttles = []
    consumer = Consumer({"bootstrap.servers": quota_broker.bootstrap, "client.id": "slow-reader",
                         "group.id": "quota-g", "auto.offset.reset": "earliest",
                         "throttle_cb": lambda event: throttles.append(event.throttle_time)})
    consumer.subscribe(["quota-fetch"])
    try:
        read = 0
        deadline = time.monotonic() + 20
        while not any(t > 0 for t in throttles) and time.monotonic() < deadline:
            msg = consumer.poll(0.2)
            if msg is not None and msg.error() is None:
                read += len(msg.value())
        assert any(t > 0 for t in throttles), (throttles, read)
        while read < 1024 * 1024 and time.monotonic() < deadline + 20:  # slowed, never starved
            msg = consumer.poll(0.2)
            if msg is not None and msg.error() is None:
                read += len(msg.value())
        assert read == 1024 * 1024
    finally:
        consumer.close()


def test_a_fetch_is_capped_to_one_quota_window_and_a_throttled_one_answered_empty(quota_broker):
    """Kafka's fetch quota: ``max_bytes`` capped to what the quota allows in a window (here
    QUOTA x 1 s), and a fetch that goes over the quota answered with no partitions."""
    producer = _producer(quota_broker, "filler", [])
    for _ in range(600):
        producer.produce("quota-wire", b"z" * 1024)
        producer.poll(0)
    producer.flush(10)
    wire = WireClient(quota_broker.bootstrap)  # its client id, wire-test, has the fetch quota
    try:
        body = fetch_body("quota-wire", 0, 0)
        body.max_bytes = body.topics[0].partitions[0].partition_max_bytes = 10 << 20
        _, first = wire.request("Fetch", 12, body)
        sent = len(first.responses[0].partitions[0].records)
        assert first.throttle_time_ms == 0 and 0 < sent <= QUOTA + 20_000, sent  # a batch may pass the cap
        _, second = wire.request("Fetch", 12, body)  # at once: now over the quota
        assert second.throttle_time_ms > 0 and second.responses == []
    finally:
        wire.close()


def test_the_broker_mutes_a_client_that_ignores_its_throttle_time(quota_broker):
    """A client that sends again at once (as no real client should) is not read: its next
    request waits in the broker until the throttle time has passed (here: ended by hand).
    Its plain batches to an existing topic are the produce fast path's, which mutes it."""
    import asyncio

    from odradek.client.connection import BrokerConnection
    from odradek.protocol.api_keys import ApiKey
    from odradek.protocol.generated.produce_request import (
        PartitionProduceData, ProduceRequest, TopicProduceData,
    )
    from odradek.records.record import Record
    from odradek.records.builder import build_batch

    broker = quota_broker.broker
    request = ProduceRequest(acks=1, timeout_ms=5000, topic_data=[TopicProduceData(
        name="quota-muted", partition_data=[PartitionProduceData(
            index=0, records=build_batch([Record(offset=0, timestamp=0, key=None, value=b"z" * 1000)]))])])

    create_topic(quota_broker.bootstrap, "quota-muted", 1)
    spy = Spy(quota_broker)

    def connection_of(port):
        return next(c for c in broker.connections if c.peer.endswith(f":{port}"))

    async def run():
        conn = await BrokerConnection("127.0.0.1", quota_broker.port, client_id="muted").connect()
        try:
            first = await conn.send(ApiKey.PRODUCE, request)
            assert first.throttle_time_ms > 0
            held = conn.send(ApiKey.PRODUCE, request)
            muted = quota_broker.call(connection_of, conn._transport.get_extra_info("sockname")[1])
            assert quota_broker.call(lambda: muted._throttled and muted._reading_paused)
            quota_broker.call(muted.throttled_channel.end)  # the time has passed
            second = await asyncio.wait_for(held, 10)
            assert second.throttle_time_ms > 0
            assert [r.partition_responses[0].base_offset for r in (first.responses + second.responses)] == [0, 1]
        finally:
            await conn.close()

    asyncio.run(run())
    assert (spy.taken, spy.declined) == (2, 0)
