"""Metadata (key 3): brokers, cluster id, controller, and topics with their partitions.

A null topic list (v1+) or an empty one at v0 means every topic. Unknown topics are created
with the broker defaults when the request allows it (v4+ ``allow_auto_topic_creation``;
always before v4) and ``auto.create.topics.enable`` is on, as Kafka does. Where Kafka
answers LEADER_NOT_AVAILABLE for a topic it just created, odradek waits (a bounded while,
``topics.AUTO_CREATE_WAIT_MS``) for the controller to give it leaders, so the new topic is
usually answered complete; LEADER_NOT_AVAILABLE after that wait. The controller is the one in
the metadata image (-1 while there is none: between two controllers), except this broker's own
id while it is cut off from the metadata store (`answered_controller_id`).

Topic ids, as Kafka's ``KafkaApis.handleTopicMetadataRequest`` treats them: v10 and v11 carry
an id field but may not use it, so a topic there with a null name or a non-zero id makes the
request invalid (every topic answered INVALID_REQUEST, a null name as "", as Kafka's
``MetadataRequest.getErrorResponse``). From v12 a request naming any non-zero id is answered by
id alone: each distinct id in full, or UNKNOWN_TOPIC_ID with a null name and the id; names in
it are ignored (the Java admin client's ``describeTopics(TopicCollection.ofTopicIds(..))``
sends empty names with its ids). Without ids, a null name is INVALID_REQUEST for that entry.
Each topic is answered once, however often it is asked for (Kafka collects them in a set).

The brokers answered are the registered ones that the controller's last UpdateMetadata lists
live (``metadata/alive_brokers.py``): a broker the controller failed before its session
expired is left out, as is a leader on it. A partition's ``offline_replicas`` (v5+) are its
replicas on brokers not live, and those the
controller's last UpdateMetadata for it named offline (in a failed log directory of a live
broker: ``metadata/offline_replicas.py``), as Kafka's ``MetadataCache`` answers them. A
topic's partitions, as answered, are kept between requests while the image, the live
brokers and the offline replicas are unchanged for it (``server/metadata_partitions.py``).
"""

from __future__ import annotations

from odradek.metadata.layout import NO_LEADER
from odradek.protocol.generated.error_codes import ErrorCode
from odradek.protocol.generated.metadata_response import (
    MetadataResponse, MetadataResponseBroker, MetadataResponsePartition, MetadataResponseTopic,
)
from odradek.protocol.primitives import ZERO_UUID
from odradek.server import authorize
from odradek.protocol.acl_binding import CLUSTER, CLUSTER_NAME, CREATE, DESCRIBE, TOPIC
from odradek.server.acl_operations import CLUSTER_OPERATIONS, TOPIC_OPERATIONS
from odradek.server.metadata_partitions import MetadataPartitionsCache
from odradek.server.topics import TopicError

# The cache's entries beyond the image's topics (deleted ones) before it is pruned.
PRUNE_SLACK = 100


def handle(ctx, request):
    """Answered at once, unless a topic must be created first."""
    image = ctx.broker.metadata_image()
    names = _requested_names(ctx.api_version, request, image)
    if authorize.enabled(ctx):
        names = _authorized_names(ctx, request, names, image)
    missing = [n for n, _, error in names if error is None and image.topic(n) is None]
    if missing and _may_create(ctx, request):
        return _create_then_answer(ctx, request, names, missing)
    return _with_authorized_operations(ctx, request, _answer(ctx, names, {}))


async def _create_then_answer(ctx, request, names, missing):
    errors = {name: await _auto_create(ctx.broker, name) for name in dict.fromkeys(missing)}
    return _with_authorized_operations(ctx, request, _answer(ctx, names, errors))


