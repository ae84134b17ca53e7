"""The controller's request values (`commands`) as wire requests, and back.

`encode(request, version)` turns a `commands.LeaderAndIsrRequest`, `UpdateMetadataRequest` or
`StopReplicaRequest` into the generated request object of that API at ``version`` (any
version of the spec range: the layout differs by version, as Kafka's request builders do):

* LeaderAndIsr: v0-1 list partitions flat (``ungrouped_partition_states``), v2+ group them by
  topic, v5+ with the topic id. The partition's znode version travels as ``partition_epoch``
  (Kafka's ``ZkVersion``, renamed).
* UpdateMetadata: v0-4 flat, v5+ by topic, v7+ with topic ids; brokers as ``v0_host`` /
  ``v0_port`` in v0, endpoints from v1, listener names from v3, racks from v2.
* StopReplica: v0 flat with one ``delete_partitions`` flag, v1-2 by topic with that flag, v3+
  per partition leader epoch and delete flag. A request mixing delete and non-delete partitions
  cannot be said in v0-2: `encode` raises ValueError (the controller sends them separately
  in Kafka; ours groups them, so the channel picks v3+ whenever the broker has it).

`SharedBodies` encodes LeaderAndIsr and UpdateMetadata bodies to bytes once for all the
target brokers of one controller event (they differ only in the broker epoch, see there).

The reverse helpers (`leader_and_isr_partitions`, `stop_replica_partitions`,
`update_metadata_partitions`) flatten a decoded request of any version into the values of
`commands`, for the brokers' handlers; `alter_partition_items` does the same for an
AlterPartition request at the controller, and `encode_alter_partition` builds one for the
leaders' sender.
"""

from __future__ import annotations

import struct
import uuid
from collections.abc import Callable, Iterable, Mapping

from odradek.controller.commands import (
    AlterPartitionResult,
    BrokerRequest,
    LeaderAndIsrPartition,
    LeaderAndIsrRequest,
    LiveBroker,
    StopReplicaPartition,
    StopReplicaRequest,
    TopicPartition,
    UpdateMetadataPartition,
    UpdateMetadataRequest,
)
from odradek.metadata.layout import ZERO_UUID, BrokerInfo
from odradek.protocol.generated import alter_partition_request as apq
from odradek.protocol.generated import alter_partition_response as aps
from odradek.protocol.generated import leader_and_isr_request as lai
from odradek.protocol.generated import stop_replica_request as srq
from odradek.protocol.generated import update_metadata_request as umr
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.primitives import EncodeBuffer

SECURITY_PROTOCOL_IDS = {"PLAINTEXT": 0, "SSL": 1, "SASL_PLAINTEXT": 2, "SASL_SSL": 3}
"""Kafka's ``SecurityProtocol`` ids, as UpdateMetadata carries them."""


def api_key_of(request: BrokerRequest) -> int:
    """The API key of a controller request value."""
    if isinstance(request, LeaderAndIsrRequest):
        return ApiKey.LEADER_AND_ISR
    if isinstance(request, UpdateMetadataRequest):
        return ApiKey.UPDATE_METADATA
    if isinstance(request, StopReplicaRequest):
        return ApiKey.STOP_REPLICA
    raise TypeError(f"not a controller request: {request!r}")


def encode(request: BrokerRequest, version: int):
    """The generated wire request of ``request`` at ``version`` (see the module docstring)."""
    if isinstance(request, LeaderAndIsrRequest):
        return encode_leader_and_isr(request, version)
    if isinstance(request, UpdateMetadataRequest):
        return encode_update_metadata(request, version)
    if isinstance(request, StopReplicaRequest):
        return encode_stop_replica(request, version)
    raise TypeError(f"not a controller request: {request!r}")


def _by_topic(items: Iterable, topic_of: Callable) -> dict[str, list]:
    out: dict[str, list] = {}
    for item in items:
        out.setdefault(topic_of(item), []).append(item)
    return out


