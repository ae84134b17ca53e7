"""Transaction verification (KIP-890 part 1) when the transaction's coordinator and the
partition's leader are different brokers: the leader asks the coordinator's broker with
AddPartitionsToTxn v4+ ``VerifyOnly`` over the inter-broker listener.

Two brokers, secured as in production: the inter-broker listener ``INTERNAL`` is TLS with
client certificates required, the brokers' certificate names their super user, and
CLUSTER_ACTION is denied to everyone else (the clients are User:ANONYMOUS on PLAINTEXT, where
AddPartitionsToTxn v4+ is refused), so a verification only succeeds when sent as the broker
over ``INTERNAL``. ``__transaction_state`` has one partition, so one broker coordinates every
transactional id, and the topic's partitions are led by the other. A transactional batch
sent straight at the leader for a partition never added is refused (INVALID_TXN_STATE), one
with a stale epoch too (INVALID_PRODUCER_EPOCH), and neither leaves a transaction open there;
once added, the batch is appended. Then confluent-kafka's transactional producer commits one
transaction and aborts another through the same two brokers, and read_committed readers
(librdkafka's, kafka-python's) see exactly the committed records.
"""

from __future__ import annotations

import time

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AclBinding, AclOperation, AclPermissionType, ResourcePatternType, ResourceType

from odradek.client import AdminClient, NewTopic
from odradek.protocol.generated import ApiKey
from odradek.protocol.generated.error_codes import ErrorCode as E
from odradek.records.builder import BatchSpec, build_batch
from odradek.records.record import Record
from tests.server.cluster.cluster_clients import admin as confluent_admin
from tests.server.cluster.harness import wait_until
from tests.server.group_wire import WireClient
from tests.server.security_fixtures import add_internal_listeners
from tests.server.test_add_partitions_to_txn_verify_only import entry
from tests.server.test_txn_coordinator_protocol import add, end, init
from tests.server.test_write_txn_markers import Txn
from tests.server.tls_certs import make_pki
from tests.server.txn_clients import confluent_values, kafka_python_values, values_only

pytestmark = pytest.mark.timeout(180)

BROKERS = [1, 2]
TOPIC = "verified-elsewhere"
TXN_STATE = "__transaction_state"
PROPS = {"transaction.state.log.num.partitions": "1", "transaction.state.log.replication.factor": "1",
         "transaction.state.log.min.isr": "1", "offsets.topic.replication.factor": "1"}
BROKER_PRINCIPAL = "User:CN=localhost,O=Odradek Tests,C=US"  # tls_certs.make_pki's server certificate


def batch(values, pid: int, epoch: int) -> bytes:
    """A transactional batch of ``values`` stamped now (an old timestamp would let the
    retention check delete its segment once rolled), sequence 0."""
    now = int(time.time() * 1000)
    records = [Record(offset=i, timestamp=now, key=None, value=v, headers=()) for i, v in enumerate(values)]
    return build_batch(records, BatchSpec(producer_id=pid, producer_epoch=epoch, base_sequence=0,
                                          is_transactional=True))


def produce_when_known(txn: Txn, records: bytes, tid: str) -> E:
    """Produce, again while the broker answers NOT_LEADER_OR_FOLLOWER or NOT_ENOUGH_REPLICAS
    (its LeaderAndIsr, or its metadata naming the coordinator, may not be there yet: a
    producer would retry)."""
    answer = []

    def answered() -> bool:
        answer[:] = [txn.produce(records, tid)[0]]
        return answer[0] not in (E.NOT_LEADER_OR_FOLLOWER, E.NOT_ENOUGH_REPLICAS)
    wait_until(answered, 20, "an answer from the partition's leader", interval=0.2)
    return answer[0]


def secured(pki: dict[str, str]) -> dict[str, str]:
    return {**PROPS, "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,INTERNAL:SSL",
            "inter.broker.listener.name": "INTERNAL", "listener.name.internal.ssl.client.auth": "required",
            "ssl.keystore.type": "PEM", "ssl.keystore.location": pki["server"],
            "ssl.truststore.type": "PEM", "ssl.truststore.location": pki["ca"],
            "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
            "super.users": BROKER_PRINCIPAL, "allow.everyone.if.no.acl.found": "true"}


