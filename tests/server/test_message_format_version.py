"""``message.format.version``, deprecated since Kafka 3.0: accepted on topics (created with it or
altered to it) with the broker's warning, shown by DescribeConfigs, and otherwise ignored;
a version Kafka does not know is refused."""

from __future__ import annotations

import logging

import pytest
from confluent_kafka import KafkaException
from confluent_kafka.admin import (
    AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, ConfigSource, NewTopic, ResourceType,
)


def _result(futures: dict):
    [future] = futures.values()
    return future.result(20)


def _described(admin, topic: str):
    return _result(admin.describe_configs([ConfigResource(ResourceType.TOPIC, topic)]))["message.format.version"]


def test_accepted_with_a_warning_and_described(shared_broker, caplog):
    admin = AdminClient({"bootstrap.servers": shared_broker.bootstrap})
    with caplog.at_level(logging.WARNING, logger="odradek"):
        _result(admin.create_topics([NewTopic("mfv-old", 1, 1, config={"message.format.version": "0.10.2"})]))
    assert ("Topic configuration message.format.version with value `0.10.2` is ignored for `mfv-old` because the "
            "inter-broker protocol version `3.9` is greater or equal than 3.0. This configuration is deprecated and "
            "it will be removed in Apache Kafka 4.0.") in caplog.messages
    entry = _described(admin, "mfv-old")
    assert (entry.value, entry.source) == ("0.10.2", ConfigSource.DYNAMIC_TOPIC_CONFIG.value)

    _result(admin.create_topics([NewTopic("mfv-plain", 1, 1)]))
    entry = _described(admin, "mfv-plain")
    assert (entry.value, entry.source) == ("3.0-IV1", ConfigSource.DEFAULT_CONFIG.value)
    change = ConfigEntry("message.format.version", "2.8.1", incremental_operation=AlterConfigOpType.SET)
    _result(admin.incremental_alter_configs([ConfigResource(ResourceType.TOPIC, "mfv-plain", incremental_configs=[change])]))
    assert _described(admin, "mfv-plain").value == "2.8.1"


@pytest.mark.parametrize("version", ["0.12.0", "bogus", "4.0"])
def test_a_version_kafka_does_not_know_is_refused(shared_broker, version):
    admin = AdminClient({"bootstrap.servers": shared_broker.bootstrap})
    with pytest.raises(KafkaException) as e:
        _result(admin.create_topics([NewTopic("mfv-bad", 1, 1, config={"message.format.version": version})]))
    assert e.value.args[0].str() == (f"Invalid value {version} for configuration message.format.version: "
                                     f"Version {version} is not a valid version")