def _authorized_names(ctx, request, names, image):
    """Kafka's handleTopicMetadataRequest under ACLs: a request for every topic lists those the
    principal may DESCRIBE; a named topic it may not describe answers TOPIC_AUTHORIZATION_FAILED,
    and so does a missing one to be auto-created without CREATE on the cluster or the topic."""
    every = request.topics is None or (ctx.api_version == 0 and not request.topics)
    out = []
    creating = _may_create(ctx, request)
    for name, topic_id, error in names:
        if error is not None:
            out.append((name, topic_id, error))
        elif not authorize.allowed(ctx, DESCRIBE, TOPIC, name, log_if_denied=not every):  # a listing filters
            if not every:
                out.append((None if topic_id != ZERO_UUID else name, topic_id, ErrorCode.TOPIC_AUTHORIZATION_FAILED))
        elif (creating and image.topic(name) is None and not authorize.allowed_cluster(ctx, CREATE, log_if_denied=False)
              and not authorize.allowed(ctx, CREATE, TOPIC, name)):
            out.append((name, topic_id, ErrorCode.TOPIC_AUTHORIZATION_FAILED))
        else:
            out.append((name, topic_id, None))
    return out


def _with_authorized_operations(ctx, request, response: MetadataResponse) -> MetadataResponse:
    """Fill in the authorized operations the request asks for (v8+ for topics, v8-v10 for the
    cluster; later versions ask DescribeCluster instead): with no authorizer, every operation
    the resource supports."""
    v = ctx.api_version
    if v >= 8 and request.include_topic_authorized_operations:
        for topic in response.topics:
            if topic.error_code != ErrorCode.TOPIC_AUTHORIZATION_FAILED and topic.name:
                topic.topic_authorized_operations = authorize.allowed_operations(
                    ctx, TOPIC, topic.name, TOPIC_OPERATIONS)
    if 8 <= v <= 10 and request.include_cluster_authorized_operations:
        response.cluster_authorized_operations = authorize.allowed_operations(
            ctx, CLUSTER, CLUSTER_NAME, CLUSTER_OPERATIONS)
    return response


def _answer(ctx, names, create_errors: dict[str, int]):
    broker = ctx.broker
    image = broker.metadata_image()
    alive = broker.metadata.alive_brokers.of(image.brokers)
    live = frozenset(alive)
    # (a broker of the tests may keep none: answered from a cache of this request alone)
    cache = getattr(broker, "metadata_partitions", None)
    if cache is None:
        cache = MetadataPartitionsCache()
    if len(cache) > len(image.topics) + PRUNE_SLACK:
        cache.prune(image.topics)
    topics = []
    for name, topic_id, error in names:
        if error is not None:
            topics.append(MetadataResponseTopic(error_code=error, name=name, topic_id=topic_id))
            continue
        assignment = image.topic(name)
        if assignment is None and name in create_errors:
            # Not in the image although creation was attempted: it failed, or another request
            # is creating it right now (ours then got TOPIC_ALREADY_EXISTS), which Kafka
            # answers with the retriable LEADER_NOT_AVAILABLE, never "unknown topic".
            code = create_errors[name] or ErrorCode.LEADER_NOT_AVAILABLE
            topics.append(MetadataResponseTopic(error_code=code, name=name, topic_id=ZERO_UUID))
            continue
        if assignment is None:
            topics.append(MetadataResponseTopic(error_code=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                                                name=name, topic_id=ZERO_UUID))
            continue
        topics.append(_topic(broker, image, live, assignment, cache))
    return MetadataResponse(
        throttle_time_ms=0,
        brokers=[_broker(b, ctx.connection.listener_name) for b in sorted(alive.values(), key=lambda b: b.broker_id)],
        cluster_id=broker.cluster_id,
        controller_id=answered_controller_id(broker),
        topics=topics,
    )


def answered_controller_id(broker) -> int:
    """The controller id that Metadata and DescribeCluster answer: the image's (``/controller``
    as last read), but -1 (no controller: Kafka's clients ask again) in place of this broker's
    own id while its metadata store is not connected (ZooKeeper SUSPENDED or LOST). Cut off,
    it cannot know whether its session, and ``/controller`` with it, lives on, so it must not
    draw admin requests to itself as controller. Another broker's id is answered as is: the
    controller last seen, which answers NOT_CONTROLLER itself if it no longer is one."""
    controller = broker.controller_id()
    if controller == broker.broker_id and not broker.metadata.store.connected:
        return NO_LEADER
    return controller