def deny_cluster_action(cluster) -> None:
    """Deny CLUSTER_ACTION to User:ANONYMOUS, and wait until both brokers refuse it
    AddPartitionsToTxn v5 on PLAINTEXT."""
    deny = AclBinding(ResourceType.BROKER, "kafka-cluster", ResourcePatternType.LITERAL, "User:ANONYMOUS", "*",
                      AclOperation.CLUSTER_ACTION, AclPermissionType.DENY)
    client = confluent_admin(cluster.bootstrap)
    for future in client.create_acls([deny]).values():
        future.result(20)

    def refused(broker_id: int) -> bool:
        with WireClient(cluster[broker_id].port) as c:
            r = c.call(ApiKey.ADD_PARTITIONS_TO_TXN, 5, transactions=[entry("t", 0, 0, [0], topic=TOPIC)])
        return r.error_code == E.CLUSTER_AUTHORIZATION_FAILED
    for broker_id in BROKERS:
        wait_until(lambda: refused(broker_id), 20, f"broker {broker_id} to deny CLUSTER_ACTION")


def stable(txn: Txn) -> bool:
    return txn.latest(isolation=1) == txn.latest(isolation=0)


def test_a_leader_verifies_with_the_coordinator_on_another_broker(make_cluster, tmp_path):
    cluster = make_cluster(secured(make_pki(tmp_path / "pki")))
    add_internal_listeners(cluster, BROKERS)
    cluster.start(BROKERS)
    tid = "verified-elsewhere-raw"
    with WireClient(cluster[1].port) as c:
        c.call(ApiKey.FIND_COORDINATOR, 3, key=tid, key_type=1)  # creates __transaction_state
    cluster.wait_topic_ready(TXN_STATE, 1)
    coordinator = cluster.leader(TXN_STATE, 0)
    leader = next(b for b in BROKERS if b != coordinator)
    with AdminClient(cluster.bootstrap) as admin:
        admin.create_topics([NewTopic(TOPIC, replica_assignment={0: [leader], 1: [leader]})])
    cluster.wait_topic_ready(TOPIC, 2)
    deny_cluster_action(cluster)

    with WireClient(cluster[coordinator].port) as coord, WireClient(cluster[leader].port) as lead:
        init(coord, tid)
        r = init(coord, tid)  # a second epoch: the first is now stale
        assert r.error_code == E.NONE and r.producer_epoch > 0, r
        pid, epoch = r.producer_id, r.producer_epoch
        p0, p1 = Txn(lead, TOPIC, 0), Txn(lead, TOPIC, 1)
        assert produce_when_known(p0, batch([b"stray"], pid, epoch), tid) == E.INVALID_TXN_STATE
        assert add(coord, tid, pid, epoch, [(TOPIC, 0)]) == {(TOPIC, 0): E.NONE}
        assert p1.produce(batch([b"never added"], pid, epoch), tid)[0] == E.INVALID_TXN_STATE
        assert p0.produce(batch([b"stale"], pid, epoch - 1), tid)[0] == E.INVALID_PRODUCER_EPOCH
        assert stable(p0) and stable(p1)  # nothing appended: no hanging transaction
        assert p0.produce(batch([b"raw-0", b"raw-1"], pid, epoch), tid)[0] == E.NONE
        assert not stable(p0)
        assert end(coord, tid, pid, epoch, True) == E.NONE
        wait_until(lambda: stable(p0), 20, "the commit marker")

    producer = Producer({"bootstrap.servers": cluster.bootstrap, "transactional.id": "verified-elsewhere-ck",
                         "acks": "all"})
    producer.init_transactions(60)
    committed = []
    for n, commit in ((0, True), (1, False), (2, True)):
        producer.begin_transaction()
        values = [b"ck-%d-%d" % (n, i) for i in range(6)]
        for i, value in enumerate(values):
            producer.produce(TOPIC, value=value, partition=i % 2)
        assert producer.flush(30) == 0
        if commit:
            producer.commit_transaction(60)
            committed += values
        else:
            producer.abort_transaction(60)

    expected = sorted(committed + [b"raw-0", b"raw-1"])
    assert values_only(confluent_values(cluster.bootstrap, TOPIC, 2)) == expected
    assert values_only(kafka_python_values(cluster.bootstrap, TOPIC, 2)) == expected
