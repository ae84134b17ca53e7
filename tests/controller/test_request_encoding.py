"""`request_encoding`: controller request values -> wire requests of every version -> bytes ->
decoded -> back to values, losing only what a version cannot say."""

from __future__ import annotations

import uuid
from dataclasses import replace

import pytest

from odradek.controller.commands import (
    AlterPartitionResult,
    LeaderAndIsrPartition,
    LeaderAndIsrRequest,
    LiveBroker,
    StopReplicaPartition,
    StopReplicaRequest,
    UpdateMetadataPartition,
    UpdateMetadataRequest,
)
from odradek.controller.request_encoding import (
    SharedBodies,
    alter_partition_items,
    api_key_of,
    encode,
    encode_alter_partition,
    encode_alter_partition_response,
    encode_leader_and_isr,
    leader_and_isr_partitions,
    stop_replica_partitions,
    update_metadata_partitions,
)
from odradek.metadata.layout import ZERO_UUID, BrokerInfo, Endpoint
from odradek.protocol import codec
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.generated.error_codes import ErrorCode
from odradek.protocol.generated.request_header import RequestHeader
from odradek.protocol.generated import leader_and_isr_request as lai
from odradek.protocol.generated import update_metadata_request as umr
from odradek.protocol.generated.response_header import ResponseHeader
from odradek.protocol.primitives import EncodeBuffer

IDS = {"a": uuid.UUID(int=1), "b": uuid.UUID(int=2)}
BROKER = LiveBroker(1, 10, BrokerInfo(1, (Endpoint("PLAINTEXT", "h1", 9092),
                                          Endpoint("REPL", "r1", 9093)), "rack-1"))


def wire_roundtrip(api_key: int, version: int, body):
    frame = codec.encode_request(RequestHeader(api_key, version, 7, "test"), body)
    header, decoded = codec.decode_request(frame)
    assert (header.request_api_key, header.request_api_version) == (api_key, version)
    return decoded


LAI = LeaderAndIsrRequest(
    2, 1, 5, 99,
    (
        LeaderAndIsrPartition("a", 0, 5, 1, 3, (1, 2), 7, (1, 2, 3), (3,), (), True),
        LeaderAndIsrPartition("b", 1, 4, 2, 0, (2,), 0, (2, 1)),
        LeaderAndIsrPartition("a", 2, 5, 1, 1, (1,), 2, (1,)),
    ),
    (BROKER,),
    tuple(IDS.items()),
)


@pytest.mark.parametrize("version", range(0, 8))
def test_leader_and_isr_every_version(version):
    body = wire_roundtrip(ApiKey.LEADER_AND_ISR, version, encode(LAI, version))
    assert body.controller_id == 1 and body.controller_epoch == 5
    assert body.broker_epoch == (99 if version >= 2 else -1)
    assert [(b.broker_id, b.host_name, b.port) for b in body.live_leaders] == [(1, "h1", 9092)]
    got = leader_and_isr_partitions(body, version)
    expected = []
    for p in LAI.partition_states:
        if version < 3:
            p = replace(p, adding_replicas=(), removing_replicas=())
        if version < 1:
            p = replace(p, is_new=False)
        expected.append((p, IDS[p.topic] if version >= 5 else ZERO_UUID))
    assert sorted(got, key=lambda x: (x[0].topic, x[0].partition)) == sorted(
        expected, key=lambda x: (x[0].topic, x[0].partition))
    assert api_key_of(LAI) == ApiKey.LEADER_AND_ISR


UMR = UpdateMetadataRequest(
    3, 1, 5, 42,
    (UpdateMetadataPartition("a", 0, 5, 1, 3, (1, 2), 7, (1, 2, 3), (3,)),
     UpdateMetadataPartition("b", 0, 5, -2, 0, (), 1, (2,))),
    (BROKER, LiveBroker(2, 11, BrokerInfo(2, (Endpoint("PLAINTEXT", "h2", 9094),)))),
    tuple(IDS.items()),
)


@pytest.mark.parametrize("version", range(0, 9))
def test_update_metadata_every_version(version):
    body = wire_roundtrip(ApiKey.UPDATE_METADATA, version, encode(UMR, version))
    got = update_metadata_partitions(body, version)
    expected = [p if version >= 4 else replace(p, offline_replicas=()) for p in UMR.partition_states]
    assert sorted(got, key=lambda p: p.topic) == expected
    first = body.live_brokers[0]
    if version == 0:
        assert (first.v0_host, first.v0_port) == ("h1", 9092)
    else:
        names = [e.listener for e in first.endpoints] if version >= 3 else None
        assert [(e.host, e.port) for e in first.endpoints] == [("h1", 9092), ("r1", 9093)]
        if names is not None:
            assert names == ["PLAINTEXT", "REPL"]
    if version >= 2:
        assert first.rack == "rack-1"
    if version >= 7:
        assert {t.topic_name: t.topic_id for t in body.topic_states} == IDS