# -- LeaderAndIsr -----------------------------------------------------------------------------


def _leader_and_isr_state(p: LeaderAndIsrPartition, version: int) -> lai.LeaderAndIsrPartitionState:
    return lai.LeaderAndIsrPartitionState(
        topic_name=p.topic if version < 2 else "",
        partition_index=p.partition,
        controller_epoch=p.controller_epoch,
        leader=p.leader,
        leader_epoch=p.leader_epoch,
        isr=list(p.isr),
        partition_epoch=p.zk_version,
        replicas=list(p.replicas),
        adding_replicas=list(p.adding_replicas),
        removing_replicas=list(p.removing_replicas),
        is_new=p.is_new,
    )


def _live_leader(broker: LiveBroker, listener: str | None) -> lai.LeaderAndIsrLiveLeader:
    endpoint = _endpoint(broker.info, listener)
    return lai.LeaderAndIsrLiveLeader(
        broker.broker_id, endpoint.host if endpoint else "", endpoint.port if endpoint else -1
    )


def _endpoint(info: BrokerInfo | None, listener: str | None):
    if info is None or not info.endpoints:
        return None
    return (info.endpoint(listener) if listener else None) or info.endpoints[0]


def _topic_states(partitions, states, topic_ids: dict, topic_state) -> list:
    """The wire ``states`` of ``partitions`` grouped per topic (the layout of LeaderAndIsr v2+
    and UpdateMetadata v5+), each group a ``topic_state`` with the topic's id (zero if none)."""
    grouped = _by_topic(zip(partitions, states), lambda pair: pair[0].topic)
    return [topic_state(topic_name=topic, topic_id=topic_ids.get(topic, ZERO_UUID),
                        partition_states=[s for _, s in pairs])
            for topic, pairs in grouped.items()]


def encode_leader_and_isr(
    request: LeaderAndIsrRequest, version: int, listener: str | None = None
) -> lai.LeaderAndIsrRequest:
    """``listener`` picks the live leaders' endpoint (default: their first)."""
    out = lai.LeaderAndIsrRequest(
        controller_id=request.controller_id,
        controller_epoch=request.controller_epoch,
        broker_epoch=request.broker_epoch,
        live_leaders=[_live_leader(b, listener) for b in request.live_leaders],
    )
    states = [_leader_and_isr_state(p, version) for p in request.partition_states]
    if version < 2:
        out.ungrouped_partition_states = states
        return out
    out.topic_states = _topic_states(request.partition_states, states, dict(request.topic_ids),
                                     lai.LeaderAndIsrTopicState)
    return out


def leader_and_isr_partitions(
    request: lai.LeaderAndIsrRequest, version: int
) -> list[tuple[LeaderAndIsrPartition, uuid.UUID]]:
    """Every partition state of a decoded LeaderAndIsr request with its topic's id (the zero
    UUID before v5), whatever the version's layout."""
    out = []
    if version < 2:
        pairs = [(s.topic_name, ZERO_UUID, s) for s in request.ungrouped_partition_states]
    else:
        pairs = [
            (t.topic_name, t.topic_id, s) for t in request.topic_states for s in t.partition_states
        ]
    for topic, topic_id, s in pairs:
        value = LeaderAndIsrPartition(
            topic, s.partition_index, s.controller_epoch, s.leader, s.leader_epoch,
            tuple(s.isr), s.partition_epoch, tuple(s.replicas), tuple(s.adding_replicas),
            tuple(s.removing_replicas), bool(s.is_new),
        )
        out.append((value, topic_id))
    return out


# -- UpdateMetadata ---------------------------------------------------------------------------


def _update_metadata_state(p: UpdateMetadataPartition, version: int):
    return umr.UpdateMetadataPartitionState(
        topic_name=p.topic if version < 5 else "",
        partition_index=p.partition,
        controller_epoch=p.controller_epoch,
        leader=p.leader,
        leader_epoch=p.leader_epoch,
        isr=list(p.isr),
        zk_version=p.zk_version,
        replicas=list(p.replicas),
        offline_replicas=list(p.offline_replicas),
    )


