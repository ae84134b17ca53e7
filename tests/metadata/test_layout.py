"""Znode payloads: byte-exact Kafka JSON, older versions accepted, malformed ones refused."""

from __future__ import annotations

import json
import uuid

import pytest
from hypothesis import given
from hypothesis import strategies as st

from odradek.metadata import layout
from odradek.metadata.errors import MalformedMetadataError
from odradek.metadata.layout import (
    ZERO_UUID,
    BrokerInfo,
    Endpoint,
    PartitionState,
    TopicAssignment,
    uuid_from_kafka,
    uuid_to_kafka,
)


def test_paths():
    assert layout.broker_path(1000) == "/brokers/ids/1000"
    assert layout.partition_state_path("t", 3) == "/brokers/topics/t/partitions/3/state"
    assert layout.topic_config_path("t") == "/config/topics/t"
    assert layout.broker_config_path(None) == "/config/brokers/<default>"
    assert layout.broker_config_path(7) == "/config/brokers/7"
    assert layout.delete_topic_path("t") == "/admin/delete_topics/t"


# -- uuids ----------------------------------------------------------------------------------


def test_kafka_uuid_text_form():
    # Kafka's reserved metadata topic id, Uuid(0, 1), is written "AAAAAAAAAAAAAAAAAAAAAQ".
    assert uuid_to_kafka(uuid.UUID(int=1)) == "AAAAAAAAAAAAAAAAAAAAAQ"
    assert uuid_from_kafka("AAAAAAAAAAAAAAAAAAAAAQ") == uuid.UUID(int=1)
    value = uuid.uuid4()
    assert len(uuid_to_kafka(value)) == 22
    assert uuid_from_kafka(uuid_to_kafka(value)) == value


@pytest.mark.parametrize(
    "text", ["", "short", "A" * 23, "AAAAAAAAAAAAAAAAAAAA+Q", "AAAAAAAAAAAAAAAAAAAAAR", 7]
)
def test_bad_kafka_uuids(text):
    with pytest.raises(MalformedMetadataError):
        uuid_from_kafka(text)


def test_new_ids_are_never_zero_reserved_or_dash_led():
    for _ in range(2000):
        value = layout.new_kafka_uuid()
        assert value.int > 1
        assert not uuid_to_kafka(value).startswith("-")


# -- brokers --------------------------------------------------------------------------------


def test_broker_registration_json_is_kafkas_version_5():
    info = BrokerInfo(
        1000,
        (
            Endpoint("PLAINTEXT", "localhost", 9092),
            Endpoint("SECURE", "localhost", 9093, "SASL_SSL"),
        ),
        rack="r1",
    )
    assert json.loads(info.to_json(1700000000123)) == {
        "features": {},
        "listener_security_protocol_map": {"PLAINTEXT": "PLAINTEXT", "SECURE": "SASL_SSL"},
        "endpoints": ["PLAINTEXT://localhost:9092", "SECURE://localhost:9093"],
        "jmx_port": -1,
        "port": 9092,
        "host": "localhost",
        "version": 5,
        "timestamp": "1700000000123",
        "rack": "r1",
    }
    assert BrokerInfo.from_json(1000, info.to_json(1)) == info
    assert info.endpoint("SECURE").port == 9093
    assert info.endpoint("NONE") is None


def test_broker_without_plaintext_listener_has_no_host():
    info = BrokerInfo(1, (Endpoint("SSL", "h", 9093, "SSL"),))
    doc = json.loads(info.to_json(0))
    assert doc["host"] is None and doc["port"] == -1 and doc["rack"] is None


def test_ipv6_endpoints_use_brackets():
    endpoint = Endpoint("PLAINTEXT", "::1", 9092)
    assert endpoint.uri() == "PLAINTEXT://[::1]:9092"
    assert Endpoint.parse(endpoint.uri()) == endpoint


def test_older_registrations_are_understood():
    v1 = b'{"jmx_port":-1,"timestamp":"1","host":"h","version":1,"port":9092}'
    assert BrokerInfo.from_json(3, v1).endpoints == (Endpoint("PLAINTEXT", "h", 9092),)
    v2 = b'{"jmx_port":-1,"timestamp":"1","endpoints":["SSL://h:9093"],"host":null,"version":2,"port":-1}'
    assert BrokerInfo.from_json(3, v2).endpoints == (Endpoint("SSL", "h", 9093, "SSL"),)


@pytest.mark.parametrize(
    "data",
    [
        b"not json",
        b"[1]",
        b'{"endpoints": "PLAINTEXT://h:1"}',
        b'{"endpoints": ["h:1"]}',
        b'{"endpoints": ["CUSTOM://h:1"]}',
        b'{"endpoints": ["PLAINTEXT://h:port"]}',
        b'{"endpoints": ["PLAINTEXT://h:1"], "rack": 5}',
        b'{"host": "h"}',
    ],
)
def test_malformed_registrations_are_refused(data):
    with pytest.raises(MalformedMetadataError):
        BrokerInfo.from_json(1, data)


# -- topics and partition states -------------------------------------------------------------


