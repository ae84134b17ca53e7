"""CreatePartitions (key 37): add partitions to topics (never remove).

A topic named twice in one request is refused, every time it appears, with INVALID_REQUEST
(as Kafka's ``KafkaApis.handleCreatePartitionsRequest``): which count should win is unclear.
The answer for a topic waits, up to the request's ``timeout_ms``, until the controller has
given its new partitions leaders (REQUEST_TIMED_OUT otherwise; they exist all the same).
"""

from __future__ import annotations

from collections import Counter

from odradek.protocol.generated.create_partitions_response import (
    CreatePartitionsResponse, CreatePartitionsTopicResult,
)
from odradek.protocol.generated.error_codes import ErrorCode
from odradek.protocol import acl_binding as acl
from odradek.server.topics import TopicError
from odradek.server import authorize


async def handle(ctx, request):
    results = []
    counts = Counter(t.name for t in request.topics)
    for topic in request.topics:
        result = CreatePartitionsTopicResult(name=topic.name)
        if counts[topic.name] > 1:
            result.error_code, result.error_message = ErrorCode.INVALID_REQUEST, "Duplicate topic in request."
            results.append(result)
            continue
        if not authorize.allowed(ctx, acl.ALTER, acl.TOPIC, topic.name):  # Kafka: ALTER on the topic
            result.error_code, result.error_message = ErrorCode.TOPIC_AUTHORIZATION_FAILED, "Authorization failed."
            results.append(result)
            continue
        assignments = [list(a.broker_ids) for a in topic.assignments] if topic.assignments else None
        try:
            await ctx.broker.topics.add_partitions(topic.name, topic.count, assignments, request.validate_only,
                                                request.timeout_ms)
        except TopicError as e:
            result.error_code, result.error_message = e.error, e.message
        results.append(result)
    return CreatePartitionsResponse(throttle_time_ms=0, results=results)
