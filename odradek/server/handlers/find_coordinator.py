"""FindCoordinator (key 10): which broker coordinates a group (or a transactional id).

A group's coordinator is the leader of its ``__consumer_offsets`` partition, a transactional
id's (key type 1) the leader of its ``__transaction_state`` partition (Java's
``String.hashCode`` of the key, made non-negative, modulo the partition count: see
``coordinator.partitioner``). The topic is created by the first FindCoordinator, as
Kafka does: ``offsets.topic.num.partitions`` partitions, replication factor
``offsets.topic.replication.factor`` capped at the live brokers, ``cleanup.policy=compact``
and ``segment.bytes=offsets.topic.segment.bytes`` (``transaction.state.log.*`` likewise for
``__transaction_state``, with its ``min.insync.replicas``); the creation waits (a bounded while,
``topics.AUTO_CREATE_WAIT_MS``) until the controller gave its partitions leaders; the request
waits for it at most ``INTERNAL_TOPIC_WAIT_S`` and answers COORDINATOR_NOT_AVAILABLE (the
client asks again) when they are not there by then. When this
broker leads the partition it starts loading it right away, so the client's JoinGroup rarely
meets COORDINATOR_LOAD_IN_PROGRESS.

The metadata image can name this broker as the partition's leader before its own
LeaderAndIsr has made it so (a few hundred ms after the topic's creation). Naming itself then
would send the client's next group request (OffsetFetch, ConsumerGroupHeartbeat) to a broker
that answers NOT_COORDINATOR, which librdkafka hands to the application as a consumer error.
So this broker names itself only once its replica manager leads the partition: it waits for
that (as long as for the topic's creation) and answers COORDINATOR_NOT_AVAILABLE when it does
not come, or the leader the image names meanwhile when leadership moves elsewhere.

v0-v3 ask for one key and answer in the top-level fields; v4+ batch keys (KIP-699) and answer
one ``Coordinator`` per key. A share-partition (key type 2, KIP-932, brokers' Persisters) is
asked as ``"group:topicId:partition"`` and authorized with CLUSTER_ACTION; its coordinator
leads the key's ``__share_group_state`` partition (``coordinator/share/share_partition_key.py``;
``share.coordinator.state.topic.*`` as above, with its ``min.insync.replicas``); a malformed key
gets INVALID_REQUEST. The handler is a coroutine because creating the topic writes metadata off
the event loop.
"""

from __future__ import annotations

import asyncio
import weakref

from odradek.coordinator.group.group_config import OFFSETS_TOPIC
from odradek.coordinator.partitioner import partition_for
from odradek.coordinator.share.share_partition_key import SHARE_GROUP_STATE_TOPIC, parse_key
from odradek.coordinator.transaction.transaction_config import TRANSACTION_STATE_TOPIC
from odradek.protocol.generated.error_codes import ErrorCode
from odradek.protocol.generated.find_coordinator_response import (
    Coordinator,
    FindCoordinatorResponse,
)
from odradek.protocol import acl_binding as acl
from odradek.server import authorize
from odradek.server.topics import TopicError

GROUP, TRANSACTION, SHARE = 0, 1, 2
# How long a request waits for an internal topic being created before it answers
# COORDINATOR_NOT_AVAILABLE (the creation goes on; a client retries well within this).
INTERNAL_TOPIC_WAIT_S = 5.0
# How often a request waiting for this broker's own LeaderAndIsr (``_settled_leader``) looks.
LOCAL_LEADERSHIP_POLL_S = 0.01

# broker -> {internal topic: its creating task}: FindCoordinators that arrive meanwhile wait
# for the same task, and a client that disconnects cannot cancel it halfway (the topic would
# exist without a leader).
_creating: weakref.WeakKeyDictionary[object, dict[str, asyncio.Task]] = weakref.WeakKeyDictionary()


async def handle(ctx, request):
    keys = request.coordinator_keys if ctx.api_version >= 4 else [request.key]
    found = [await _find(ctx, request.key_type, key) for key in keys]
    if ctx.api_version >= 4:
        return FindCoordinatorResponse(throttle_time_ms=0, coordinators=found)
    c = found[0]
    return FindCoordinatorResponse(throttle_time_ms=0, error_code=c.error_code, error_message=c.error_message,
                                   node_id=c.node_id, host=c.host, port=c.port)


def _failed(key: str, error: ErrorCode, message: str | None = None) -> Coordinator:
    return Coordinator(key=key, node_id=-1, host="", port=-1, error_code=error, error_message=message)