def _update_metadata_broker(broker: LiveBroker, version: int) -> umr.UpdateMetadataBroker:
    info = broker.info
    endpoints = info.endpoints if info is not None else ()
    out = umr.UpdateMetadataBroker(id=broker.broker_id, rack=info.rack if info else None)
    if version == 0:
        plain = next((e for e in endpoints if e.security_protocol == "PLAINTEXT"), None)
        out.v0_host, out.v0_port = (plain.host, plain.port) if plain else ("", -1)
        return out
    out.endpoints = [
        umr.UpdateMetadataEndpoint(
            port=e.port,
            host=e.host,
            listener=e.listener,
            security_protocol=SECURITY_PROTOCOL_IDS.get(e.security_protocol, 0),
        )
        for e in endpoints
    ]
    return out


def encode_update_metadata(request: UpdateMetadataRequest, version: int) -> umr.UpdateMetadataRequest:
    out = umr.UpdateMetadataRequest(
        controller_id=request.controller_id,
        controller_epoch=request.controller_epoch,
        broker_epoch=request.broker_epoch,
        live_brokers=[_update_metadata_broker(b, version) for b in request.live_brokers],
    )
    states = [_update_metadata_state(p, version) for p in request.partition_states]
    if version < 5:
        out.ungrouped_partition_states = states
        return out
    out.topic_states = _topic_states(request.partition_states, states, dict(request.topic_ids),
                                     umr.UpdateMetadataTopicState)
    return out


BROKER_EPOCH_AT = {
    ApiKey.LEADER_AND_ISR: {2: 8, 3: 8, 4: 8, 5: 8, 6: 8, 7: 9},
    ApiKey.UPDATE_METADATA: {5: 8, 6: 8, 7: 8, 8: 9},
}
"""Where a LeaderAndIsr or UpdateMetadata body holds its int64 ``broker_epoch``, by version:
they begin with controller_id int32, controller_epoch int32, broker_epoch int64, except
LeaderAndIsr v7 and UpdateMetadata v8, which put is_k_raft_controller (one boolean byte) after
controller_id. LeaderAndIsr v0-1 and UpdateMetadata v0-4 carry no broker epoch."""

_INT64 = struct.Struct(">q")

_SHARED_FIELDS = {
    LeaderAndIsrRequest: ("controller_id", "controller_epoch", "live_leaders", "topic_ids", "partition_states"),
    UpdateMetadataRequest: ("controller_id", "controller_epoch", "live_brokers", "topic_ids", "partition_states"),
}
"""The fields whose equality makes two requests' bodies equal but for the broker epoch (all
but ``broker_id`` and ``broker_epoch``; the partition states last: the longest to compare)."""


class SharedBodies:
    """LeaderAndIsr and UpdateMetadata bodies as bytes at a version, encoded once for all the
    brokers of one controller event.

    `RequestBatch.drain` makes one request per target broker (Kafka's
    ``ControllerChannelManager`` also builds one per broker). UpdateMetadata goes to every live
    broker with the same partition states; so does LeaderAndIsr when every broker holds a
    replica of every partition (a creation or a failover with replication factor = brokers).
    Their wire bodies then differ only in ``broker_epoch``. At 10,000 partitions encoding an
    UpdateMetadata costs ~45 ms of the controller broker's event loop (CPU, measured here), a
    LeaderAndIsr about as much, and that was paid for every target broker of every event;
    three brokers sharing one encoding: 0.129 s -> 0.035 s.

    `body` keeps, per API and version, the last request it encoded with its bytes: a request
    equal to it in `_SHARED_FIELDS` gets those bytes with its own broker epoch written at
    `BROKER_EPOCH_AT` (nothing to write in versions without one). The bytes are exactly what
    encoding the request itself gives (checked against the generated writers for every version
    in ``tests/controller/test_request_encoding.py``). Comparing is cheap when the batch shares
    the partition state objects among its brokers (``RequestBatch`` does): tuple equality stops
    at identity. Use from one thread at a time (the channel manager's loop)."""

    def __init__(self, listener: str | None = None) -> None:
        self.listener = listener  # picks LeaderAndIsr's live leaders' endpoints
        self._last: dict[tuple[int, int], tuple[BrokerRequest, bytes]] = {}

    def body(self, request: LeaderAndIsrRequest | UpdateMetadataRequest, version: int) -> bytes:
        """The wire body of ``request`` at ``version`` (no request header, no size)."""
        api_key = api_key_of(request)
        last = self._last.get((api_key, version))
        if last is not None and _same_but_target(last[0], request):
            return _with_broker_epoch(last[1], BROKER_EPOCH_AT[api_key].get(version), request.broker_epoch)
        out = EncodeBuffer()
        if api_key == ApiKey.LEADER_AND_ISR:
            lai.WRITERS[version](encode_leader_and_isr(request, version, self.listener), out)
        else:
            umr.WRITERS[version](encode_update_metadata(request, version), out)
        body = bytes(out)
        self._last[(api_key, version)] = (request, body)
        return body


