"""Committed offsets and groups survive the broker: a clean restart, a kill -9, and the
loading window in between (COORDINATOR_LOAD_IN_PROGRESS)."""

from __future__ import annotations

import threading

from kafka import KafkaConsumer, TopicPartition
from kafka.structs import OffsetAndMetadata

from odradek.coordinator.group import group_coordinator
from odradek.protocol.generated import ApiKey
from odradek.protocol.generated.error_codes import ErrorCode
from odradek.testing.broker import BrokerProcess, InProcessBroker
from tests.server.group_clients import create_topic, produce, wait_for
from tests.server.group_wire import WireClient, module

VALUES = [b"n%d" % i for i in range(50)]
OF = module("OffsetFetchRequest")


def consume_and_commit(bootstrap: str, group: str, upto: int) -> None:
    """Read the topic as a group member, commit ``upto`` for each of its two partitions."""
    c = KafkaConsumer(bootstrap_servers=bootstrap, group_id=group, auto_offset_reset="earliest",
                      enable_auto_commit=False)
    try:
        wait_for(lambda: c.partitions_for_topic("durable"))
        c.subscribe(["durable"])
        seen = []
        wait_for(lambda: len(seen) >= len(VALUES), step=lambda: [seen.extend(r) for r in c.poll(500).values()])
        c.commit({TopicPartition("durable", p): OffsetAndMetadata(upto, "", -1) for p in (0, 1)})
    finally:
        c.close()


def resume(bootstrap: str, group: str) -> list[bytes]:
    """What a new member of ``group`` reads: everything after the committed offsets."""
    c = KafkaConsumer(bootstrap_servers=bootstrap, group_id=group, auto_offset_reset="earliest",
                      enable_auto_commit=False)
    try:
        wait_for(lambda: c.partitions_for_topic("durable"))
        c.subscribe(["durable"])
        seen = []
        wait_for(lambda: len(seen) >= len(VALUES) - 2 * 20,
                 step=lambda: [seen.extend(m.value for m in r) for r in c.poll(500).values()])
        for _ in range(2):
            seen.extend(m.value for r in c.poll(200).values() for m in r)
        return seen
    finally:
        c.close()


def fetch_offsets(port: int, group: str):
    with WireClient(port) as w:
        r = w.call(ApiKey.OFFSET_FETCH, 7, group_id=group,
                   topics=[OF.OffsetFetchRequestTopic(name="durable", partition_indexes=[0, 1])])
        return r.error_code, [p.committed_offset for t in r.topics for p in t.partitions]


def expected_after(upto: int) -> list[bytes]:
    return sorted(v for i, v in enumerate(VALUES) if i // 2 >= upto)  # partition = i % 2


def test_offsets_survive_a_clean_restart(tmp_path):
    data = tmp_path / "data"
    with InProcessBroker(data) as b:
        create_topic(b.bootstrap, "durable", 2)
        produce(b.bootstrap, "durable", VALUES, partitions=2)
        consume_and_commit(b.bootstrap, "keeper", 20)
    with InProcessBroker(data) as b:
        # Loading __consumer_offsets is asynchronous (COORDINATOR_LOAD_IN_PROGRESS meanwhile).
        wait_for(lambda: fetch_offsets(b.port, "keeper")[0] != ErrorCode.COORDINATOR_LOAD_IN_PROGRESS)
        assert fetch_offsets(b.port, "keeper") == (ErrorCode.NONE, [20, 20])
        assert sorted(resume(b.bootstrap, "keeper")) == expected_after(20)


def test_offsets_survive_kill_minus_nine(tmp_path):
    data = tmp_path / "data"
    first = BrokerProcess(data, log_flush_interval_messages=1).start()
    try:
        create_topic(first.bootstrap, "durable", 2)
        produce(first.bootstrap, "durable", VALUES, partitions=2)
        consume_and_commit(first.bootstrap, "survivor", 15)
    finally:
        first.kill()
    with BrokerProcess(data, log_flush_interval_messages=1) as second:
        port = int(second.bootstrap.rsplit(":", 1)[1])
        wait_for(lambda: fetch_offsets(port, "survivor") == (ErrorCode.NONE, [15, 15]))
        assert sorted(resume(second.bootstrap, "survivor")) == expected_after(15)


def test_requests_wait_for_loading_with_coordinator_load_in_progress(tmp_path, monkeypatch):
    data = tmp_path / "data"
    with InProcessBroker(data) as b:
        create_topic(b.bootstrap, "durable", 2)
        produce(b.bootstrap, "durable", VALUES, partitions=2)
        consume_and_commit(b.bootstrap, "patient", 7)
    release = threading.Event()
    real_load = group_coordinator.load_shard

    def slow_load(shard, plog):
        release.wait(30)
        return real_load(shard, plog)

    monkeypatch.setattr(group_coordinator, "load_shard", slow_load)
    with InProcessBroker(data) as b:
        try:
            assert fetch_offsets(b.port, "patient") == (ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, [])
            with WireClient(b.port) as w:
                hb = w.call(ApiKey.HEARTBEAT, 4, group_id="patient", generation_id=1, member_id="m")
                assert hb.error_code == ErrorCode.NONE  # answered blindly while loading, as Kafka does
        finally:
            release.set()
        wait_for(lambda: fetch_offsets(b.port, "patient") == (ErrorCode.NONE, [7, 7]))