@pytest.mark.parametrize("version", range(0, 5))
@pytest.mark.parametrize("delete", [True, False])
def test_stop_replica_every_version(version, delete):
    request = StopReplicaRequest(
        2, 1, 5, 42, tuple(StopReplicaPartition(t, p, 4, delete) for t, p in
                           [("a", 0), ("a", 1), ("b", 0)]))
    body = wire_roundtrip(ApiKey.STOP_REPLICA, version, encode(request, version))
    got = stop_replica_partitions(body, version)
    expected = [p if version >= 3 else replace(p, leader_epoch=-1) for p in request.partitions]
    assert sorted(got, key=lambda p: (p.topic, p.partition)) == expected


@pytest.mark.parametrize("version", range(0, 4))
def test_alter_partition_request_and_response(version):
    items = [(("a", 0), 3, (1, 2), 7), (("a", 1), 3, (1,), 2), (("b", 0), 1, (2, 1), 0)]
    request = encode_alter_partition(1, 55, items, version, IDS, {1: 10, 2: 11})
    body = wire_roundtrip(ApiKey.ALTER_PARTITION, version, request)
    by_id = {v: k for k, v in IDS.items()}
    got, unknown = alter_partition_items(body, version, by_id.get)
    assert (got, unknown) == (items, [])
    if version >= 3:
        assert body.topics[0].partitions[0].new_isr_with_epochs[1].broker_epoch == 11
    if version >= 2:
        _, unknown = alter_partition_items(body, version, lambda _: None)
        assert len(unknown) == 3
    results = [AlterPartitionResult("a", 0, ErrorCode.NONE, 1, 3, (1, 2), 8),
               AlterPartitionResult("b", 0, ErrorCode.FENCED_LEADER_EPOCH)]
    response = encode_alter_partition_response(ErrorCode.NONE, results, version, IDS)
    frame = codec.encode_response(ApiKey.ALTER_PARTITION, version, ResponseHeader(1), response)
    _, decoded = codec.decode_response(ApiKey.ALTER_PARTITION, version, frame)
    a0 = decoded.topics[0].partitions[0]
    assert (a0.leader_id, a0.leader_epoch, list(a0.isr), a0.partition_epoch) == (1, 3, [1, 2], 8)
    assert decoded.topics[1].partitions[0].error_code == ErrorCode.FENCED_LEADER_EPOCH
    if version >= 2:
        assert decoded.topics[0].topic_id == IDS["a"]
    else:
        assert decoded.topics[0].topic_name == "a"


def _per_broker_requests(request) -> list:
    """One drain's request to three brokers: the same partition state objects (as
    `RequestBatch` shares them), each broker with its own id and epoch."""
    return [replace(request, broker_id=b, broker_epoch=epoch) for b, epoch in ((1, 42), (2, 7), (3, -1))]


def _encoded_alone(request, version: int) -> bytes:
    out = EncodeBuffer()
    module = lai if isinstance(request, LeaderAndIsrRequest) else umr
    module.WRITERS[version](encode_leader_and_isr(request, version, "REPL") if module is lai
                            else encode(request, version), out)
    return bytes(out)


SHARED_CASES = [(UMR, v) for v in range(0, 9)] + [(LAI, v) for v in range(0, 8)]


@pytest.mark.parametrize("request_value,version", SHARED_CASES,
                         ids=[f"{type(r).__name__}-v{v}" for r, v in SHARED_CASES])
def test_shared_bodies_are_each_brokers_own_encoding(request_value, version):
    api_key = api_key_of(request_value)
    bodies = SharedBodies("REPL")
    for request in _per_broker_requests(request_value):
        body = bodies.body(request, version)
        assert body == _encoded_alone(request, version)
        decoded = codec.decode_request_body(RequestHeader(api_key, version, 7, "c"), body, 0)
        has_epoch = version >= (5 if api_key == ApiKey.UPDATE_METADATA else 2)
        assert decoded.broker_epoch == (request.broker_epoch if has_epoch else -1)
    # another drain's states (one partition's leader moved) are encoded anew, not reused
    states = request_value.partition_states
    moved = replace(request_value, partition_states=(replace(states[0], leader=2),) + states[1:])
    assert bodies.body(moved, version) == _encoded_alone(moved, version)
    for changed in (replace(request_value, controller_epoch=6), replace(request_value, controller_id=9),
                    replace(request_value, topic_ids=()),
                    replace(request_value, **{"live_leaders" if api_key == ApiKey.LEADER_AND_ISR
                                              else "live_brokers": ()})):
        assert bodies.body(changed, version) == _encoded_alone(changed, version)
        bodies.body(request_value, version)  # the last one encoded is the original again


@pytest.mark.parametrize("request_value,version", [(UMR, 4), (UMR, 8), (LAI, 1), (LAI, 7)])
def test_shared_bodies_encode_one_drains_states_once(request_value, version, monkeypatch):
    calls = []
    module = lai if isinstance(request_value, LeaderAndIsrRequest) else umr
    writers = list(module.WRITERS)
    writer = writers[version]
    writers[version] = lambda o, w: (calls.append(o.broker_epoch), writer(o, w))
    monkeypatch.setattr(module, "WRITERS", tuple(writers))
    bodies = SharedBodies()
    for request in _per_broker_requests(request_value):
        bodies.body(request, version)
    assert len(calls) == 1
