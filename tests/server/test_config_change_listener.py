"""Dynamic configs changed through one broker apply on every broker (``/config/changes``)."""

from __future__ import annotations

import time

from odradek.metadata import layout
from odradek.server.config_change_listener import entity_of, sequence_of
from odradek.testing.broker import InProcessBroker


def test_notification_names_and_bodies_are_read_as_kafka_writes_them():
    assert sequence_of("config_change_0000000042") == 42
    assert sequence_of("something_else") is None
    assert sequence_of("config_change_") is None
    assert entity_of(layout.encode_config_change("topics/orders")) == ("topics", "orders")
    assert entity_of(layout.encode_config_change("brokers/<default>")) == ("brokers", "<default>")
    assert entity_of(b'{"version":2,"entity_path":"users/alice"}') == ("users", "alice")
    assert entity_of(b'{"version":2,"entity_path":"users/a/clients/c"}') == ("users", "a/clients/c")
    assert entity_of(b'{"version":2,"entity_path":"groups/g"}') is None
    assert entity_of(b"not json") is None
    assert entity_of(b'{"version":2}') is None


def _wait_for(predicate, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "the change did not arrive"
        time.sleep(0.05)


def test_a_broker_config_altered_through_one_broker_applies_on_the_other(zookeeper, chroot, tmp_path):
    connect = zookeeper.hosts + chroot
    with InProcessBroker(tmp_path / "1", node_id=1, zookeeper_connect=connect) as one, \
            InProcessBroker(tmp_path / "2", node_id=2, zookeeper_connect=connect) as two:
        one.call(one.broker.set_dynamic_broker_config, None, {"log.retention.ms": "123456"})
        _wait_for(lambda: two.call(two.broker.log_defaults).retention_ms == 123456)
        one.call(one.broker.set_dynamic_broker_config, 2, {"log.retention.ms": "654321"})
        _wait_for(lambda: two.call(two.broker.log_defaults).retention_ms == 654321)
        # broker 1's own configs are not broker 2's
        assert one.call(one.broker.log_defaults).retention_ms == 123456


def test_a_change_announced_before_the_listener_starts_is_applied_at_its_start(zookeeper, chroot, tmp_path):
    """A notification written between a broker's reading its configs and its listener's
    start (here: while broker 2's listener is off) is applied when the listener starts."""
    from odradek.server.config_change_listener import ConfigChangeListener

    connect = zookeeper.hosts + chroot
    with InProcessBroker(tmp_path / "1", node_id=1, zookeeper_connect=connect) as one, \
            InProcessBroker(tmp_path / "2", node_id=2, zookeeper_connect=connect) as two:
        two.call(two.broker.config_changes.close)
        one.call(one.broker.set_dynamic_broker_config, None, {"log.retention.ms": "234567"})
        time.sleep(0.3)  # what a broker with its listener off would have seen meanwhile: nothing
        assert two.call(two.broker.log_defaults).retention_ms != 234567

        def restart_listener():
            two.broker.config_changes = ConfigChangeListener(two.broker)
            two.broker.config_changes.start()

        two.call(restart_listener)
        assert two.call(two.broker.log_defaults).retention_ms == 234567


def test_old_notifications_are_deleted_beyond_the_newest_hundred(tmp_path):
    with InProcessBroker(tmp_path) as b:
        for i in range(105):
            b.call(b.broker.config_changes.notify, f"topics/t{i}")
        names = b.call(b.broker.metadata.store.children, layout.CONFIG_CHANGES)
        assert len(names) == 100
        assert max(names) == "config_change_0000000104"


def test_a_topic_config_altered_through_one_broker_applies_to_the_replica_on_another(zookeeper, chroot, tmp_path):
    from kafka.admin import ConfigResource, ConfigResourceType, KafkaAdminClient, NewTopic

    connect = zookeeper.hosts + chroot
    with InProcessBroker(tmp_path / "1", node_id=1, zookeeper_connect=connect) as one, \
            InProcessBroker(tmp_path / "2", node_id=2, zookeeper_connect=connect) as two:
        admin = KafkaAdminClient(bootstrap_servers=one.bootstrap)
        admin.create_topics([NewTopic("on-two", -1, -1, replica_assignments={0: [2]})])
        _wait_for(lambda: two.call(lambda: two.broker.replica_manager.get("on-two", 0)) is not None)
        admin.alter_configs([ConfigResource(ConfigResourceType.TOPIC, "on-two", configs={"retention.ms": "777777"})])
        admin.close()
        _wait_for(lambda: two.call(lambda: two.broker.replica_manager.get("on-two", 0).log.config.retention_ms) == 777777)


def test_a_client_quota_altered_through_one_broker_applies_on_the_other(zookeeper, chroot, tmp_path):
    from odradek.server import client_quota_configs as qc

    connect = zookeeper.hosts + chroot
    with InProcessBroker(tmp_path / "1", node_id=1, zookeeper_connect=connect) as one, \
            InProcessBroker(tmp_path / "2", node_id=2, zookeeper_connect=connect) as two:
        entity = qc.make_entity(user="alice", client_id="greedy")

        def alter(value):
            qc.alter(one.broker.metadata.store, entity, [("producer_byte_rate", value)])
            one.broker.config_changes.notify(qc.entity_path(entity))

        one.call(alter, 2048)
        _wait_for(lambda: two.call(two.broker.client_quotas.find, "producer_byte_rate", "alice", "greedy")
                  == (entity, 2048.0))
        one.call(alter, None)
        _wait_for(lambda: two.call(lambda: two.broker.client_quotas.empty))
