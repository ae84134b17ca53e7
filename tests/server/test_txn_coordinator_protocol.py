"""The transaction coordinator's APIs on the wire, every version, against a real broker (raw
requests, no client library): FindCoordinator key type 1, InitProducerId with a
transactional id, AddPartitionsToTxn, AddOffsetsToTxn, EndTxn, DescribeTransactions,
ListTransactions; markers reaching the partitions; fencing; timeouts; expiration."""

from __future__ import annotations

import itertools

import pytest

from odradek.coordinator.partitioner import partition_for
from odradek.protocol.api_keys import SUPPORTED
from odradek.protocol.generated import ApiKey
from odradek.protocol.generated.error_codes import ErrorCode as E
from odradek.records.reader import iter_batches
from odradek.testing.broker import InProcessBroker
from tests.server.clients import wait_until
from tests.server.group_wire import WireClient, module

APT = module("AddPartitionsToTxnRequest")
TOPIC = "txn-wire"
TXN_STATE = "__transaction_state"
_ids = itertools.count()


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    with InProcessBroker(tmp_path_factory.mktemp("txnwire") / "data",
                         transaction_abort_timed_out_transaction_cleanup_interval_ms=100) as b:
        b.call(lambda: b.broker.topics.create(b.broker.topics.plan_topic(TOPIC, 3, 1, None, {})))
        yield b


@pytest.fixture
def c(broker):
    with WireClient(broker.port) as client:
        yield client


def tid(prefix="tid"):
    return f"{prefix}-{next(_ids)}"


def find(c, key, version=3):
    if version >= 4:
        r = c.call(ApiKey.FIND_COORDINATOR, version, key_type=1, coordinator_keys=[key]).coordinators[0]
    else:
        r = c.call(ApiKey.FIND_COORDINATOR, version, key=key, key_type=1)
    return r


def init(c, transactional_id, version=4, timeout_ms=60_000, pid=-1, epoch=-1):
    for _ in range(200):
        r = c.call(ApiKey.INIT_PRODUCER_ID, version, transactional_id=transactional_id,
                   transaction_timeout_ms=timeout_ms, producer_id=pid, producer_epoch=epoch)
        if r.error_code not in (E.CONCURRENT_TRANSACTIONS, E.COORDINATOR_LOAD_IN_PROGRESS,
                                E.COORDINATOR_NOT_AVAILABLE, E.NOT_COORDINATOR):
            return r
        wait_until(lambda: True, 1, interval=0.05)
    return r


def add(c, transactional_id, pid, epoch, partitions, version=3):
    topics = {}
    for t, p in partitions:
        topics.setdefault(t, []).append(p)
    r = c.call(ApiKey.ADD_PARTITIONS_TO_TXN, version, v3_and_below_transactional_id=transactional_id,
               v3_and_below_producer_id=pid, v3_and_below_producer_epoch=epoch,
               v3_and_below_topics=[APT.AddPartitionsToTxnTopic(name=t, partitions=ps) for t, ps in topics.items()])
    return {(t.name, p.partition_index): p.partition_error_code for t in r.results_by_topic_v3_and_below
            for p in t.results_by_partition}


def end(c, transactional_id, pid, epoch, commit, version=3):
    return c.call(ApiKey.END_TXN, version, transactional_id=transactional_id, producer_id=pid,
                  producer_epoch=epoch, committed=commit).error_code


def describe(c, transactional_id):
    return c.call(ApiKey.DESCRIBE_TRANSACTIONS, 0, transactional_ids=[transactional_id]).transaction_states[0]


def wait_state(c, transactional_id, state):
    wait_until(lambda: describe(c, transactional_id).transaction_state == state, 20,
               what=f"{transactional_id} to be {state}")
    return describe(c, transactional_id)


def control_batches(broker, topic, partition):
    def read():
        plog = broker.broker.replica_manager.get(topic, partition).log
        data = plog.read(0, 1 << 20, max_offset=plog.log_end_offset, min_one=True).read()
        return [(b.producer_id, b.base_offset) for b in iter_batches(data) if b.is_control]
    return broker.call(read)


def started(c, version=4):
    t = tid()
    r = init(c, t, version)
    assert r.error_code == E.NONE, r
    return t, r.producer_id, r.producer_epoch


# --- FindCoordinator ----------------------------------------------------------------------------
def test_find_coordinator_key_type_1_every_version_creates_the_transaction_state_topic(c, broker):
    for v in range(1, 7):
        r = find(c, f"fc-{v}", v)
        assert (r.error_code, r.node_id, r.port) == (E.NONE, 1, broker.port)
    image = broker.broker.metadata_image()
    assert len(image.topic(TXN_STATE).partitions) == 4
    config = image.topic_config(TXN_STATE)
    assert config["cleanup.policy"] == "compact"
    assert config["min.insync.replicas"] == "1"  # transaction.state.log.min.isr capped at the one broker
    assert config["segment.bytes"] == "104857600"