def _same_but_target(a: BrokerRequest, b: BrokerRequest) -> bool:
    return type(a) is type(b) and all(getattr(a, f) == getattr(b, f) for f in _SHARED_FIELDS[type(a)])


def _with_broker_epoch(body: bytes, at: int | None, broker_epoch: int) -> bytes:
    if at is None:
        return body
    return b"".join((body[:at], _INT64.pack(broker_epoch), body[at + 8:]))


def update_metadata_partitions(
    request: umr.UpdateMetadataRequest, version: int
) -> list[UpdateMetadataPartition]:
    """Every partition state of a decoded UpdateMetadata request, whatever its layout."""
    if version < 5:
        pairs = [(s.topic_name, s) for s in request.ungrouped_partition_states]
    else:
        pairs = [(t.topic_name, s) for t in request.topic_states for s in t.partition_states]
    return [
        UpdateMetadataPartition(
            topic, s.partition_index, s.controller_epoch, s.leader, s.leader_epoch,
            tuple(s.isr), s.zk_version, tuple(s.replicas), tuple(s.offline_replicas),
        )
        for topic, s in pairs
    ]


# -- StopReplica ------------------------------------------------------------------------------


def encode_stop_replica(request: StopReplicaRequest, version: int) -> srq.StopReplicaRequest:
    out = srq.StopReplicaRequest(
        controller_id=request.controller_id,
        controller_epoch=request.controller_epoch,
        broker_epoch=request.broker_epoch,
    )
    grouped = _by_topic(request.partitions, lambda p: p.topic)
    if version >= 3:
        out.topic_states = [
            srq.StopReplicaTopicState(
                topic_name=topic,
                partition_states=[
                    srq.StopReplicaPartitionState(p.partition, p.leader_epoch, p.delete_partition)
                    for p in parts
                ],
            )
            for topic, parts in grouped.items()
        ]
        return out
    flags = {p.delete_partition for p in request.partitions}
    if len(flags) > 1:
        raise ValueError(f"StopReplica v{version} cannot mix deleting and keeping partitions")
    out.delete_partitions = flags == {True}
    if version == 0:
        out.ungrouped_partitions = [
            srq.StopReplicaPartitionV0(p.topic, p.partition) for p in request.partitions
        ]
    else:
        out.topics = [
            srq.StopReplicaTopicV1(topic, [p.partition for p in parts])
            for topic, parts in grouped.items()
        ]
    return out


