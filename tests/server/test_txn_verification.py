"""Transaction verification (KIP-890 part 1) on the wire, with raw requests against a real
broker: the first transactional batch of a partition is appended only once the coordinator
has the partition in the transaction; a batch pipelined right behind its AddPartitionsToTxn
on the same connection waits for it; an AddPartitionsToTxn right behind EndTxn waits for the
markers instead of answering CONCURRENT_TRANSACTIONS; refusals leave no open transaction
behind (the last stable offset moves on). odradek's features in ApiVersions go to odradek's
own client only."""

from __future__ import annotations

import pytest

from odradek.client import Consumer, TopicPartition
from odradek.protocol.features import CLIENT_SOFTWARE_NAME, TRANSACTION_VERIFICATION
from odradek.protocol.generated import ApiKey
from odradek.protocol.generated.error_codes import ErrorCode as E
from odradek.testing.broker import InProcessBroker
from tests.server.clients import wait_until
from tests.server.group_wire import WireClient
from tests.server.test_txn_coordinator_protocol import APT, add, end, started
from tests.server.test_write_txn_markers import PR, Txn, batch, create_topic, fetched_values

pytestmark = pytest.mark.timeout(120)
TOPIC = "verified"


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    with InProcessBroker(tmp_path_factory.mktemp("txn-verify") / "data") as b:
        create_topic(b, TOPIC, 2)
        yield b


@pytest.fixture
def c(broker):
    with WireClient(broker.port) as client:
        yield client


def produce_request(transactional_id, records, partition=0) -> dict:
    return dict(transactional_id=transactional_id, acks=-1, timeout_ms=5000, topic_data=[PR.TopicProduceData(
        name=TOPIC, partition_data=[PR.PartitionProduceData(index=partition, records=records)])])


def produce_error(response) -> E:
    return response.responses[0].partition_responses[0].error_code


def stable(c, partition: int) -> bool:
    """No transaction holds the partition's last stable offset back."""
    t = Txn(c, TOPIC, partition)
    return t.latest(isolation=1) == t.latest(isolation=0)


def test_a_batch_pipelined_behind_its_add_partitions_is_appended(c):
    t, pid, epoch = started(c)
    add_id = c.send(ApiKey.ADD_PARTITIONS_TO_TXN, 3, v3_and_below_transactional_id=t, v3_and_below_producer_id=pid,
                    v3_and_below_producer_epoch=epoch, v3_and_below_topics=[
                        APT.AddPartitionsToTxnTopic(name=TOPIC, partitions=[0])])
    produce_id = c.send(ApiKey.PRODUCE, 8, **produce_request(t, batch([b"p0", b"p1"], pid, epoch, 0, True)))
    assert produce_id == add_id + 1  # on the wire back to back, before any answer
    added = c.receive(ApiKey.ADD_PARTITIONS_TO_TXN, 3)
    assert added.results_by_topic_v3_and_below[0].results_by_partition[0].partition_error_code == E.NONE
    assert produce_error(c.receive(ApiKey.PRODUCE, 8)) == E.NONE
    assert not stable(c, 0)  # the transaction is open there
    assert end(c, t, pid, epoch, True) == E.NONE
    wait_until(lambda: stable(c, 0), 10, what="the commit marker")
    start = Txn(c, TOPIC, 0).latest(isolation=0) - 3  # the two records and the commit marker
    assert fetched_values(Txn(c, TOPIC, 0).fetch(start, isolation=1)) == [b"p0", b"p1"]


def test_a_partition_never_added_is_refused_and_left_without_an_open_transaction(c):
    t, pid, epoch = started(c)
    assert add(c, t, pid, epoch, [(TOPIC, 0)]) == {(TOPIC, 0): E.NONE}
    r = c.call(ApiKey.PRODUCE, 8, **produce_request(t, batch([b"stray"], pid, epoch, 0, True), partition=1))
    p = r.responses[0].partition_responses[0]
    assert p.error_code == E.INVALID_TXN_STATE
    assert "not added" in p.error_message
    assert stable(c, 1)  # nothing appended: no hanging transaction
    assert end(c, t, pid, epoch, False) == E.NONE


def test_refusals_a_producer_understands(c):
    t, pid, epoch = started(c)
    assert add(c, t, pid, epoch, [(TOPIC, 0)]) == {(TOPIC, 0): E.NONE}
    produce = lambda tid, p, e: produce_error(c.call(ApiKey.PRODUCE, 8, **produce_request(  # noqa: E731
        tid, batch([b"x"], p, e, 0, True), partition=1)))
    assert produce(None, pid, epoch) == E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    assert produce(t, pid + 1000, 0) == E.INVALID_PRODUCER_ID_MAPPING
    assert produce(t, pid, epoch - 1 if epoch else epoch + 1) == E.INVALID_PRODUCER_EPOCH
    assert stable(c, 1)
    assert end(c, t, pid, epoch, False) == E.NONE


def send_add(c, t, pid, epoch, partition=0) -> None:
    c.send(ApiKey.ADD_PARTITIONS_TO_TXN, 3, v3_and_below_transactional_id=t, v3_and_below_producer_id=pid,
           v3_and_below_producer_epoch=epoch,
           v3_and_below_topics=[APT.AddPartitionsToTxnTopic(name=TOPIC, partitions=[partition])])


def received_add(c) -> E:
    return c.receive(ApiKey.ADD_PARTITIONS_TO_TXN, 3).results_by_topic_v3_and_below[0].results_by_partition[0] \
        .partition_error_code