def test_api_versions_advertise_the_client_ranges(c):
    assert SUPPORTED[ApiKey.ADD_PARTITIONS_TO_TXN] == (0, 5)  # v4+ from brokers only (KIP-890)
    assert SUPPORTED[ApiKey.END_TXN] == (0, 4)
    assert SUPPORTED[ApiKey.INIT_PRODUCER_ID] == (0, 5)
    assert SUPPORTED[ApiKey.ADD_OFFSETS_TO_TXN] == (0, 4)
    assert SUPPORTED[ApiKey.DESCRIBE_TRANSACTIONS] == (0, 0)
    assert SUPPORTED[ApiKey.LIST_TRANSACTIONS] == (0, 1)


# --- InitProducerId -----------------------------------------------------------------------------
@pytest.mark.parametrize("version", range(6))
def test_init_producer_id_every_version_bumps_the_epoch(c, version):
    t = tid()
    first = init(c, t, version)
    assert (first.error_code, first.producer_epoch) == (E.NONE, 0)
    second = init(c, t, version)
    assert (second.error_code, second.producer_id, second.producer_epoch) == (E.NONE, first.producer_id, 1)


def test_init_producer_id_refusals(c):
    assert init(c, "", 4).error_code == E.INVALID_REQUEST
    assert init(c, tid(), 4, timeout_ms=0).error_code == E.INVALID_TRANSACTION_TIMEOUT
    assert init(c, tid(), 4, timeout_ms=900_001).error_code == E.INVALID_TRANSACTION_TIMEOUT
    assert init(c, tid(), 4, pid=5, epoch=-1).error_code == E.INVALID_REQUEST
    # non-transactional producers are unchanged: a fresh id at epoch 0
    r = c.call(ApiKey.INIT_PRODUCER_ID, 4, transactional_id=None, transaction_timeout_ms=0)
    assert (r.error_code, r.producer_epoch) == (E.NONE, 0) and r.producer_id >= 0


def test_init_producer_id_kip_360_recovery_and_fencing_errors_per_version(c):
    t, pid, epoch = started(c)
    r = init(c, t, 3, pid=pid, epoch=epoch)  # recovers: the next epoch
    assert (r.error_code, r.producer_id, r.producer_epoch) == (E.NONE, pid, epoch + 1)
    assert init(c, t, 3, pid=pid, epoch=epoch).producer_epoch == epoch + 1  # a retry: the same answer
    assert init(c, t, 4, pid=pid + 1000, epoch=0).error_code == E.PRODUCER_FENCED
    assert init(c, t, 3, pid=pid + 1000, epoch=0).error_code == E.INVALID_PRODUCER_EPOCH


# --- a whole transaction ------------------------------------------------------------------------
def test_commit_writes_markers_to_every_partition_and_completes(c, broker):
    t, pid, epoch = started(c)
    assert add(c, t, pid, epoch, [(TOPIC, 0), (TOPIC, 1)]) == {(TOPIC, 0): E.NONE, (TOPIC, 1): E.NONE}
    d = describe(c, t)
    assert (d.error_code, d.transaction_state, d.producer_id, d.producer_epoch) == (E.NONE, "Ongoing", pid, epoch)
    assert [(x.topic, sorted(x.partitions)) for x in d.topics] == [(TOPIC, [0, 1])]
    assert d.transaction_timeout_ms == 60_000 and d.transaction_start_time_ms > 0
    assert end(c, t, pid, epoch, True) == E.NONE
    d = wait_state(c, t, "CompleteCommit")
    assert d.topics == []
    for p in (0, 1):
        assert pid in [producer for producer, _ in control_batches(broker, TOPIC, p)]
    assert pid not in [producer for producer, _ in control_batches(broker, TOPIC, 2)]
    # a retried EndTxn of the same result once completed answers NONE; the other result is refused
    assert end(c, t, pid, epoch, True) == E.NONE
    assert end(c, t, pid, epoch, False) == E.INVALID_TXN_STATE
    # and the next transaction goes on with the same epoch
    assert add(c, t, pid, epoch, [(TOPIC, 2)]) == {(TOPIC, 2): E.NONE}
    assert end(c, t, pid, epoch, False) == E.NONE
    wait_state(c, t, "CompleteAbort")
    assert pid in [producer for producer, _ in control_batches(broker, TOPIC, 2)]


