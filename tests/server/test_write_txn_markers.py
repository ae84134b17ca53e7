"""The partition side of transactions over the wire, driven by raw requests: transactional
produce, WriteTxnMarkers (as a coordinator sends it), read_committed Fetch (the LSO and
``aborted_transactions``), ListOffsets by isolation level, DescribeProducers; real
read_committed consumers (kafka-python, confluent-kafka) see only committed records; an open
transaction and the aborted index survive a kill -9 (the index even when its files are lost).

The transactions here are made up (no coordinator ever heard of their producer ids), so the
brokers run with ``transaction.partition.verification.enable=false`` (KIP-890 verification
off), as Kafka's own marker tests do; verification is tested in test_txn_verification.py."""

from __future__ import annotations

import glob
import os
import time

import pytest

from odradek.protocol.generated import ApiKey
from odradek.protocol.generated.error_codes import ErrorCode as E
from odradek.records.builder import BatchSpec, build_batch
from odradek.records.reader import iter_records
from odradek.records.record import Record
from odradek.testing.broker import BrokerProcess, InProcessBroker
from tests.server.group_wire import WireClient, module

pytestmark = pytest.mark.timeout(120)

PR = module("ProduceRequest")
FR = module("FetchRequest")
LO = module("ListOffsetsRequest")
WM = module("WriteTxnMarkersRequest")
DP = module("DescribeProducersRequest")
T0 = 1_700_000_000_000
UNVERIFIED = {"transaction_partition_verification_enable": "false"}


def batch(values, pid=-1, epoch=-1, seq=-1, transactional=False) -> bytes:
    records = [Record(offset=i, timestamp=T0 + i, key=None, value=v, headers=()) for i, v in enumerate(values)]
    return build_batch(records, BatchSpec(producer_id=pid, producer_epoch=epoch, base_sequence=seq,
                                          is_transactional=transactional))


class Txn:
    """Raw requests for one topic-partition."""

    def __init__(self, c: WireClient, topic: str, partition: int = 0) -> None:
        self.c, self.topic, self.partition = c, topic, partition

    def produce(self, records: bytes, transactional_id: str | None = None):
        r = self.c.call(ApiKey.PRODUCE, 8, transactional_id=transactional_id, acks=-1, timeout_ms=5000,
                        topic_data=[PR.TopicProduceData(name=self.topic, partition_data=[
                            PR.PartitionProduceData(index=self.partition, records=records)])])
        p = r.responses[0].partition_responses[0]
        return p.error_code, p.base_offset

    def marker(self, pid: int, epoch: int, commit: bool, coordinator_epoch: int = 0, topic: str | None = None,
               partition: int | None = None) -> int:
        r = self.c.call(ApiKey.WRITE_TXN_MARKERS, 1, markers=[WM.WritableTxnMarker(
            producer_id=pid, producer_epoch=epoch, transaction_result=commit, coordinator_epoch=coordinator_epoch,
            topics=[WM.WritableTxnMarkerTopic(name=topic or self.topic,
                                              partition_indexes=[self.partition if partition is None else partition])])])
        return r.markers[0].topics[0].partitions[0].error_code

    def fetch(self, offset: int = 0, isolation: int = 1, max_bytes: int = 1 << 20):
        r = self.c.call(ApiKey.FETCH, 11, replica_id=-1, max_wait_ms=0, min_bytes=0, max_bytes=1 << 20,
                        isolation_level=isolation, session_id=0, session_epoch=-1, topics=[FR.FetchTopic(
                            topic=self.topic, partitions=[FR.FetchPartition(
                                partition=self.partition, current_leader_epoch=-1, fetch_offset=offset,
                                log_start_offset=-1, partition_max_bytes=max_bytes)])],
                        forgotten_topics_data=[], rack_id="")
        return r.responses[0].partitions[0]

    def latest(self, isolation: int, timestamp: int = -1) -> int:
        r = self.c.call(ApiKey.LIST_OFFSETS, 5, replica_id=-1, isolation_level=isolation, topics=[LO.ListOffsetsTopic(
            name=self.topic, partitions=[LO.ListOffsetsPartition(partition_index=self.partition, timestamp=timestamp)])])
        return r.topics[0].partitions[0].offset

    def producers(self):
        r = self.c.call(ApiKey.DESCRIBE_PRODUCERS, 0, topics=[DP.TopicRequest(
            name=self.topic, partition_indexes=[self.partition])])
        return r.topics[0].partitions[0]


def fetched_values(p) -> list[bytes]:
    return [r.value for r in iter_records(bytes(p.records))] if p.records else []


def aborted(p) -> list[tuple[int, int]]:
    return [(a.producer_id, a.first_offset) for a in (p.aborted_transactions or [])]


