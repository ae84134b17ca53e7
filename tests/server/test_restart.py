"""Durability across restarts of the broker process, seen through real clients.

- a clean stop (SIGTERM) and restart keeps every record, and skips recovery;
- kill -9 keeps every acknowledged record (the page cache outlives the process, so this
  shows the broker wrote before answering, not that anything reached the disk);
- a power cut keeps every acknowledged record with ``log.flush.interval.messages=1``: the
  data directory is cut back to what was fsynced (``tests.storage.power_loss``) and a new
  broker serves it;
- kill -9 with flushing left to the OS still recovers the log to a valid prefix that is
  served, and the log takes appends again;
- producer state survives: an idempotent producer's retry after a restart is still
  recognised as a duplicate.
"""

from __future__ import annotations

import os

from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer
from kafka.admin import NewTopic

from odradek.storage.log_manager import CLEAN_SHUTDOWN_FILE
from odradek.testing.broker import BrokerProcess, InProcessBroker
from tests.server.wire import WireClient, produce_body
from tests.storage.power_loss import PowerLoss

RECORDS = 300


def produce(bootstrap: str, topic: str, n: int, start: int = 0, per_batch: int = 50) -> None:
    """``n`` records in batches of at most ``per_batch`` (a flush after each): a torn tail
    can then only take the last batch, whatever the client's timing."""
    producer = KafkaProducer(bootstrap_servers=bootstrap, acks=1, linger_ms=1)
    futures = []
    for i in range(start, start + n):
        futures.append(producer.send(topic, key=b"k%d" % (i % 7), value=b"v%d" % i))
        if (i - start + 1) % per_batch == 0:
            producer.flush()
    for f in futures:
        f.get(15)
    producer.close()


def consume_all(bootstrap: str, topic: str, expect: int | None = None) -> list[bytes]:
    consumer = KafkaConsumer(topic, bootstrap_servers=bootstrap, group_id=None,
                             auto_offset_reset="earliest", consumer_timeout_ms=3000)
    values = [m.value for m in consumer]
    consumer.close()
    if expect is not None:
        assert len(values) == expect
    return values


def create(bootstrap: str, topic: str, partitions: int = 3) -> None:
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    admin.create_topics([NewTopic(topic, partitions, 1)])
    admin.close()


def test_clean_restart_keeps_every_record(tmp_path):
    data = tmp_path / "data"
    with BrokerProcess(data) as b:
        create(b.bootstrap, "durable")
        produce(b.bootstrap, "durable", RECORDS)
        assert b.terminate() == 0
    assert (data / CLEAN_SHUTDOWN_FILE).exists()  # the next start skips recovery
    with BrokerProcess(data) as b:
        values = consume_all(b.bootstrap, "durable")
        assert sorted(values) == sorted(b"v%d" % i for i in range(RECORDS))
        produce(b.bootstrap, "durable", 10, start=RECORDS)
        assert len(consume_all(b.bootstrap, "durable")) == RECORDS + 10


def test_kill_9_keeps_every_acknowledged_record(tmp_path):
    data = tmp_path / "data"
    with BrokerProcess(data) as b:
        create(b.bootstrap, "acked")
        produce(b.bootstrap, "acked", RECORDS)
        b.kill()
    with BrokerProcess(data) as b:
        values = consume_all(b.bootstrap, "acked")
        assert sorted(values) == sorted(b"v%d" % i for i in range(RECORDS))


def test_power_cut_with_flush_per_message_keeps_acknowledged_records(tmp_path):
    with PowerLoss() as power:
        with InProcessBroker(tmp_path / "data", log_flush_interval_messages=1) as b:
            create(b.bootstrap, "acked")
            produce(b.bootstrap, "acked", RECORDS)  # every send acknowledged
            power.image(tmp_path / "data", tmp_path / "after")
    with InProcessBroker(tmp_path / "after") as b:
        values = consume_all(b.bootstrap, "acked")
        assert sorted(values) == sorted(b"v%d" % i for i in range(RECORDS))


def test_kill_9_without_flush_recovers_a_valid_prefix(tmp_path):
    data = tmp_path / "data"
    with BrokerProcess(data) as b:
        create(b.bootstrap, "unflushed", partitions=1)
        produce(b.bootstrap, "unflushed", RECORDS)
        b.kill()
    # Simulate the torn tail the page cache may leave after a power cut.
    seg = next(p for p in (data).rglob("unflushed-0/*.log"))
    size = seg.stat().st_size
    with open(seg, "r+b") as f:
        f.truncate(size - 17)
        f.seek(0, os.SEEK_END)
        f.write(b"\x00garbage after a torn write\xff" * 3)
    with BrokerProcess(data) as b:
        values = consume_all(b.bootstrap, "unflushed")
        assert values == [b"v%d" % i for i in range(len(values))]  # a prefix, in order
        assert 0 < len(values) < RECORDS
        produce(b.bootstrap, "unflushed", 5, start=1000)
        after = consume_all(b.bootstrap, "unflushed")
        assert after[-5:] == [b"v%d" % i for i in range(1000, 1005)]


def test_idempotent_retry_after_restart_is_a_duplicate(tmp_path):
    from tests.server.wire import simple_batch
    from odradek.records.batch import compute_crc
    import struct

    def batch(seq: int) -> bytes:
        data = bytearray(simple_batch([b"once"]))
        struct.pack_into(">qhi", data, 43, 4242, 0, seq)  # producer id, epoch, base sequence
        struct.pack_into(">I", data, 17, compute_crc(data))
        return bytes(data)

    data = tmp_path / "data"
    with InProcessBroker(data) as b:
        create(b.bootstrap, "idem", partitions=1)
        c = WireClient(b.bootstrap)
        _, first = c.request("Produce", 9, produce_body("idem", 0, batch(0)))
        assert first.responses[0].partition_responses[0].base_offset == 0
    with InProcessBroker(data) as b:
        c = WireClient(b.bootstrap)
        _, retry = c.request("Produce", 9, produce_body("idem", 0, batch(0)))
        part = retry.responses[0].partition_responses[0]
        assert (part.error_code, part.base_offset) == (0, 0)
        _, nxt = c.request("Produce", 9, produce_body("idem", 0, batch(1)))
        assert nxt.responses[0].partition_responses[0].base_offset == 1
        assert consume_all(b.bootstrap, "idem") == [b"once", b"once"]


def test_flush_messages_one_fsyncs_before_acknowledging(tmp_path):
    """With log.flush.interval.messages=1 the recovery point covers every acknowledged
    record as soon as its response is received (not only when the background flush runs)."""
    with InProcessBroker(tmp_path / "data", log_flush_interval_messages=1,
                         log_flush_scheduler_interval_ms=3_600_000) as b:
        create(b.bootstrap, "synced", partitions=1)
        c = WireClient(b.bootstrap)
        from tests.server.wire import simple_batch

        for i in range(5):
            _, resp = c.request("Produce", 9, produce_body("synced", 0, simple_batch([b"%d" % i])))
            assert resp.responses[0].partition_responses[0].base_offset == i
            plog = b.call(lambda: b.broker.replica_manager.get("synced", 0).log)
            assert plog.recovery_point == i + 1
