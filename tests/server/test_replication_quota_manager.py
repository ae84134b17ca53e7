"""Replication throttles: the rate over its windows, the replica lists, and the configs a
broker accepts for them (dynamic broker rates, topic replica lists checked as Kafka does)."""

from __future__ import annotations

import pytest

from odradek.client import AdminClient, AlterConfigOp, AlterConfigOpType, BrokerError, ConfigResource, ResourceType
from odradek.protocol.generated.error_codes import ErrorCode
from odradek.server.replication_quota_manager import (
    ALL_REPLICAS,
    FOLLOWER_REPLICAS,
    LEADER_REPLICAS,
    ReplicationQuotaManager,
    check_throttled_replicas,
    throttled_partitions,
)
from tests.server.clients import wait_until


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def quota(bound=1000, configs=None, clock=None):
    configs = configs if configs is not None else {}
    return ReplicationQuotaManager(LEADER_REPLICAS, 7, lambda: bound, lambda t: configs.get(t, {}),
                                   samples=11, window_s=1.0, clock=clock or Clock())


def test_worked_example_of_the_module_docstring():
    clock = Clock()
    q = quota(1000, clock=clock)
    assert not q.is_quota_exceeded() and q.delay() == 0
    q.record(3000)
    assert q.delay() == pytest.approx(3.0)
    clock.now += 0.5
    assert q.rate() == pytest.approx(3000) and q.is_quota_exceeded()
    clock.now += 1.5
    assert q.rate() == pytest.approx(1500) and q.is_quota_exceeded()
    clock.now += 1.0
    assert q.rate() == pytest.approx(1000) and not q.is_quota_exceeded()


def test_old_samples_are_forgotten_and_no_bound_never_throttles():
    clock = Clock()
    q = quota(10, clock=clock)
    q.record(1000)
    clock.now += 12  # beyond 11 windows of 1 s
    assert q.rate() == 0 and not q.is_quota_exceeded()
    unbounded = quota(2**63 - 1, clock=clock)
    unbounded.record(10**12)
    assert not unbounded.is_quota_exceeded()


def test_replica_lists():
    assert throttled_partitions("0:7,1:8, 2:7", 7) == {0, 2}
    assert throttled_partitions(" * ", 7) == ALL_REPLICAS
    assert throttled_partitions("", 7) == frozenset()
    configs = {"t": {LEADER_REPLICAS: "3:7"}, "all": {LEADER_REPLICAS: "*"}, "other": {FOLLOWER_REPLICAS: "*"}}
    q = quota(configs=configs)
    assert q.is_throttled("t", 3) and not q.is_throttled("t", 0)
    assert q.is_throttled("all", 5) and not q.is_throttled("other", 0) and not q.is_throttled("none", 0)
    configs["t"][LEADER_REPLICAS] = "0:7"  # a config change applies at once
    assert q.is_throttled("t", 0) and not q.is_throttled("t", 3)


@pytest.mark.parametrize("value", ["", "*", "0:1", "0:1, 1:2", " 12:3 ,4:5"])
def test_valid_lists(value):
    check_throttled_replicas(LEADER_REPLICAS, value)


@pytest.mark.parametrize("value", ["all", "0", "0:1,*", "a:1", "0:1:2", "-1:2"])
def test_invalid_lists(value):
    with pytest.raises(ValueError, match="must be the literal"):
        check_throttled_replicas(FOLLOWER_REPLICAS, value)


def test_broker_accepts_the_throttle_configs(shared_broker):
    with AdminClient(shared_broker.bootstrap) as admin:
        admin.create_topics(["throttled"])
        topic = ConfigResource(ResourceType.TOPIC, "throttled")
        broker = ConfigResource(ResourceType.BROKER, "1")
        admin.incremental_alter_configs({
            topic: [AlterConfigOp("leader.replication.throttled.replicas", "0:1"),
                    AlterConfigOp("follower.replication.throttled.replicas", "*")],
            broker: [AlterConfigOp("leader.replication.throttled.rate", "1000"),
                     AlterConfigOp("follower.replication.throttled.rate", "2000")]})
        described = admin.describe_configs([broker])[broker]
        assert described["leader.replication.throttled.rate"].value == "1000"
        quotas = shared_broker.broker.replication_quotas
        wait_until(lambda: quotas.follower.bound == 2000, what="the throttles applied")
        assert quotas.leader.bound == 1000 and quotas.follower.bound == 2000
        assert quotas.leader.is_throttled("throttled", 0) and quotas.follower.is_throttled("throttled", 3)
        with pytest.raises(BrokerError) as raised:
            admin.incremental_alter_configs({topic: [AlterConfigOp("leader.replication.throttled.replicas", "0-1")]})
        assert raised.value.code == ErrorCode.INVALID_CONFIG
        admin.incremental_alter_configs({
            broker: [AlterConfigOp(n, None, AlterConfigOpType.DELETE)
                     for n in ("leader.replication.throttled.rate", "follower.replication.throttled.rate")]})
        # (a dynamic broker config reaches the broker through its change notification, after
        # the answer, as in Kafka: wait for it)
        wait_until(lambda: quotas.leader.bound == 2**63 - 1, what="the leader throttle removed")
        assert quotas.leader.bound == 2**63 - 1
