"""AddPartitionsToTxn v4+ (KIP-890 part 1), the brokers' form, on the wire against a real
broker: each ``Transactions`` entry answered on its own; ``VerifyOnly`` entries per partition
(in the transaction, not added, fenced, unknown producer id); entries without it add the
partitions as v3 does; unknown partitions and empty ids; CLUSTER_ACTION required when an
authorizer is on. With v4-v5 advertised, every client library's transactional producer still
asks at v3 or below (v4+ is for brokers)."""

from __future__ import annotations

import asyncio

import pytest

from odradek.client import Producer as OdradekProducer
from odradek.protocol.generated import ApiKey
from odradek.protocol.generated.error_codes import ErrorCode as E
from odradek.server.handlers import HANDLERS
from odradek.testing.broker import InProcessBroker
from tests.server.group_wire import WireClient
from tests.server.test_txn_coordinator_protocol import APT, add, end, started
from tests.server.test_write_txn_markers import create_topic

TOPIC = "verify-only"


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    with InProcessBroker(tmp_path_factory.mktemp("apt-v4") / "data") as b:
        create_topic(b, TOPIC, 3)
        yield b


@pytest.fixture
def c(broker):
    with WireClient(broker.port) as client:
        yield client


def entry(tid, pid, epoch, partitions, verify_only=True, topic=TOPIC):
    return APT.AddPartitionsToTxnTransaction(transactional_id=tid, producer_id=pid, producer_epoch=epoch,
                                             verify_only=verify_only,
                                             topics=[APT.AddPartitionsToTxnTopic(name=topic, partitions=partitions)])


def verify(c, *entries, version=5):
    """The response's top-level error and, per transactional id, each partition's error."""
    r = c.call(ApiKey.ADD_PARTITIONS_TO_TXN, version, transactions=list(entries))
    return r.error_code, {t.transactional_id: {(x.name, p.partition_index): p.partition_error_code
                                               for x in t.topic_results for p in x.results_by_partition}
                          for t in r.results_by_transaction}


@pytest.mark.parametrize("version", [4, 5])
def test_verify_only_answers_each_partition(c, version):
    t, pid, epoch = started(c)
    assert add(c, t, pid, epoch, [(TOPIC, 0)]) == {(TOPIC, 0): E.NONE}
    not_added = E.TRANSACTION_ABORTABLE if version >= 5 else E.INVALID_TXN_STATE
    assert verify(c, entry(t, pid, epoch, [0, 1]), version=version) == (
        E.NONE, {t: {(TOPIC, 0): E.NONE, (TOPIC, 1): not_added}})
    assert end(c, t, pid, epoch, False) == E.NONE


def test_fenced_and_unknown_producers_in_one_request(c):
    t, pid, epoch = started(c)
    u, upid, uepoch = started(c)
    assert add(c, t, pid, epoch, [(TOPIC, 0)]) == {(TOPIC, 0): E.NONE}
    error, answers = verify(c, entry(t, pid, epoch + 1, [0, 2]), entry(u, upid + 1000, uepoch, [1]))
    assert error == E.NONE
    assert answers == {t: {(TOPIC, 0): E.PRODUCER_FENCED, (TOPIC, 2): E.PRODUCER_FENCED},
                       u: {(TOPIC, 1): E.INVALID_PRODUCER_ID_MAPPING}}
    assert end(c, t, pid, epoch, False) == E.NONE


def test_an_entry_without_verify_only_adds_the_partitions(c):
    t, pid, epoch = started(c)
    assert verify(c, entry(t, pid, epoch, [2], verify_only=False)) == (E.NONE, {t: {(TOPIC, 2): E.NONE}})
    assert verify(c, entry(t, pid, epoch, [2])) == (E.NONE, {t: {(TOPIC, 2): E.NONE}})
    assert end(c, t, pid, epoch, False) == E.NONE


def test_unknown_partitions_and_empty_ids(c):
    t, pid, epoch = started(c)
    unknown = APT.AddPartitionsToTxnTransaction(
        transactional_id=t, producer_id=pid, producer_epoch=epoch, verify_only=True,
        topics=[APT.AddPartitionsToTxnTopic(name=TOPIC, partitions=[0, 7]),
                APT.AddPartitionsToTxnTopic(name="no-such-topic", partitions=[0])])
    assert verify(c, unknown, entry("", pid, epoch, [1])) == (E.NONE, {
        t: {(TOPIC, 0): E.OPERATION_NOT_ATTEMPTED, (TOPIC, 7): E.UNKNOWN_TOPIC_OR_PARTITION,
            ("no-such-topic", 0): E.UNKNOWN_TOPIC_OR_PARTITION},
        "": {(TOPIC, 1): E.INVALID_REQUEST}})


def test_cluster_action_is_required_with_an_authorizer(tmp_path):
    with InProcessBroker(tmp_path / "data", authorizer_class_name="kafka.security.authorizer.AclAuthorizer") as b:
        with WireClient(b.port) as c:
            r = c.call(ApiKey.ADD_PARTITIONS_TO_TXN, 5, transactions=[entry("t", 1, 0, [0])])
            assert (r.error_code, r.results_by_transaction) == (E.CLUSTER_AUTHORIZATION_FAILED, [])
            # the clients' versions are still checked against the transactional id's ACLs
            assert add(c, "t", 1, 0, [(TOPIC, 0)]) == {(TOPIC, 0): E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED}


def test_client_libraries_ask_at_the_client_versions(broker, monkeypatch):
    """confluent-kafka (librdkafka), kafka-python, aiokafka and odradek's own producer each
    commit a transaction; every AddPartitionsToTxn they sent was v0-v3."""
    from aiokafka import AIOKafkaProducer
    from confluent_kafka import Producer as ConfluentProducer
    from kafka import KafkaProducer

    versions: dict[str, set[int]] = {}
    handle = HANDLERS[ApiKey.ADD_PARTITIONS_TO_TXN]

    def recorded(ctx, request):
        versions.setdefault(ctx.client_id or "", set()).add(ctx.api_version)
        return handle(ctx, request)
    monkeypatch.setitem(HANDLERS, ApiKey.ADD_PARTITIONS_TO_TXN, recorded)

    confluent = ConfluentProducer({"bootstrap.servers": broker.bootstrap, "transactional.id": "v-ck",
                                   "client.id": "librdkafka"})
    confluent.init_transactions(30)
    confluent.begin_transaction()
    confluent.produce(TOPIC, b"ck", partition=0)
    confluent.commit_transaction(30)

    kp = KafkaProducer(bootstrap_servers=broker.bootstrap, transactional_id="v-kp", client_id="kafka-python")
    kp.init_transactions()
    kp.begin_transaction()
    kp.send(TOPIC, b"kp", partition=0)
    kp.commit_transaction()
    kp.close()

    async def aiokafka() -> None:
        producer = AIOKafkaProducer(bootstrap_servers=broker.bootstrap, transactional_id="v-aio", client_id="aiokafka")
        await producer.start()
        try:
            async with producer.transaction():
                await producer.send_and_wait(TOPIC, b"aio", partition=0)
        finally:
            await producer.stop()
    asyncio.run(aiokafka())

    with OdradekProducer(broker.bootstrap, transactional_id="v-odradek", client_id="odradek") as producer:
        producer.init_transactions()
        producer.begin_transaction()
        producer.send(TOPIC, b"odradek", partition=0)
        producer.commit_transaction()

    assert set(versions) == {"librdkafka", "kafka-python", "aiokafka", "odradek"}
    assert all(v <= {0, 1, 2, 3} for v in versions.values()), versions
