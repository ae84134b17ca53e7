"""Creating many topics together (one CreateTopics request): `create_topics`.

Each topic is written as `ClusterMetadata.create_topic` writes it (its config
``/config/topics/<t>`` and its assignment ``/brokers/topics/<t>``, with a new topic id) and is
refused for the same reasons, but the whole batch costs a handful of store round trips instead
of a handful per topic: one read of the topic list, pipelined reads (``get_many``) of the
deletion marks and config znodes, the writes in ``multi`` s of at most ``MULTI_BYTES``, and one
refresh of the cache. Topics do not depend on each other: a ``multi`` refused (a topic created
by someone else between the look and the write) is written again one topic at a time, so that
only that topic fails, with ``create_topic``'s error.

Contract: ``create_topics(metadata, topics)`` takes ``(name, assignment, configs)`` triples
and returns, in the same order, the created `TopicAssignment` or the `MetadataError` that
refused that topic (raised errors: only the store's own, e.g. a lost connection).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from odradek.metadata import layout
from odradek.metadata.topic_validation import validate_configs, validate_replica_assignment
from odradek.metadata.errors import InvalidTopicError, MetadataError, NodeExistsError, TopicExistsError
from odradek.metadata.layout import TopicAssignment
from odradek.metadata.store import CreateOp, Op, SetOp
from odradek.metadata.topic_name import collision_key, has_collision_chars, validate_topic_name

# ZooKeeper refuses a request over jute.maxbuffer (1 MiB by default); one multi stays well
# below it (a topic's assignment alone may be ~1 MiB: it then goes in a multi of its own).
MULTI_BYTES = 512 * 1024

TopicRequest = tuple[str, Mapping[int, Sequence[int]], Mapping[str, str] | None]


def create_topics(metadata, topics: Sequence[TopicRequest]) -> list[TopicAssignment | MetadataError]:
    """See the module docstring. ``metadata`` is the broker's `ClusterMetadata`."""
    store = metadata.store
    existing = set(store.children(layout.BROKER_TOPICS))
    marks = store.get_many([layout.delete_topic_path(name) for name, _, _ in topics])
    configs_found = store.get_many([layout.topic_config_path(name) for name, _, _ in topics])
    outcomes: list[TopicAssignment | MetadataError | None] = [None] * len(topics)
    keys = {collision_key(t) for t in existing}
    writes: list[tuple[int, list[Op], int]] = []  # (index, ops, bytes)
    written: dict[int, TopicAssignment] = {}
    for i, (name, assignment, configs) in enumerate(topics):
        try:
            validate_topic_name(name)  # the checks in create_topic's order
            replicas = validate_replica_assignment(assignment)
            config = layout.encode_config(validate_configs(configs))
            if name in existing:
                raise TopicExistsError(f"Topic '{name}' already exists.")
            if marks[i] is not None:
                raise TopicExistsError(f"Topic '{name}' is marked for deletion.")
            if has_collision_chars(name) and collision_key(name) in keys:
                clash = sorted(t for t in existing if collision_key(t) == collision_key(name))
                raise InvalidTopicError(f"Topic '{name}' collides with existing topics: {', '.join(clash)}")
            topic = TopicAssignment(name, layout.new_kafka_uuid(), replicas)
        except MetadataError as e:
            outcomes[i] = e
            continue
        existing.add(name)  # a later topic of this request that collides with it is refused
        keys.add(collision_key(name))
        config_path = layout.topic_config_path(name)
        config_op = CreateOp(config_path, config) if configs_found[i] is None else SetOp(config_path, config)
        data = topic.to_json()
        written[i] = topic
        writes.append((i, [config_op, CreateOp(layout.topic_path(name), data)], len(data) + len(config)))
    for chunk in _chunks(writes):
        try:
            store.multi([op for _, ops, _ in chunk for op in ops])
            for i, _, _ in chunk:
                outcomes[i] = True
        except NodeExistsError:  # someone else's creation came between: one at a time
            for i, ops, _ in chunk:
                try:
                    store.multi(ops)
                    outcomes[i] = True
                except NodeExistsError:
                    outcomes[i] = TopicExistsError(f"Topic '{topics[i][0]}' already exists.")
    metadata.cache.refresh_topics()
    image = metadata.cache.image
    for i, outcome in enumerate(outcomes):
        if outcome is True:
            outcomes[i] = image.topic(topics[i][0]) or written[i]
    return outcomes


def _chunks(writes):
    """``writes`` in runs of at most ``MULTI_BYTES`` (a bigger single write alone)."""
    chunk, size = [], 0
    for w in writes:
        if chunk and size + w[2] > MULTI_BYTES:
            yield chunk
            chunk, size = [], 0
        chunk.append(w)
        size += w[2]
    if chunk:
        yield chunk