def create_topic(broker, name: str, partitions: int = 1) -> None:
    b = broker.broker
    broker.call(lambda: b.topics.create(b.topics.plan_topic(name, partitions, 1, None, {})))


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    with InProcessBroker(tmp_path_factory.mktemp("txn-markers") / "data", **UNVERIFIED) as b:
        yield b


@pytest.fixture
def client(broker):
    with WireClient(broker.port) as c:
        yield c


def test_abort_hides_data_from_read_committed_and_lists_the_aborted_transaction(broker, client):
    create_topic(broker, "abort-me")
    t = Txn(client, "abort-me")
    pid, epoch = 1000, 3
    assert t.produce(batch([b"a0", b"a1", b"a2"], pid, epoch, 0, True), "tid-1") == (E.NONE, 0)
    assert t.produce(batch([b"plain"])) == (E.NONE, 3)
    # The open transaction holds the LSO at its first offset.
    p = t.fetch(0, isolation=1)
    assert (p.error_code, p.high_watermark, p.last_stable_offset) == (E.NONE, 4, 0)
    assert fetched_values(p) == [] and aborted(p) == []
    p = t.fetch(0, isolation=0)
    assert p.last_stable_offset == 0 and len(fetched_values(p)) == 4
    assert (t.latest(0), t.latest(1)) == (4, 0)
    assert (t.latest(0, timestamp=T0), t.latest(1, timestamp=T0)) == (0, -1)  # by time: below the LSO too
    described = t.producers()
    assert [(s.producer_id, s.producer_epoch, s.last_sequence, s.current_txn_start_offset)
            for s in described.active_producers] == [(pid, epoch, 2, 0)]
    # ABORT: the marker at 4, the LSO past it, the transaction listed for fetches overlapping it.
    assert t.marker(pid, epoch, commit=False, coordinator_epoch=7) == E.NONE
    p = t.fetch(0)
    assert (p.high_watermark, p.last_stable_offset) == (5, 5)
    assert fetched_values(p) == [b"a0", b"a1", b"a2", b"plain"]  # the consumer filters by the list
    assert aborted(p) == [(pid, 0)]
    assert aborted(t.fetch(3)) == [(pid, 0)]  # the marker at 4 is still ahead
    assert aborted(t.fetch(0, isolation=0)) == []
    assert (t.latest(0), t.latest(1)) == (5, 5)
    state = t.producers().active_producers[0]
    assert (state.coordinator_epoch, state.current_txn_start_offset) == (7, -1)
    # A committed transaction afterwards is not listed; fetches past the abort list nothing.
    assert t.produce(batch([b"c0", b"c1"], pid, epoch, 3, True), "tid-1") == (E.NONE, 5)
    assert t.marker(pid, epoch, commit=True, coordinator_epoch=7) == E.NONE
    p = t.fetch(0)
    assert p.last_stable_offset == 8 and aborted(p) == [(pid, 0)]
    assert aborted(t.fetch(5)) == []


def test_marker_fencing_and_transaction_state_errors(broker, client):
    create_topic(broker, "fenced")
    t = Txn(client, "fenced")
    pid, epoch = 2000, 5
    assert t.produce(batch([b"x"], pid, epoch, 0, True), "tid-2") == (E.NONE, 0)
    # A non-transactional batch from a producer with an open transaction.
    assert t.produce(batch([b"y"], pid, epoch, 1, False))[0] == E.INVALID_TXN_STATE
    assert t.marker(pid, epoch - 1, commit=True, coordinator_epoch=3) == E.INVALID_PRODUCER_EPOCH
    assert t.marker(pid, epoch, commit=True, coordinator_epoch=3) == E.NONE
    assert t.marker(pid, epoch, commit=True, coordinator_epoch=2) == E.TRANSACTION_COORDINATOR_FENCED
    # An epoch bump by a marker (the coordinator aborting on InitProducerId) fences the old epoch.
    assert t.marker(pid, epoch + 1, commit=False, coordinator_epoch=3) == E.NONE
    assert t.produce(batch([b"z"], pid, epoch, 1, True), "tid-2")[0] == E.INVALID_PRODUCER_EPOCH
    assert t.marker(pid, epoch, commit=True, topic="no-such-topic") == E.UNKNOWN_TOPIC_OR_PARTITION
    assert t.marker(pid, epoch, commit=True, partition=9) == E.UNKNOWN_TOPIC_OR_PARTITION


def test_markers_of_one_request_are_independent(broker, client):
    create_topic(broker, "several", 2)
    t = Txn(client, "several")
    for partition in (0, 1):
        Txn(client, "several", partition).produce(batch([b"p%d" % partition], 3000, 0, 0, True), "tid-3")
    r = client.call(ApiKey.WRITE_TXN_MARKERS, 1, markers=[WM.WritableTxnMarker(
        producer_id=3000, producer_epoch=0, transaction_result=True, coordinator_epoch=0,
        topics=[WM.WritableTxnMarkerTopic(name="several", partition_indexes=[0, 1, 7])])])
    assert [(p.partition_index, p.error_code) for p in r.markers[0].topics[0].partitions] == [
        (0, E.NONE), (1, E.NONE), (7, E.UNKNOWN_TOPIC_OR_PARTITION)]
    assert t.fetch(0).last_stable_offset == 2


