"""ClusterMetadata on ZooKeeper: two brokers' caches follow each other's writes through watches,
a broker whose session expired registers itself again, and one whose session is lost while
it registers still registers."""

from __future__ import annotations

import pytest

from kazoo.exceptions import ConnectionLoss

from odradek.metadata.cluster_metadata import ClusterMetadata
from odradek.metadata.errors import BrokerIdInUseError
from odradek.metadata.layout import BrokerInfo, Endpoint, PartitionState
from odradek.metadata.zookeeper_store import ZooKeeperStore
from tests.metadata.store_contract import Recorder, wait_for
from tests.metadata.test_zookeeper_store import _expire_session, interrupt_creates, lost


def broker(broker_id: int) -> BrokerInfo:
    return BrokerInfo(broker_id, (Endpoint("PLAINTEXT", "127.0.0.1", 9000 + broker_id % 1000),))


@pytest.fixture
def two_brokers(zookeeper, chroot):
    stores = [ZooKeeperStore(zookeeper.hosts, chroot) for _ in range(2)]
    members = [ClusterMetadata(store) for store in stores]
    for broker_id, member in zip((1000, 1001), members):
        member.register_broker(broker(broker_id))
    yield members
    for member, store in zip(members, stores):
        member.close()
        store.close()


def test_caches_follow_each_others_writes(two_brokers):
    first, second = two_brokers
    wait_for(lambda: len(first.brokers()) == 2, "both registrations")
    assert first.cluster_id() == second.cluster_id()
    topic = first.create_topic("t", {0: [1000, 1001], 1: [1001, 1000]}, {"k": "v"})
    wait_for(lambda: second.topic("t") == topic, "the new topic")
    for p in (0, 1):  # as a controller would
        first.set_partition_state("t", p, PartitionState(topic.partitions[p][0], 0, topic.partitions[p], 0), -1)
    wait_for(lambda: second.partition_state("t", 1) is not None, "the partition states")
    assert second.topic_by_id(topic.topic_id) == topic
    assert second.topic_config("t") == {"k": "v"}
    state = second.partition_state("t", 0)
    second.set_partition_state("t", 0, PartitionState(1001, 1, (1001,), 0), state.zk_version)
    wait_for(lambda: first.partition_state("t", 0).leader == 1001, "the leader change")
    first.add_partitions("t", {2: [1000, 1001]})
    first.set_partition_state("t", 2, PartitionState(1000, 0, (1000, 1001), 0), -1)
    wait_for(lambda: second.partition_state("t", 2) is not None, "the added partition")
    assert first.try_become_controller(1000) == 1
    wait_for(lambda: second.controller_id() == 1000, "the controller")
    second.delete_topic("t")
    wait_for(lambda: first.snapshot().topics_being_deleted == {"t"}, "the deletion mark")


def test_a_broker_registers_again_after_its_session_expired(zookeeper, two_brokers):
    first, second = two_brokers
    wait_for(lambda: len(second.brokers()) == 2, "both registrations")
    _expire_session(zookeeper.hosts, first.store)
    wait_for(
        lambda: (
            first.store.exists("/brokers/ids/1000") is not None
            and [b.broker_id for b in second.brokers()] == [1000, 1001]
        ),
        "the re-registration",
    )


def test_a_broker_registers_across_a_session_lost_while_it_registers(zookeeper, chroot):
    """The first create is applied in the old session, then the session expires before the
    answer: the znode went with the session, so the retry creates it in the new one, and the
    broker epoch is that second creation's."""
    first_creation = []

    def applied_then_expired(real, *args, **kwargs):
        real(*args, **kwargs)
        first_creation.append(store._client.exists(args[0]).czxid)
        _expire_session(zookeeper.hosts, store)
        raise ConnectionLoss()

    with ZooKeeperStore(zookeeper.hosts, chroot) as store:
        metadata = ClusterMetadata(store)
        old_session = store._client.client_id[0]
        left = interrupt_creates(store, lost, applied_then_expired)
        metadata.register_broker(broker(1000))
        assert left == []
        _, stat = store._client.get("/brokers/ids/1000")
        assert stat.ephemeralOwner == store._client.client_id[0] != old_session
        assert metadata.broker_epoch == stat.czxid > first_creation[0]
        assert [b.broker_id for b in metadata.brokers()] == [1000]
        metadata.close()