def test_topic_assignment_json_is_kafkas_version_3():
    topic_id = uuid.UUID(int=1)
    topic = TopicAssignment("t", topic_id, {1: [1001, 1000], 0: (1000, 1001)})
    assert topic.to_json() == (
        b'{"version":3,"partitions":{"0":[1000,1001],"1":[1001,1000]},'
        b'"topic_id":"AAAAAAAAAAAAAAAAAAAAAQ","adding_replicas":{},"removing_replicas":{}}'
    )
    again = TopicAssignment.from_json("t", topic.to_json(), zk_version=4)
    assert again == topic and again.zk_version == 4
    assert again.partitions[1] == (1001, 1000)
    assert again.replication_factor == 2


def test_topic_assignment_is_immutable():
    topic = TopicAssignment("t", uuid.UUID(int=5), {0: [1]})
    with pytest.raises(TypeError):
        topic.partitions[1] = (2,)
    with pytest.raises(AttributeError):
        topic.name = "u"


def test_topic_without_id_gets_the_zero_uuid():
    topic = TopicAssignment.from_json("old", b'{"version":1,"partitions":{"0":[1]}}')
    assert topic.topic_id == ZERO_UUID
    assert b"topic_id" not in topic.to_json()


@pytest.mark.parametrize(
    "data",
    [
        b"{}",
        b'{"partitions": []}',
        b'{"partitions": {"x": [1]}}',
        b'{"partitions": {"0": 1}}',
        b'{"partitions": {"0": [1]}, "topic_id": "nope"}',
    ],
)
def test_malformed_topics_are_refused(data):
    with pytest.raises(MalformedMetadataError):
        TopicAssignment.from_json("t", data)


def test_partition_state_json():
    state = PartitionState(1000, 2, (1000, 1001), 5)
    assert json.loads(state.to_json()) == {
        "controller_epoch": 5,
        "leader": 1000,
        "version": 1,
        "leader_epoch": 2,
        "isr": [1000, 1001],
    }
    assert PartitionState.from_json(state.to_json(), 9) == state
    assert PartitionState.from_json(state.to_json(), 9).zk_version == 9


@pytest.mark.parametrize(
    "data",
    [
        b'{"leader": 1, "leader_epoch": 0, "isr": [1]}',
        b'{"leader": "1", "leader_epoch": 0, "isr": [], "controller_epoch": 1}',
        b'{"leader": 1, "leader_epoch": 0, "isr": [true], "controller_epoch": 1}',
    ],
)
def test_malformed_states_are_refused(data):
    with pytest.raises(MalformedMetadataError):
        PartitionState.from_json(data)


ids = st.integers(0, 2**31 - 1)


@given(
    partitions=st.dictionaries(
        st.integers(0, 500), st.lists(ids, min_size=1, max_size=5), max_size=20
    ),
    raw_id=st.integers(0, 2**128 - 1),
)
def test_topic_assignments_round_trip(partitions, raw_id):
    topic = TopicAssignment("t", uuid.UUID(int=raw_id), partitions)
    assert TopicAssignment.from_json("t", topic.to_json()) == topic


@given(leader=st.integers(-1, 2**31 - 1), epoch=ids, isr=st.lists(ids, max_size=6), cepoch=ids)
def test_partition_states_round_trip(leader, epoch, isr, cepoch):
    state = PartitionState(leader, epoch, tuple(isr), cepoch)
    assert PartitionState.from_json(state.to_json()) == state


# -- small documents ------------------------------------------------------------------------


def test_small_documents():
    assert layout.encode_cluster_id("abc") == b'{"version":"1","id":"abc"}'
    assert layout.decode_cluster_id(b'{"version":"1","id":"abc"}') == "abc"
    assert json.loads(layout.encode_controller(1000, 42)) == {
        "version": 1,
        "brokerid": 1000,
        "timestamp": "42",
    }
    assert layout.decode_controller(layout.encode_controller(7, 0)) == 7
    assert layout.decode_controller_epoch(layout.encode_controller_epoch(12)) == 12
    assert layout.decode_config(layout.encode_config({"a": "1"})) == {"a": "1"}
    assert layout.encode_config({"a": "1"}) == b'{"version":1,"config":{"a":"1"}}'
    assert layout.encode_config_change("topics/t") == b'{"version":2,"entity_path":"topics/t"}'
    assert json.loads(layout.encode_isr_change([("t", 0)])) == {
        "version": 1,
        "partitions": [{"topic": "t", "partition": 0}],
    }
    block = layout.encode_producer_id_block(1000, 0, 999)
    assert json.loads(block) == {
        "version": 1,
        "broker": 1000,
        "block_start": "0",
        "block_end": "999",
    }
    assert layout.decode_producer_id_block(block) == (1000, 0, 999)


@pytest.mark.parametrize(
    "decoder, data",
    [
        (layout.decode_config, b'{"version":1,"config":{"a":1}}'),
        (layout.decode_config, b'{"version":1}'),
        (layout.decode_controller_epoch, b"x"),
        (layout.decode_controller, b'{"brokerid":"1"}'),
        (layout.decode_producer_id_block, b'{"broker":1,"block_start":"a","block_end":"9"}'),
    ],
)
def test_malformed_small_documents(decoder, data):
    with pytest.raises(MalformedMetadataError):
        decoder(data)
