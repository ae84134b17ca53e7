"""CreateTopics (key 19): create topics, or with ``validate_only`` just check them.

Each topic is checked on its own and one failure does not fail the others; the topics that
pass are written together (``TopicManager.create_many``: a few metadata round trips for the
whole request, so 100 topics cost about what one does). Names that
appear twice in one request all get INVALID_REQUEST, as in Kafka. Once every topic is written,
the answer waits, up to the request's ``timeout_ms`` for them all, until the controller has
given their partitions leaders (REQUEST_TIMED_OUT for a topic whose leaders are not there by
then; it exists all the same), as Kafka's ``DelayedCreatePartitions``. v5+ answers with the topic
id, partition count, replication factor and the topic's resulting configs.
"""

from __future__ import annotations

import asyncio
from collections import Counter

from odradek.protocol.generated.create_topics_response import (
    CreatableTopicConfigs, CreatableTopicResult, CreateTopicsResponse,
)
from odradek.protocol.generated.error_codes import ErrorCode
from odradek.protocol import acl_binding as acl
from odradek.server import message_format_version
from odradek.server import authorize
from odradek.server.handlers.describe_configs import topic_config_entries
from odradek.server.topics import TopicError


async def handle(ctx, request):
    broker = ctx.broker
    counts = Counter(t.name for t in request.topics)
    results = []
    planned = []  # (result, topic, configs, plan) of the topics that passed the checks
    for topic in request.topics:
        result = CreatableTopicResult(name=topic.name, error_message=None)
        results.append(result)
        if counts[topic.name] > 1:
            result.error_code = ErrorCode.INVALID_REQUEST
            result.error_message = f"Create topics request from client contains a duplicate topic {topic.name}"
            continue
        # Kafka: CREATE on the cluster, or on the topic (only the topic's denial is the refusal)
        if not (authorize.allowed_cluster(ctx, acl.CREATE, log_if_denied=False)
                or authorize.allowed(ctx, acl.CREATE, acl.TOPIC, topic.name)):
            result.error_code = ErrorCode.TOPIC_AUTHORIZATION_FAILED
            result.error_message = "Authorization failed."
            continue
        try:
            configs, plan = _plan(broker, topic)
        except TopicError as e:
            _failed(ctx, result, e)
            continue
        if request.validate_only:
            _describe(ctx, result, configs, plan)
        else:
            planned.append((result, topic, configs, plan))
    # every topic written together (one batch of store writes), then one wait for them all
    outcomes = await broker.topics.create_many([plan for _, _, _, plan in planned]) if planned else []
    created = []
    for (result, topic, configs, plan), outcome in zip(planned, outcomes):
        if isinstance(outcome, TopicError):
            _failed(ctx, result, outcome)
            continue
        result.topic_id = outcome.topic_id
        message_format_version.warn_ignored(topic.name, configs)
        _describe(ctx, result, configs, plan)
        created.append((result, plan))
    waits = [broker.topics.await_leaders(plan.name, plan.assignment, request.timeout_ms) for _, plan in created]
    for (result, _), outcome in zip(created, await asyncio.gather(*waits, return_exceptions=True)):
        if isinstance(outcome, TopicError):
            _failed(ctx, result, outcome)
        elif isinstance(outcome, BaseException):
            raise outcome
    return CreateTopicsResponse(throttle_time_ms=0, topics=results)


def _failed(ctx, result, e: TopicError) -> None:
    result.error_code, result.error_message = e.error, e.message
    result.configs = None if ctx.api_version >= 5 else []


def _plan(broker, topic):
    """Check one topic (nothing written): its configs and plan; TopicError if it is bad."""
    assignments = {a.partition_index: list(a.broker_ids) for a in topic.assignments} or None
    if assignments and len(assignments) != len(topic.assignments):
        raise TopicError(ErrorCode.INVALID_REPLICA_ASSIGNMENT, "A partition index appears twice in the assignment.")
    configs = {}
    for c in topic.configs:
        if c.value is None:
            raise TopicError(ErrorCode.INVALID_CONFIG, f"Null value not supported for topic configs: {c.name}")
        configs[c.name] = c.value
    plan = broker.topics.plan_topic(topic.name, topic.num_partitions, topic.replication_factor, assignments, configs)
    return configs, plan


def _describe(ctx, result, configs, plan) -> None:
    """Fill a checked (or created) topic's layout and resulting configs into ``result``."""
    broker = ctx.broker
    result.num_partitions = len(plan.assignment)
    result.replication_factor = len(plan.assignment[0])
    result.configs = [
        CreatableTopicConfigs(name=e.name, value=e.value, read_only=e.read_only,
                              config_source=e.config_source, is_sensitive=e.is_sensitive)
        for e in topic_config_entries(broker, configs)
    ]
    if ctx.api_version >= 5 and not authorize.allowed(ctx, acl.DESCRIBE_CONFIGS, acl.TOPIC, result.name,
                                                      log_if_denied=False):
        # Kafka: the resulting configs and layout only to who may describe its configs
        result.topic_config_error_code = ErrorCode.TOPIC_AUTHORIZATION_FAILED
        result.configs, result.num_partitions, result.replication_factor = None, -1, -1
