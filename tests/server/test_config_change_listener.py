"""Dynamic configs changed through one broker apply on every broker (``/config/changes``)."""

from __future__ import annotations

import threading
import time

from odradek.metadata import layout
from odradek.metadata.errors import StoreUnavailableError
from odradek.server import client_quota_configs as qc
from odradek.server.config_change_listener import entity_of, sequence_of
from odradek.testing.broker import InProcessBroker
from tests.server.held_read import HeldRead
from tests.server.wire import WireClient, message


def test_notification_names_and_bodies_are_read_as_kafka_writes_them():
    assert sequence_of("config_change_0000000042") == 42
    assert sequence_of("something_else") is None
    assert sequence_of("config_change_") is None
    assert entity_of(layout.encode_config_change("topics/orders")) == ("topics", "orders")
    assert entity_of(layout.encode_config_change("brokers/<default>")) == ("brokers", "<default>")
    assert entity_of(b'{"version":2,"entity_path":"users/alice"}') == ("users", "alice")
    assert entity_of(b'{"version":2,"entity_path":"users/a/clients/c"}') == ("users", "a/clients/c")
    assert entity_of(b'{"version":2,"entity_path":"groups/g"}') == ("groups", "g")  # server/group_configs.py
    assert entity_of(b'{"version":2,"entity_path":"ips/10.0.0.1"}') is None
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
            return two.broker.config_changes.start()  # awaited: its first pass done

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


def test_the_loop_serves_clients_while_a_change_is_read(tmp_path):
    """The listener reads the store off the event loop: while its read of a changed config
    waits, the broker still answers requests; the change applies once the read returns."""
    with InProcessBroker(tmp_path) as b:
        client = WireClient(b.bootstrap, timeout=5)
        b.broker.metadata.set_broker_config(None, {"log.retention.ms": "345678"})  # as another broker does
        read = HeldRead(b.broker.metadata.store, layout.broker_config_path(None))
        try:
            b.broker.config_changes.notify("brokers/" + layout.broker_config_entity(None))
            assert read.held.wait(10)
            _, answer = client.request("ApiVersions", 0, message("ApiVersionsRequest"))
            assert answer.error_code == 0
            assert b.call(b.broker.log_defaults).retention_ms != 345678
        finally:
            read.release()
            client.close()
        _wait_for(lambda: b.call(b.broker.log_defaults).retention_ms == 345678)


def test_notifications_arriving_during_a_pass_are_applied_after_it_once_each_in_order(tmp_path):
    with InProcessBroker(tmp_path) as b:
        broker, listener, loop_thread = b.broker, b.broker.config_changes, b.call(threading.current_thread)
        applied, passes, running = [], [], []
        update, read_pass = broker.client_quotas.update, listener._read_pass

        def recording_update(entity, quotas):  # on the loop, as the listener must apply
            applied.append((dict(entity)[qc.USER], threading.current_thread() is loop_thread))
            update(entity, quotas)

        def recording_pass(last_seen):
            running.append(1)
            assert len(running) == 1, "two passes at once"
            try:
                result = read_pass(last_seen)
                passes.append(len(result[1]))
                return result
            finally:
                running.pop()

        broker.client_quotas.update, listener._read_pass = recording_update, recording_pass

        paths = {user: qc.entity_path(qc.make_entity(user=user)) for user in ("u0", "u1", "u2", "u3")}
        for user in paths:  # written as another broker does, announced below
            qc.alter(broker.metadata.store, qc.make_entity(user=user), [("producer_byte_rate", 1024)])
        read = HeldRead(broker.metadata.store, "/config/" + paths["u0"])
        try:
            listener.notify(paths["u0"])
            assert read.held.wait(10)
            for user in ("u1", "u2", "u1", "u3"):  # u1 twice: applied once
                listener.notify(paths[user])
        finally:
            read.release()
        _wait_for(lambda: len(b.call(lambda: applied)) == 4)
        assert applied == [(user, True) for user in ("u0", "u1", "u2", "u3")]
        assert passes == [1, 3]  # the held pass, then one for all that came meanwhile


def test_a_change_the_store_could_not_give_is_read_again_by_the_next_pass(tmp_path):
    """An unreachable store ends the pass before the notification it could not read; the next
    pass (ZooKeeper's reconnection runs the watch again; here: the next notification) reads
    it, and the rest after it, in order."""
    with InProcessBroker(tmp_path) as b:
        broker, listener = b.broker, b.broker.config_changes
        paths = {user: qc.entity_path(qc.make_entity(user=user)) for user in ("u0", "u1")}
        for user in paths:
            qc.alter(broker.metadata.store, qc.make_entity(user=user), [("producer_byte_rate", 2048)])
        get, failed = broker.metadata.store.get, []

        def unavailable_once(path, *args, **kwargs):
            if path == "/config/" + paths["u0"] and not failed:
                failed.append(path)
                raise StoreUnavailableError("connection lost")
            return get(path, *args, **kwargs)

        broker.metadata.store.get = unavailable_once
        listener.notify(paths["u0"])
        _wait_for(lambda: failed)
        assert b.call(broker.client_quotas.find, "producer_byte_rate", "u0", "c") is None
        listener.notify(paths["u1"])
        for user in paths:
            _wait_for(lambda: b.call(broker.client_quotas.find, "producer_byte_rate", user, "c") is not None)
