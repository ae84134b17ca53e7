"""AddPartitionsToTxn v4+ (KIP-890 part 1), the brokers' form, on the wire against a real
broker: each ``Transactions`` entry answered on its own; ``VerifyOnly`` entries per partition
(in the transaction, not added, fenced, unknown producer id); entries without it add the
partitions as v3 does; unknown partitions and empty ids; CLUSTER_ACTION required when an
authorizer is on."""

from __future__ import annotations

import pytest

from odradek.protocol.generated import ApiKey
from odradek.protocol.generated.error_codes import ErrorCode as E
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
