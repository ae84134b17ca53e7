"""Dynamic broker configs (AlterConfigs on a broker or the cluster default) as topic defaults,
seen through kafka-python."""

from __future__ import annotations

from contextlib import closing

import pytest
from kafka import KafkaProducer
from kafka import errors as Errors
from kafka.admin import ConfigResource, KafkaAdminClient, NewTopic


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
