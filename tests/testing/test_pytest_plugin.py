"""The ``odradek_broker`` fixture that odradek's pytest plugin (entry point pytest11) gives users."""

import pytest



@pytest.mark.odradek_config(num_partitions=3)
def test_fixture_gives_a_working_broker(odradek_broker):
    from kafka import KafkaConsumer, KafkaProducer

    producer = KafkaProducer(bootstrap_servers=odradek_broker.bootstrap)
    producer.send("auto", b"hello").get(10)
    producer.close()
    consumer = KafkaConsumer("auto", bootstrap_servers=odradek_broker.bootstrap, group_id=None,
                             auto_offset_reset="earliest", consumer_timeout_ms=3000)
    assert [m.value for m in consumer] == [b"hello"]
    assert len(consumer.partitions_for_topic("auto")) == 3
    consumer.close()