@pytest.fixture
def slow_markers(broker, monkeypatch):
    """Markers written ``delay[0]`` seconds late: the transaction stays in PrepareCommit."""
    import asyncio

    channel = broker.broker.txn_coordinator.markers
    write = channel.write_markers
    delay = [0.3]

    async def late(*args, **kwargs):
        await asyncio.sleep(delay[0])
        return await write(*args, **kwargs)
    monkeypatch.setattr(channel, "write_markers", late)
    return delay


def test_an_add_and_its_batch_while_the_previous_commit_completes_wait_for_it(c, slow_markers):
    t, pid, epoch = started(c)
    assert add(c, t, pid, epoch, [(TOPIC, 0)]) == {(TOPIC, 0): E.NONE}
    assert Txn(c, TOPIC, 0).produce(batch([b"first"], pid, epoch, 0, True), t)[0] == E.NONE
    assert end(c, t, pid, epoch, True) == E.NONE  # answered; its markers are 0.3 s away
    send_add(c, t, pid, epoch)
    c.send(ApiKey.PRODUCE, 8, **produce_request(t, batch([b"second"], pid, epoch, 1, True)))
    assert received_add(c) == E.NONE  # not CONCURRENT_TRANSACTIONS: it waited for the markers
    assert produce_error(c.receive(ApiKey.PRODUCE, 8)) == E.NONE
    assert end(c, t, pid, epoch, True) == E.NONE


def committed_values(broker, start: int) -> list[bytes]:
    """What a read_committed consumer (odradek's) reads of partition 0 from ``start``."""
    tp = TopicPartition(TOPIC, 0)
    with Consumer(broker.bootstrap, isolation_level="read_committed") as consumer:
        consumer.assign([tp])
        consumer.seek(tp, start)
        end = consumer.end_offsets([tp])[tp]
        out = []
        while consumer.position(tp) < end:
            out.extend(r.value for records in consumer.poll(500).values() for r in records)
        return out


def test_a_batch_of_the_next_transaction_never_joins_the_one_being_committed(broker, c, slow_markers):
    t, pid, epoch = started(c)
    start = Txn(c, TOPIC, 0).latest(isolation=0)
    assert add(c, t, pid, epoch, [(TOPIC, 0)]) == {(TOPIC, 0): E.NONE}
    assert Txn(c, TOPIC, 0).produce(batch([b"committed"], pid, epoch, 0, True), t)[0] == E.NONE
    assert end(c, t, pid, epoch, True) == E.NONE  # its marker is 0.3 s away
    send_add(c, t, pid, epoch)
    c.send(ApiKey.PRODUCE, 8, **produce_request(t, batch([b"aborted"], pid, epoch, 1, True)))
    assert received_add(c) == E.NONE
    assert produce_error(c.receive(ApiKey.PRODUCE, 8)) == E.NONE
    assert end(c, t, pid, epoch, False) == E.NONE
    wait_until(lambda: stable(c, 0), 10, what="both markers")
    assert committed_values(broker, start) == [b"committed"]


def test_an_add_waits_for_the_previous_commit_only_so_long(c, slow_markers):
    slow_markers[0] = 2.0  # longer than the coordinator waits (SETTLE_WAIT_S)
    t, pid, epoch = started(c)
    assert add(c, t, pid, epoch, [(TOPIC, 1)]) == {(TOPIC, 1): E.NONE}
    assert end(c, t, pid, epoch, False) == E.NONE
    send_add(c, t, pid, epoch, partition=1)
    c.send(ApiKey.PRODUCE, 8, **produce_request(t, batch([b"early"], pid, epoch, 0, True), partition=1))
    assert received_add(c) == E.CONCURRENT_TRANSACTIONS
    assert produce_error(c.receive(ApiKey.PRODUCE, 8)) == E.NOT_ENOUGH_REPLICAS  # retriable for every client
    assert stable(c, 1)


@pytest.mark.parametrize("software,listed", [(CLIENT_SOFTWARE_NAME, True), ("apache-kafka-java", False)])
def test_odradek_features_are_listed_to_odradek_clients_only(c, software, listed):
    r = c.call(ApiKey.API_VERSIONS, 3, client_software_name=software, client_software_version="1.0")
    features = {f.name: (f.min_version, f.max_version) for f in r.supported_features}
    assert features == ({TRANSACTION_VERIFICATION: (1, 1), "group.version": (0, 1), "share.version": (0, 1)}
                        if listed else {})
    assert [(f.name, f.max_version_level) for f in r.finalized_features] == (
        [("group.version", 1), ("share.version", 1)] if listed else [])


def test_verification_switched_off_appends_unverified_and_is_not_listed(tmp_path):
    """``transaction.partition.verification.enable=false``: as before KIP-890."""
    with InProcessBroker(tmp_path / "data", transaction_partition_verification_enable="false") as b:
        create_topic(b, TOPIC, 1)
        with WireClient(b.port) as c:
            r = c.call(ApiKey.API_VERSIONS, 3, client_software_name=CLIENT_SOFTWARE_NAME, client_software_version="1")
            assert [f.name for f in r.supported_features] == ["group.version", "share.version"]  # not verification
            t, pid, epoch = started(c)
            r = c.call(ApiKey.PRODUCE, 8, **produce_request(t, batch([b"unverified"], pid, epoch, 0, True)))
            assert produce_error(r) == E.NONE
            assert not stable(c, 0)  # the transaction the coordinator never heard of is open here