def _requested_names(version: int, request, image):
    """``[(name, topic_id, error)]`` of the topics to answer, each once: ``error`` is None for
    a name to look up (and maybe create), else the code to answer the entry with."""
    if request.topics is None or (version == 0 and not request.topics):
        return [(name, ZERO_UUID, None) for name in sorted(image.topics)]
    if version < 12 and any(t.name is None or t.topic_id != ZERO_UUID for t in request.topics):
        return [(t.name or "", t.topic_id, ErrorCode.INVALID_REQUEST) for t in request.topics]
    ids = list(dict.fromkeys(t.topic_id for t in request.topics if t.topic_id != ZERO_UUID))
    if ids:
        out = []
        for topic_id in ids:
            found = image.topic_by_id(topic_id)
            if found is None:
                out.append((None, topic_id, ErrorCode.UNKNOWN_TOPIC_ID))
            else:
                out.append((found.name, topic_id, None))
        return out
    return [(name, ZERO_UUID, None if name is not None else ErrorCode.INVALID_REQUEST)
            for name in dict.fromkeys(t.name for t in request.topics)]


def _may_create(ctx, request) -> bool:
    allowed = ctx.api_version < 4 or request.allow_auto_topic_creation
    return allowed and ctx.broker.config["auto.create.topics.enable"]


async def _auto_create(broker, name: str) -> int:
    try:
        await broker.topics.auto_create(name)
        return ErrorCode.NONE
    except TopicError as e:
        if e.error == ErrorCode.TOPIC_ALREADY_EXISTS:
            return ErrorCode.NONE
        if e.error == ErrorCode.INVALID_TOPIC_EXCEPTION:
            return ErrorCode.INVALID_TOPIC_EXCEPTION
        return ErrorCode.LEADER_NOT_AVAILABLE


def _broker(info, listener_name: str) -> MetadataResponseBroker:
    endpoint = next((e for e in info.endpoints if e.listener == listener_name), info.endpoints[0])
    return MetadataResponseBroker(node_id=info.broker_id, host=endpoint.host, port=endpoint.port, rack=info.rack)


def _topic(broker, image, live: frozenset, assignment, cache: MetadataPartitionsCache) -> MetadataResponseTopic:
    name = assignment.name
    states = image.partition_states.get(name)
    reported = broker.metadata.offline_replicas
    partitions = cache.partitions(assignment, states, live, reported.snapshot,
                                  lambda: _partitions(assignment, states, live, reported))
    return MetadataResponseTopic(error_code=ErrorCode.NONE, name=name, topic_id=assignment.topic_id,
                                 is_internal=broker.is_internal_topic(name), partitions=partitions)


def _partitions(assignment, states, live: frozenset, reported) -> list[MetadataResponsePartition]:
    """The topic's partitions as answered (``server/metadata_partitions.py`` keeps them)."""
    partitions = []
    for index in sorted(assignment.partitions):
        replicas = list(assignment.partitions[index])
        state = states.get(index) if states is not None else None
        # offline: on a broker not live, or (the controller says, in UpdateMetadata) in a
        # failed log directory of a live one; Kafka answers the controller's list alone
        offline = reported.of(assignment.name, index)
        p = MetadataResponsePartition(partition_index=index, replica_nodes=replicas,
                                      offline_replicas=[r for r in replicas if r not in live or r in offline])
        if state is None or state.leader < 0 or state.leader not in live:
            p.error_code = ErrorCode.LEADER_NOT_AVAILABLE
            p.leader_id = -1
            p.isr_nodes = list(state.isr) if state else []
            p.leader_epoch = state.leader_epoch if state else -1
        else:
            p.leader_id, p.leader_epoch, p.isr_nodes = state.leader, state.leader_epoch, list(state.isr)
        partitions.append(p)
    return partitions
