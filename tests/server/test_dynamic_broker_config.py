"""Dynamic broker configs (AlterConfigs on a broker or the cluster default) as topic defaults,
seen through kafka-python."""

from __future__ import annotations

from contextlib import closing

import pytest
from kafka import KafkaProducer
from kafka import errors as Errors
from kafka.admin import ConfigResource, KafkaAdminClient, NewTopic

from odradek.protocol.generated.describe_configs_request import DescribeConfigsRequest, DescribeConfigsResource
from odradek.protocol.generated.incremental_alter_configs_request import (
    AlterableConfig, AlterConfigsResource, IncrementalAlterConfigsRequest,
)
from odradek.testing.broker import InProcessBroker
from tests.server.clients import wait_until
from tests.server.wire import WireClient, message


def test_min_insync_replicas_set_on_the_broker_applies_to_topics_without_their_own(broker):
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    try:
        admin.create_topics([NewTopic("plain", 1, 1), NewTopic("own", 1, 1, topic_configs={"min.insync.replicas": "1"})])
        admin.alter_configs([ConfigResource("BROKER", "1", {"min.insync.replicas": "2"})])
        with closing(KafkaProducer(bootstrap_servers=broker.bootstrap, acks="all", enable_idempotence=False,
                                   retries=0)) as producer:
            # One replica in the ISR: the broker's new default refuses acks=all...
            with pytest.raises(Errors.NotEnoughReplicasError):
                producer.send("plain", b"durable?").get(20)
            # ...where the topic has no value of its own.
            assert producer.send("own", b"durable").get(20).offset == 0
        admin.alter_configs([ConfigResource("BROKER", "1", {"min.insync.replicas": "1"})])
        with closing(KafkaProducer(bootstrap_servers=broker.bootstrap, acks="all")) as producer:
            assert producer.send("plain", b"durable").get(20).offset == 0
    finally:
        admin.close()


def alter_broker(admin, name: str, configs: dict) -> str:
    """IncrementalAlterConfigs on broker ``name`` through kafka-python: 'OK' or the error as
    kafka-python words it."""
    result = admin.alter_configs([ConfigResource("BROKER", name, configs)], incremental=True, raise_on_unknown=False)
    return result["broker"][name]


def alter_raw(broker, name: str, configs: dict) -> str:
    """The same in raw frames, for what kafka-python cannot name (the cluster default "", other
    broker ids); a value of None deletes the key."""
    ops = [AlterableConfig(name=k, config_operation=1 if v is None else 0, value=v) for k, v in configs.items()]
    wire = WireClient(broker.bootstrap)
    try:
        _, response = wire.request("IncrementalAlterConfigs", 1, IncrementalAlterConfigsRequest(
            resources=[AlterConfigsResource(resource_type=4, resource_name=name, configs=ops)]))
    finally:
        wire.close()
    result = response.responses[0]
    if result.error_code == 0:
        return "OK"
    return f"[Error {result.error_code}] {Errors.for_code(result.error_code).__name__}: {result.error_message}"


def describe_raw(broker, name: str) -> dict:
    """DescribeConfigs of broker ``name`` in raw frames: ``{name: (value, source)}``."""
    wire = WireClient(broker.bootstrap)
    try:
        _, response = wire.request("DescribeConfigs", 4, DescribeConfigsRequest(
            resources=[DescribeConfigsResource(resource_type=4, resource_name=name, configuration_keys=None)]))
    finally:
        wire.close()
    [result] = response.results
    assert result.error_code == 0, result
    return {c.name: (c.value, c.config_source) for c in result.configs}


def refused(message: str) -> str:
    return f"[Error 42] InvalidRequestError: {message}"


@pytest.mark.parametrize(("name", "configs", "message"), [
    ("1", {"log.dirs": "/elsewhere", "log.retention.hours": "1"},
     "Cannot update these configs dynamically: Set(log.dirs, log.retention.hours)"),
    ("1", {"ssl.keystore.location": "/ks.jks"}, "These security configs can be dynamically updated only "
                                                "per-listener using the listener prefix: Set(ssl.keystore.location)"),
    ("", {"listener.name.plaintext.ssl.keystore.location": "/ks.jks", "max.connections": "100"},
     "Cannot update these configs at default cluster level, broker id must be specified: "
     "Set(listener.name.plaintext.ssl.keystore.location)"),
    ("1", {"num.io.threads": "17"}, "Dynamic thread count update validation failed for num.io.threads=17, "
                                    "value should not be greater than double the current value 8"),
    ("2", {"log.retention.ms": "1"}, "Unexpected broker id, expected 1, but received 2"),
])
def test_what_kafka_does_not_let_change_is_refused_with_its_message(shared_broker, kp_admin, name, configs, message):
    answer = alter_broker(kp_admin, name, configs) if name == "1" else alter_raw(shared_broker, name, configs)
    assert answer == refused(message)