def stop_replica_partitions(request: srq.StopReplicaRequest, version: int) -> list[StopReplicaPartition]:
    """Every partition of a decoded StopReplica request with its leader epoch (-1, "any",
    before v3) and delete flag, whatever its layout."""
    if version >= 3:
        return [
            StopReplicaPartition(t.topic_name, s.partition_index, s.leader_epoch, s.delete_partition)
            for t in request.topic_states
            for s in t.partition_states
        ]
    delete = bool(request.delete_partitions)
    if version == 0:
        pairs = [(p.topic_name, p.partition_index) for p in request.ungrouped_partitions]
    else:
        pairs = [(t.name, i) for t in request.topics for i in t.partition_indexes]
    return [StopReplicaPartition(topic, index, -1, delete) for topic, index in pairs]


# -- AlterPartition ---------------------------------------------------------------------------

AlterItem = tuple[TopicPartition, int, tuple[int, ...], int]
"""``(partition, leader_epoch, new_isr, zk_version)``, as `events.AlterPartition` holds them."""


def encode_alter_partition(
    broker_id: int,
    broker_epoch: int,
    items: Iterable[AlterItem],
    version: int,
    topic_ids: Mapping[str, uuid.UUID] | None = None,
    broker_epochs: Mapping[int, int] | None = None,
) -> apq.AlterPartitionRequest:
    """An AlterPartition request from leader ``broker_id``: v0-1 name topics, v2+ give their
    ids (``topic_ids``); v3+ give each ISR member's broker epoch (``broker_epochs``, -1 when
    unknown)."""
    out = apq.AlterPartitionRequest(broker_id=broker_id, broker_epoch=broker_epoch)
    for topic, entries in _by_topic(items, lambda item: item[0][0]).items():
        data = apq.TopicData()
        if version >= 2:
            data.topic_id = (topic_ids or {}).get(topic, ZERO_UUID)
        else:
            data.topic_name = topic
        for (_, partition), leader_epoch, isr, zk_version in entries:
            p = apq.PartitionData(
                partition_index=partition, leader_epoch=leader_epoch, partition_epoch=zk_version
            )
            if version >= 3:
                p.new_isr_with_epochs = [
                    apq.BrokerState(b, (broker_epochs or {}).get(b, -1)) for b in isr
                ]
            else:
                p.new_isr = list(isr)
            data.partitions.append(p)
        out.topics.append(data)
    return out


def alter_partition_items(
    request: apq.AlterPartitionRequest,
    version: int,
    topic_name: Callable[[uuid.UUID], str | None],
) -> tuple[list[AlterItem], list[tuple[uuid.UUID, str, int]]]:
    """The entries of a decoded AlterPartition request, and those whose topic id is unknown
    (``topic_name`` resolves ids from v2 on) as ``(topic_id, "", partition)``."""
    items: list[AlterItem] = []
    unknown: list[tuple[uuid.UUID, str, int]] = []
    for t in request.topics:
        name = t.topic_name if version < 2 else topic_name(t.topic_id)
        for p in t.partitions:
            if name is None:
                unknown.append((t.topic_id, "", p.partition_index))
                continue
            isr = (
                tuple(b.broker_id for b in p.new_isr_with_epochs) if version >= 3
                else tuple(p.new_isr)
            )
            items.append(((name, p.partition_index), p.leader_epoch, isr, p.partition_epoch))
    return items, unknown


def encode_alter_partition_response(
    error: int,
    results: Iterable[AlterPartitionResult],
    version: int,
    topic_ids: Mapping[str, uuid.UUID] | None = None,
) -> aps.AlterPartitionResponse:
    """The answer to an AlterPartition: v0-1 by topic name, v2+ by topic id."""
    out = aps.AlterPartitionResponse(error_code=int(error))
    for topic, entries in _by_topic(results, lambda r: r.topic).items():
        data = aps.TopicData()
        if version >= 2:
            data.topic_id = (topic_ids or {}).get(topic, ZERO_UUID)
        else:
            data.topic_name = topic
        data.partitions = [
            aps.PartitionData(
                partition_index=r.partition,
                error_code=int(r.error),
                leader_id=r.leader,
                leader_epoch=r.leader_epoch,
                isr=list(r.isr),
                partition_epoch=r.zk_version,
            )
            for r in entries
        ]
        out.topics.append(data)
    return out