async def _find(ctx, key_type: int, key: str) -> Coordinator:
    if key_type not in (GROUP, TRANSACTION, SHARE):
        return _failed(key, ErrorCode.INVALID_REQUEST, f"unknown coordinator key type {key_type}")
    if key_type == SHARE:  # Kafka: CLUSTER_ACTION, the key must parse
        if not authorize.allowed_cluster(ctx, acl.CLUSTER_ACTION):
            return _failed(key, ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
        if parse_key(key) is None:
            return _failed(key, ErrorCode.INVALID_REQUEST, f"invalid share-partition key {key!r}")
    # Kafka: DESCRIBE on the group or the transactional id the key names
    if key_type == TRANSACTION and not authorize.allowed(ctx, acl.DESCRIBE, acl.TRANSACTIONAL_ID, key):
        return _failed(key, ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
    if key_type == GROUP and not authorize.allowed(ctx, acl.DESCRIBE, acl.GROUP, key):
        return _failed(key, ErrorCode.GROUP_AUTHORIZATION_FAILED)
    broker = ctx.broker
    if key_type == TRANSACTION:
        coordinator, topic_name = broker.txn_coordinator, TRANSACTION_STATE_TOPIC
    elif key_type == SHARE:
        coordinator, topic_name = getattr(broker, "share_coordinator", None), SHARE_GROUP_STATE_TOPIC
    else:
        coordinator, topic_name = broker.group_coordinator, OFFSETS_TOPIC
    if coordinator is None:
        return _failed(key, ErrorCode.COORDINATOR_NOT_AVAILABLE)
    image, error = await ensure_internal_topic(broker, topic_name)
    topic = image.topic(topic_name)
    if topic is None:
        return _failed(key, error)
    p = partition_for(key, len(topic.partitions))
    leader = await _settled_leader(broker, topic_name, p)
    info = broker.metadata_image().broker(leader) if leader is not None else None
    if info is None:
        return _failed(key, ErrorCode.COORDINATOR_NOT_AVAILABLE)
    if leader == broker.broker_id:
        coordinator.prepare(p)
    endpoint = next((e for e in info.endpoints if e.listener == ctx.connection.listener_name), info.endpoints[0])
    return Coordinator(key=key, node_id=leader, host=endpoint.host, port=endpoint.port,
                       error_code=ErrorCode.NONE, error_message=None)


async def _settled_leader(broker, topic_name: str, p: int) -> int | None:
    """The leader of ``topic_name``-``p`` the image names, once this broker agrees: another
    broker at once; this broker only when its replica manager leads the partition (polled
    every ``LOCAL_LEADERSHIP_POLL_S`` for at most ``INTERNAL_TOPIC_WAIT_S``). None when the
    image names no leader, or names this broker and it never became the leader."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + INTERNAL_TOPIC_WAIT_S
    while True:
        leader = broker.metadata_image().leader(topic_name, p)
        if leader != broker.broker_id:
            return leader if leader >= 0 else None
        part = broker.replica_manager.get(topic_name, p)
        if part is not None and part.is_leader(broker.broker_id):
            return leader
        if loop.time() >= deadline:
            return None
        await asyncio.sleep(LOCAL_LEADERSHIP_POLL_S)


async def ensure_internal_topic(broker, topic_name: str):
    """``(metadata image, error)``: the image once ``topic_name`` (``__consumer_offsets`` or
    ``__transaction_state``) exists, creating it first when it does not (one creation at a
    time per broker and topic; the error says why it is not there)."""
    image = broker.metadata_image()
    if image.topic(topic_name) is not None:
        return image, ErrorCode.NONE
    creating = _creating.setdefault(broker, {})
    task = creating.get(topic_name)
    if task is None or task.done():
        task = creating[topic_name] = asyncio.ensure_future(_create_internal_topic(broker, topic_name))
        broker.track(task)
    try:
        error = await asyncio.wait_for(asyncio.shield(task), INTERNAL_TOPIC_WAIT_S)
    except TimeoutError:  # still creating: the client asks again (Kafka answers so at once)
        error = ErrorCode.COORDINATOR_NOT_AVAILABLE
    return broker.metadata_image(), error


def _internal_topic_spec(broker, topic_name: str) -> tuple[int, int, dict[str, str]]:
    """``(partitions, replication factor, configs)`` of an internal topic, as Kafka makes it:
    compacted, the replication factor capped at the live brokers (Kafka refuses instead), and
    for ``__transaction_state`` its ``min.insync.replicas`` (capped at that factor)."""
    config = broker.config
    live = len(broker.metadata.alive_brokers.of(broker.metadata_image().brokers))
    if topic_name == SHARE_GROUP_STATE_TOPIC:  # Kafka's ShareCoordinatorService.shareGroupStateTopicConfigs
        rf = max(1, min(config["share.coordinator.state.topic.replication.factor"], live))
        return config["share.coordinator.state.topic.num.partitions"], rf, {
            "cleanup.policy": "compact",
            "segment.bytes": str(config["share.coordinator.state.topic.segment.bytes"]),
            "compression.type": "producer",
            "min.insync.replicas": str(min(config["share.coordinator.state.topic.min.isr"], rf)),
        }
    if topic_name == TRANSACTION_STATE_TOPIC:
        rf = max(1, min(config["transaction.state.log.replication.factor"], live))
        return config["transaction.state.log.num.partitions"], rf, {
            "cleanup.policy": "compact",
            "segment.bytes": str(config["transaction.state.log.segment.bytes"]),
            "compression.type": "producer",
            "min.insync.replicas": str(min(config["transaction.state.log.min.isr"], rf)),
            "unclean.leader.election.enable": "false",
        }
    rf = max(1, min(config["offsets.topic.replication.factor"], live))
    return config["offsets.topic.num.partitions"], rf, {
        "cleanup.policy": "compact",
        "segment.bytes": str(config["offsets.topic.segment.bytes"]),
        "compression.type": "producer",
    }


async def _create_internal_topic(broker, topic_name: str) -> ErrorCode:
    partitions, rf, configs = _internal_topic_spec(broker, topic_name)
    try:
        plan = broker.topics.plan_topic(topic_name, partitions, rf, None, configs)
        await broker.topics.create(plan)
    except TopicError as e:
        if e.error == ErrorCode.REQUEST_TIMED_OUT:  # created; its leaders are not there yet
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        if e.error == ErrorCode.KAFKA_STORAGE_ERROR:
            broker.log_storage_error(f"could not create {topic_name}: {e}")
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        if e.error != ErrorCode.TOPIC_ALREADY_EXISTS:
            broker.log_bad_input(f"could not create {topic_name}: {e}")
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
    return ErrorCode.NONE
