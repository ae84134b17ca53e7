"""CreatePartitions (key 37): add partitions to topics (never remove)."""

from __future__ import annotations

from odradek.protocol.generated.create_partitions_response import (
    CreatePartitionsResponse, CreatePartitionsTopicResult,
)
from odradek.server.topics import TopicError


async def handle(ctx, request):
    results = []
    for topic in request.topics:
        result = CreatePartitionsTopicResult(name=topic.name)
        assignments = [list(a.broker_ids) for a in topic.assignments] if topic.assignments else None
        try:
            await ctx.broker.topics.add_partitions(topic.name, topic.count, assignments, request.validate_only)
        except TopicError as e:
            result.error_code, result.error_message = e.error, e.message
        results.append(result)
    return CreatePartitionsResponse(throttle_time_ms=0, results=results)