def _transactions(t: Txn) -> None:
    """committed c0 c1, aborted a0 a1 (interleaved with a plain record), committed c2."""
    assert t.produce(batch([b"c0", b"c1"], 10, 0, 0, True), "t10")[0] == E.NONE
    assert t.produce(batch([b"a0"], 11, 0, 0, True), "t11")[0] == E.NONE
    assert t.produce(batch([b"plain"]))[0] == E.NONE
    assert t.produce(batch([b"a1"], 11, 0, 1, True), "t11")[0] == E.NONE
    assert t.marker(10, 0, commit=True) == E.NONE
    assert t.marker(11, 0, commit=False) == E.NONE
    assert t.produce(batch([b"c2"], 10, 0, 2, True), "t10")[0] == E.NONE
    assert t.marker(10, 0, commit=True) == E.NONE


COMMITTED = [b"c0", b"c1", b"plain", b"c2"]


def _kafka_python_values(bootstrap: str, topic: str, isolation: str) -> list[bytes]:
    from kafka import KafkaConsumer

    consumer = KafkaConsumer(topic, bootstrap_servers=bootstrap, group_id=None, auto_offset_reset="earliest",
                             isolation_level=isolation, consumer_timeout_ms=3000)
    values = [m.value for m in consumer]
    consumer.close()
    return values


def _confluent_values(bootstrap: str, topic: str, expected: int) -> list[bytes]:
    from confluent_kafka import Consumer

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "rc-" + topic, "auto.offset.reset": "earliest",
                         "isolation.level": "read_committed", "enable.auto.commit": False})
    consumer.subscribe([topic])
    values, deadline = [], time.monotonic() + 20
    while time.monotonic() < deadline and len(values) < expected:
        m = consumer.poll(0.5)
        if m is not None and m.error() is None:
            values.append(m.value())
    extra = consumer.poll(1.0)  # nothing more is delivered
    consumer.close()
    assert extra is None or extra.error() is not None
    return values


def test_real_read_committed_consumers_see_only_committed_records(broker, client):
    create_topic(broker, "mixed")
    t = Txn(client, "mixed")
    _transactions(t)
    # The list covers the batches sent: one batch (min one) ends before the aborted data.
    assert aborted(t.fetch(0, max_bytes=1)) == [] and len(fetched_values(t.fetch(0, max_bytes=1))) == 2
    assert aborted(t.fetch(0)) == [(11, 2)] and aborted(t.fetch(2, max_bytes=1)) == [(11, 2)]
    assert _kafka_python_values(broker.bootstrap, "mixed", "read_committed") == COMMITTED
    assert len(_kafka_python_values(broker.bootstrap, "mixed", "read_uncommitted")) == 6
    assert _confluent_values(broker.bootstrap, "mixed", len(COMMITTED)) == COMMITTED


def test_open_transaction_and_aborted_index_survive_kill_minus_nine(tmp_path):
    data = tmp_path / "data"
    first = BrokerProcess(data, **UNVERIFIED).start()
    try:
        port = int(first.bootstrap.rsplit(":", 1)[1])
        with WireClient(port) as c:
            c.call(ApiKey.CREATE_TOPICS, 4, topics=[module("CreateTopicsRequest").CreatableTopic(
                name="durable-txn", num_partitions=1, replication_factor=1)], timeout_ms=10_000)
            t = Txn(c, "durable-txn")
            _transactions(t)
            assert t.produce(batch([b"open"], 12, 0, 0, True), "t12")[0] == E.NONE  # left open: offset 9
            assert t.fetch(0).last_stable_offset == 9
    finally:
        first.kill()
    for path in glob.glob(str(data / "**" / "*.txnindex"), recursive=True):
        os.unlink(path)  # the replay of the log after the unclean stop puts the entries back
    with BrokerProcess(data, **UNVERIFIED) as second:
        port = int(second.bootstrap.rsplit(":", 1)[1])
        with WireClient(port) as c:
            t = Txn(c, "durable-txn")
            p = t.fetch(0)
            assert (p.high_watermark, p.last_stable_offset) == (10, 9)
            assert aborted(p) == [(11, 2)]
            assert t.producers().active_producers[-1].current_txn_start_offset == 9
            assert _kafka_python_values(second.bootstrap, "durable-txn", "read_committed") == COMMITTED
            assert t.marker(12, 0, commit=True) == E.NONE
            assert _kafka_python_values(second.bootstrap, "durable-txn", "read_committed") == COMMITTED + [b"open"]