def test_add_offsets_adds_the_groups_offsets_partition(c):
    t, pid, epoch = started(c)
    for v in range(5):
        r = c.call(ApiKey.ADD_OFFSETS_TO_TXN, v, transactional_id=t, producer_id=pid, producer_epoch=epoch,
                   group_id="txn-group")
        assert r.error_code == E.NONE, v
    d = describe(c, t)
    assert [(x.topic, x.partitions) for x in d.topics] == [("__consumer_offsets", [partition_for("txn-group", 4)])]
    r = c.call(ApiKey.ADD_OFFSETS_TO_TXN, 1, transactional_id=t, producer_id=pid, producer_epoch=epoch + 5,
               group_id="txn-group")
    assert r.error_code == E.INVALID_PRODUCER_EPOCH
    r = c.call(ApiKey.ADD_OFFSETS_TO_TXN, 2, transactional_id=t, producer_id=pid, producer_epoch=epoch + 5,
               group_id="txn-group")
    assert r.error_code == E.PRODUCER_FENCED
    assert end(c, t, pid, epoch, True) == E.NONE
    wait_state(c, t, "CompleteCommit")


@pytest.mark.parametrize("version", range(4))
def test_add_partitions_errors_every_version(c, version):
    t, pid, epoch = started(c)
    assert add(c, t, pid, epoch, [(TOPIC, 0), ("no-such-topic", 0), (TOPIC, 7)], version) == {
        (TOPIC, 0): E.OPERATION_NOT_ATTEMPTED, ("no-such-topic", 0): E.UNKNOWN_TOPIC_OR_PARTITION,
        (TOPIC, 7): E.UNKNOWN_TOPIC_OR_PARTITION}
    fenced = E.INVALID_PRODUCER_EPOCH if version < 2 else E.PRODUCER_FENCED
    assert add(c, t, pid, epoch + 1, [(TOPIC, 0)], version) == {(TOPIC, 0): fenced}
    assert add(c, t, pid + 1000, epoch, [(TOPIC, 0)], version) == {(TOPIC, 0): E.INVALID_PRODUCER_ID_MAPPING}
    assert add(c, t, pid, epoch, [(TOPIC, 0)], version) == {(TOPIC, 0): E.NONE}


@pytest.mark.parametrize("version", range(5))
def test_end_txn_errors_every_version(c, version):
    t, pid, epoch = started(c)
    assert end(c, t, pid, epoch, True, version) == E.INVALID_TXN_STATE  # no transaction
    assert end(c, t, pid + 1000, epoch, True, version) == E.INVALID_PRODUCER_ID_MAPPING
    add(c, t, pid, epoch, [(TOPIC, 1)])
    fenced = E.INVALID_PRODUCER_EPOCH if version < 2 else E.PRODUCER_FENCED
    assert end(c, t, pid, epoch + 1, True, version) == fenced
    assert end(c, "", pid, epoch, True, version) == E.INVALID_REQUEST
    assert end(c, t, pid, epoch, False, version) == E.NONE
    wait_state(c, t, "CompleteAbort")


def test_a_new_producer_fences_an_ongoing_transaction(c, broker):
    t, pid, epoch = started(c)
    add(c, t, pid, epoch, [(TOPIC, 0)])
    r = c.call(ApiKey.INIT_PRODUCER_ID, 4, transactional_id=t, transaction_timeout_ms=60_000)
    assert r.error_code == E.CONCURRENT_TRANSACTIONS  # its transaction is being aborted
    assert end(c, t, pid, epoch, True) == E.PRODUCER_FENCED  # the old producer is fenced at once
    r = init(c, t)
    assert (r.error_code, r.producer_id, r.producer_epoch) == (E.NONE, pid, epoch + 2)
    d = describe(c, t)
    assert d.transaction_state == "Empty"
    assert pid in [producer for producer, _ in control_batches(broker, TOPIC, 0)]


def test_a_transaction_past_its_timeout_is_aborted_and_its_producer_fenced(c):
    t = tid()
    r = init(c, t, timeout_ms=300)
    pid, epoch = r.producer_id, r.producer_epoch
    add(c, t, pid, epoch, [(TOPIC, 2)])
    d = wait_state(c, t, "CompleteAbort")
    assert d.producer_epoch == epoch + 1
    assert end(c, t, pid, epoch, True) == E.PRODUCER_FENCED
    assert end(c, t, pid, epoch, True, 1) == E.INVALID_PRODUCER_EPOCH


# --- DescribeTransactions, ListTransactions -----------------------------------------------------
def test_describe_unknown_and_invalid_ids(c):
    d = describe(c, "never-seen-" + tid())
    assert d.error_code == E.TRANSACTIONAL_ID_NOT_FOUND
    assert describe(c, "").error_code == E.INVALID_REQUEST