def test_dynamic_broker_settings_are_kept_and_described(shared_broker, kp_admin):
    changes = {"num.io.threads": "16", "max.connections.per.ip": "50", "log.cleaner.threads": "2",
               "listener.name.plaintext.ssl.keystore.password": "secret"}
    try:
        assert alter_broker(kp_admin, "1", changes) == "OK"
        assert alter_raw(shared_broker, "", {"max.connections": "1000", "num.network.threads": "4"}) == "OK"
        found = kp_admin.describe_configs([ConfigResource("BROKER", "1")], config_filter="all")["broker"]["1"]
        assert {k: (found[k]["value"], found[k]["config_source"]) for k in changes} == {
            "num.io.threads": ("16", "DYNAMIC_BROKER_CONFIG"), "max.connections.per.ip": ("50", "DYNAMIC_BROKER_CONFIG"),
            "log.cleaner.threads": ("2", "DYNAMIC_BROKER_CONFIG"),
            "listener.name.plaintext.ssl.keystore.password": (None, "DYNAMIC_BROKER_CONFIG")}
        assert found["listener.name.plaintext.ssl.keystore.password"]["is_sensitive"]
        assert (found["max.connections"]["value"], found["max.connections"]["config_source"]) == (
            "1000", "DYNAMIC_DEFAULT_BROKER_CONFIG")
        assert found["log.dirs"]["read_only"] and not found["num.io.threads"]["read_only"]
        # The cluster default alone holds only what is set there.
        assert describe_raw(shared_broker, "") == {"max.connections": ("1000", 3), "num.network.threads": ("4", 3)}
    finally:
        kp_admin.reset_configs([ConfigResource("BROKER", "1", list(changes))])
        alter_raw(shared_broker, "", {"max.connections": None, "num.network.threads": None})


def test_message_max_bytes_as_cluster_default_reaches_existing_topics(shared_broker, kp_admin):
    kp_admin.create_topics([NewTopic("mmb-plain", 1, 1),
                            NewTopic("mmb-own", 1, 1, topic_configs={"max.message.bytes": "1048588"})])
    assert alter_raw(shared_broker, "", {"message.max.bytes": "2000"}) == "OK"
    try:
        with closing(KafkaProducer(bootstrap_servers=shared_broker.bootstrap, retries=0)) as producer:
            with pytest.raises(Errors.MessageSizeTooLargeError):
                producer.send("mmb-plain", b"x" * 4000).get(20)
            assert producer.send("mmb-own", b"x" * 4000).get(20).offset == 0
    finally:
        assert alter_raw(shared_broker, "", {"message.max.bytes": None}) == "OK"
    with closing(KafkaProducer(bootstrap_servers=shared_broker.bootstrap, retries=0)) as producer:
        assert producer.send("mmb-plain", b"x" * 4000).get(20).offset == 0


def test_producer_id_expiration_changed_at_run_time_applies_to_the_next_check(tmp_path):
    with InProcessBroker(tmp_path / "data", producer_id_expiration_check_interval_ms=50) as b:
        admin = KafkaAdminClient(bootstrap_servers=b.bootstrap)
        try:
            with closing(KafkaProducer(bootstrap_servers=b.bootstrap, enable_idempotence=True)) as producer:
                producer.send("pid-expiry", b"a", partition=0).get(20)
            state = b.broker.replica_manager.get("pid-expiry", 0).producer_state
            assert len(state) == 1  # kept for a day (the default)...
            assert alter_broker(admin, "1", {"producer.id.expiration.ms": "1"}) == "OK"
            wait_until(lambda: len(state) == 0, what="the producer id expired under the new setting")
        finally:
            admin.close()


def test_a_listener_added_at_run_time_serves_and_one_removed_closes(tmp_path):
    with InProcessBroker(tmp_path / "data") as b:
        admin = KafkaAdminClient(bootstrap_servers=b.bootstrap)
        try:
            assert alter_broker(admin, "1", {"listeners": "PLAINTEXT://127.0.0.1:0,EXTRA://127.0.0.1:0"}) == refused(
                "Listeners 'PLAINTEXT,EXTRA' must be subset of listener map "
                "'PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL'")
            assert alter_broker(admin, "1", {"listeners": "PLAINTEXT://127.0.0.1:0,EXTRA://127.0.0.1:0",
                                             "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,EXTRA:PLAINTEXT",
                                             }) == "OK"
            port = wait_until(lambda: b.broker.bound.get("EXTRA", (None, None))[1], what="the new listener bound")
            extra = WireClient(f"127.0.0.1:{port}")
            _, metadata = extra.request("Metadata", 1, message("MetadataRequest", topics=[]))
            assert [(m.host, m.port) for m in metadata.brokers] == [("127.0.0.1", port)]  # its own endpoint

            assert alter_broker(admin, "1", {"listeners": "PLAINTEXT://127.0.0.1:0"}) == "OK"
            assert extra.is_closed()
            extra.close()
            wait_until(lambda: "EXTRA" not in b.broker.bound, what="the listener closed")
            with pytest.raises(ConnectionRefusedError):
                WireClient(f"127.0.0.1:{port}")
        finally:
            admin.close()