def test_a_broker_id_held_by_another_session_is_in_use(zookeeper, chroot, two_brokers):
    with ZooKeeperStore(zookeeper.hosts, chroot) as store:
        metadata = ClusterMetadata(store)
        with pytest.raises(BrokerIdInUseError):
            metadata.register_broker(broker(1000))
        assert metadata.broker_epoch == -1
        metadata.close()


def test_state_changes_by_another_writer_are_read_back_together(two_brokers):
    """The state watches of a burst of changes (one multi writing 50 states, as a failover
    does) hand their partitions to the cache's refresher, which reads them with one
    `get_many` per wake-up, not one read per change."""
    from odradek.metadata import layout
    from odradek.metadata.store import CreateOp, SetOp

    first, second = two_brokers
    n = 50
    first.create_topic("t", {p: [1000, 1001] for p in range(n)})
    first.store.multi([CreateOp(layout.partitions_path("t"))]
                      + [CreateOp(layout.partition_path("t", p)) for p in range(n)]
                      + [CreateOp(layout.partition_state_path("t", p),
                                  PartitionState(1000, 0, (1000, 1001), 1).to_json())
                         for p in range(n)])
    cache = second.cache
    wait_for(lambda: all(second.partition_state("t", p) is not None for p in range(n)),
             "the first states")
    # The states' watches, set before the states were created, report their creations too,
    # perhaps after the states were read: let those reads happen before counting. A watch set
    # now fires after them (one store calls back in order); the refresher then takes them, and
    # reads under the cache's lock.
    settled = Recorder()
    first.store.create("/settled")
    second.store.watch_data("/settled", settled)
    first.store.set("/settled", b"x")
    wait_for(lambda: settled.count() >= 1, "the creations reported")
    wait_for(lambda: not cache._background._fired, "the creations taken by the refresher")
    calls = []
    with cache._lock:  # a read under way ends first
        real = second.store.get_many
        second.store.get_many = lambda paths: calls.append(len(paths)) or real(paths)
    marker = Recorder()  # fires after the burst's watches: one store calls back in order
    first.store.create("/marker")
    second.store.watch_data("/marker", marker)
    with cache._lock:  # the refresher waits here while the watches fire
        first.store.multi([SetOp(layout.partition_state_path("t", p),
                                 PartitionState(1001, 1, (1001,), 1).to_json(), 0)
                           for p in range(n)])
        first.store.set("/marker", b"after")
        wait_for(lambda: marker.count() >= 1, "the watches of the burst")
    wait_for(lambda: all(second.partition_state("t", p).leader == 1001 for p in range(n)),
             "the new leaders")
    assert sum(calls) == n and len(calls) <= 2  # the first one taken, then the rest at once


def test_a_failed_re_read_of_fired_states_is_tried_again(two_brokers, monkeypatch):
    """When the refresher's read of fired states fails, it tries again: the change would
    otherwise stay unseen until the partition's next one."""
    from odradek.metadata import background_refresher, layout
    from odradek.metadata.errors import StoreUnavailableError

    first, second = two_brokers
    first.create_topic("r", {0: [1000, 1001]})
    first.store.create(layout.partition_state_path("r", 0), PartitionState(1000, 0, (1000, 1001), 1).to_json(),
                       make_parents=True)
    wait_for(lambda: second.partition_state("r", 0) is not None, "the first state")
    monkeypatch.setattr(background_refresher, "REFRESH_RETRY_S", 0.05)
    real, failures = second.store.get_many, []

    def fail_once(paths):
        if not failures:
            failures.append(paths)
            raise StoreUnavailableError("lost (test)")
        return real(paths)
    second.store.get_many = fail_once
    for epoch in (1, 2):
        first.store.set(layout.partition_state_path("r", 0), PartitionState(1001, epoch, (1001,), 1).to_json())
        wait_for(lambda: second.partition_state("r", 0).leader_epoch == epoch, f"leader epoch {epoch} seen")
    assert failures