def test_list_transactions_filters(c):
    t, pid, epoch = started(c)
    add(c, t, pid, epoch, [(TOPIC, 1)])
    r = c.call(ApiKey.LIST_TRANSACTIONS, 1, state_filters=["Ongoing", "Bogus"], producer_id_filters=[pid],
               duration_filter=-1)
    assert r.error_code == E.NONE and r.unknown_state_filters == ["Bogus"]
    assert [(s.transactional_id, s.producer_id, s.transaction_state) for s in r.transaction_states] == [
        (t, pid, "Ongoing")]
    r = c.call(ApiKey.LIST_TRANSACTIONS, 1, state_filters=[], producer_id_filters=[pid], duration_filter=3_600_000)
    assert r.transaction_states == []
    r = c.call(ApiKey.LIST_TRANSACTIONS, 0, state_filters=["CompleteCommit"], producer_id_filters=[pid])
    assert r.transaction_states == []
    r = c.call(ApiKey.LIST_TRANSACTIONS, 0, state_filters=[], producer_id_filters=[])
    assert t in {s.transactional_id for s in r.transaction_states}
    assert end(c, t, pid, epoch, False) == E.NONE
    wait_state(c, t, "CompleteAbort")


# --- expiration, restart --------------------------------------------------------------------------
def test_idle_transactional_ids_expire(tmp_path):
    with InProcessBroker(tmp_path / "data", transactional_id_expiration_ms=500,
                         transaction_remove_expired_transaction_cleanup_interval_ms=100) as b:
        with WireClient(b.port) as c:
            t = tid()
            assert init(c, t).error_code == E.NONE
            wait_until(lambda: describe(c, t).error_code == E.TRANSACTIONAL_ID_NOT_FOUND, 20,
                       what="the id to expire")
            r = init(c, t)  # a new producer id for the forgotten id
            assert (r.error_code, r.producer_epoch) == (E.NONE, 0)


def test_state_survives_a_restart(tmp_path):
    with InProcessBroker(tmp_path / "data") as b:
        b.call(lambda: b.broker.topics.create(b.broker.topics.plan_topic(TOPIC, 1, 1, None, {})))
        with WireClient(b.port) as c:
            t, pid, epoch = started(c)
            add(c, t, pid, epoch, [(TOPIC, 0)])
            done, dpid, depoch = started(c)
            add(c, done, dpid, depoch, [(TOPIC, 0)])
            assert end(c, done, dpid, depoch, True) == E.NONE
            wait_state(c, done, "CompleteCommit")
    with InProcessBroker(tmp_path / "data") as b, WireClient(b.port) as c:
        wait_until(lambda: describe(c, t).error_code == E.NONE, 20, what="the load")
        d = describe(c, t)
        assert (d.transaction_state, d.producer_id, d.producer_epoch) == ("Ongoing", pid, epoch)
        assert [(x.topic, x.partitions) for x in d.topics] == [(TOPIC, [0])]
        assert describe(c, done).transaction_state == "CompleteCommit"
        assert end(c, t, pid, epoch, True) == E.NONE
        wait_state(c, t, "CompleteCommit")


def test_moving_leadership_unloads_and_a_reload_answers_load_in_progress_until_done(tmp_path, monkeypatch):
    import threading

    from odradek.coordinator.transaction import transaction_coordinator as runtime

    with InProcessBroker(tmp_path / "data") as b, WireClient(b.port) as c:
        b.call(lambda: b.broker.topics.create(b.broker.topics.plan_topic(TOPIC, 1, 1, None, {})))
        t, pid, epoch = started(c)
        add(c, t, pid, epoch, [(TOPIC, 0)])
        coordinator = b.broker.txn_coordinator
        p = coordinator.partition_for(t)
        release = threading.Event()
        real_load = runtime.load_shard

        def slow_load(shard, plog):
            release.wait(20)
            return real_load(shard, plog)

        monkeypatch.setattr(runtime, "load_shard", slow_load)
        b.call(coordinator.on_leadership_change, (), [(TXN_STATE, p)])  # resigned: unloaded
        b.call(coordinator.on_leadership_change, [(TXN_STATE, p)], ())  # elected: loading
        assert describe(c, t).error_code == E.COORDINATOR_LOAD_IN_PROGRESS
        assert end(c, t, pid, epoch, True) == E.COORDINATOR_LOAD_IN_PROGRESS
        r = c.call(ApiKey.INIT_PRODUCER_ID, 4, transactional_id=t, transaction_timeout_ms=60_000)
        assert r.error_code == E.COORDINATOR_LOAD_IN_PROGRESS
        release.set()
        wait_until(lambda: describe(c, t).error_code == E.NONE, 20, what="the load")
        assert describe(c, t).transaction_state == "Ongoing"
        assert end(c, t, pid, epoch, True) == E.NONE
        wait_state(c, t, "CompleteCommit")
