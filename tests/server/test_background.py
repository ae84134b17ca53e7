"""The broker's periodic work: producer ids silent for ``producer.id.expiration.ms`` are
forgotten every ``producer.id.expiration.check.interval.ms``, and a producer that comes back
afterwards is accepted (KIP-360)."""

from __future__ import annotations

import time

from confluent_kafka import Producer

from odradek.server.background import _expire_producers
from odradek.storage.clock import FakeClock
from odradek.testing.broker import InProcessBroker
from tests.server.clients import unique_topic, wait_until


def _produce(producer: Producer, topic: str, values: list[bytes], timestamp: int | None = None) -> None:
    errors = []
    extra = {} if timestamp is None else {"timestamp": timestamp}
    for v in values:
        producer.produce(topic, v, partition=0, on_delivery=lambda err, msg: err and errors.append(err),
                         **extra)
    assert producer.flush(30) == 0
    assert errors == []


def _producers(b: InProcessBroker, topic: str) -> int:
    return len(b.broker.replica_manager.get(topic, 0).producer_state)


def test_silent_producer_ids_expire_and_may_come_back(tmp_path):
    # The broker's clock is a FakeClock and the records carry its time: silence (now minus
    # the producer's last batch timestamp) grows only when the test moves the clock, however
    # slowly the machine runs; the checks themselves run every 50 ms of real time.
    clock = FakeClock(int(time.time() * 1000))
    props = {"producer.id.expiration.ms": "200", "producer.id.expiration.check.interval.ms": "50"}
    with InProcessBroker(tmp_path / "data", clock=clock, **props) as b:
        topic = unique_topic("expire")
        producer = Producer({"bootstrap.servers": b.bootstrap, "enable.idempotence": True, "linger.ms": 0})
        _produce(producer, topic, [b"a", b"b"], clock.milliseconds())
        clock.advance(199)  # silent for less than producer.id.expiration.ms: kept
        b.call(_expire_producers, b.broker)  # a check now, as the periodic one does
        assert _producers(b, topic) == 1
        clock.advance(1)  # silent for exactly producer.id.expiration.ms: forgotten
        wait_until(lambda: _producers(b, topic) == 0, what="the silent producer id expired")
        # The same producer (same id, next sequence) is accepted as an unknown producer.
        _produce(producer, topic, [b"c"], clock.milliseconds())
        assert _producers(b, topic) == 1
        assert b.broker.replica_manager.get(topic, 0).log_end_offset == 3


def test_producer_ids_are_kept_until_they_have_been_silent_long_enough(tmp_path):
    props = {"producer.id.expiration.check.interval.ms": "50"}  # expiration: Kafka's one day
    with InProcessBroker(tmp_path / "data", **props) as b:
        topic = unique_topic("keep")
        producer = Producer({"bootstrap.servers": b.bootstrap, "enable.idempotence": True, "linger.ms": 0})
        _produce(producer, topic, [b"a"])
        time.sleep(0.5)  # ten checks
        assert _producers(b, topic) == 1


def test_a_deleted_topics_directory_is_erased_after_file_delete_delay_not_at_retention(tmp_path):
    """Retention passes every 5 minutes here; the deleted partition's directory still goes
    once its file.delete.delay.ms (the broker's log.segment.delete.delay.ms) has passed."""
    from confluent_kafka.admin import AdminClient, NewTopic

    with InProcessBroker(tmp_path, log_segment_delete_delay_ms=500, log_retention_check_interval_ms=300000) as b:
        admin = AdminClient({"bootstrap.servers": b.bootstrap})
        topic = unique_topic("doomed")
        admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(30)
        _produce(Producer({"bootstrap.servers": b.bootstrap}), topic, [b"x"] * 10)
        admin.delete_topics([topic])[topic].result(30)

        def leftovers() -> list[str]:
            return [p.name for p in tmp_path.iterdir() if p.name.startswith(topic)]

        assert wait_until(lambda: not leftovers(), 15), leftovers()


def test_retention_tells_fetch_sessions_of_the_log_starts_it_moved():
    """A retention pass notifies (``ReplicaManager.notify``) the partitions whose log start
    offset it moved, and only those: fetch sessions read only what changed
    (``server/fetch_session_changes.py``), so an idle consumer must still hear it."""
    import asyncio
    from types import SimpleNamespace

    from odradek.server.background import _retention

    parts = {("t", 0): SimpleNamespace(high_watermark=10, log_start_offset=0),
             ("t", 1): SimpleNamespace(high_watermark=10, log_start_offset=0)}
    notified = []

    def run_retention(now, high_watermarks):
        parts[("t", 1)].log_start_offset = 5  # one segment of t-1 deleted
        return 1
    broker = SimpleNamespace(
        clock=FakeClock(0),
        replica_manager=SimpleNamespace(partitions=parts, notify=notified.append),
        log_manager=SimpleNamespace(run_retention=run_retention, remove_deleted=lambda now: 0))
    asyncio.run(_retention(broker))
    assert notified == [("t", 1)]
