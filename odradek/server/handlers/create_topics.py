"""CreateTopics (key 19): create topics, or with ``validate_only`` just check them.

Each topic is checked and created on its own; one failure does not fail the others. Names that
appear twice in one request all get INVALID_REQUEST, as in Kafka. v5+ answers with the topic
id, partition count, replication factor and the topic's resulting configs.
"""

from __future__ import annotations

from collections import Counter

from odradek.protocol.generated.create_topics_response import (
    CreatableTopicConfigs, CreatableTopicResult, CreateTopicsResponse,
)
from odradek.protocol.generated.error_codes import ErrorCode
from odradek.server import message_format_version
from odradek.server.handlers.describe_configs import topic_config_entries
from odradek.server.topics import TopicError


async def handle(ctx, request):
    broker = ctx.broker
    counts = Counter(t.name for t in request.topics)
    results = []
    for topic in request.topics:
        result = CreatableTopicResult(name=topic.name, error_message=None)
        if counts[topic.name] > 1:
            result.error_code = ErrorCode.INVALID_REQUEST
            result.error_message = f"Create topics request from client contains a duplicate topic {topic.name}"
            results.append(result)
            continue
        try:
            await _create(broker, request, topic, result)
        except TopicError as e:
            result.error_code, result.error_message = e.error, e.message
            result.configs = None if ctx.api_version >= 5 else []
        results.append(result)
    return CreateTopicsResponse(throttle_time_ms=0, topics=results)


async def _create(broker, request, topic, result) -> None:
    assignments = {a.partition_index: list(a.broker_ids) for a in topic.assignments} or None
    if assignments and len(assignments) != len(topic.assignments):
        raise TopicError(ErrorCode.INVALID_REPLICA_ASSIGNMENT, "A partition index appears twice in the assignment.")
    configs = {}
    for c in topic.configs:
        if c.value is None:
            raise TopicError(ErrorCode.INVALID_CONFIG, f"Null value not supported for topic configs: {c.name}")
        configs[c.name] = c.value
    plan = broker.topics.plan_topic(topic.name, topic.num_partitions, topic.replication_factor, assignments, configs)
    if not request.validate_only:
        created = await broker.topics.create(plan)
        result.topic_id = created.topic_id
        message_format_version.warn_ignored(topic.name, configs)
    result.num_partitions = len(plan.assignment)
    result.replication_factor = len(plan.assignment[0])
    result.configs = [
        CreatableTopicConfigs(name=e.name, value=e.value, read_only=e.read_only,
                              config_source=e.config_source, is_sensitive=e.is_sensitive)
        for e in topic_config_entries(broker, configs)
    ]
