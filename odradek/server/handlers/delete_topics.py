"""DeleteTopics (key 20): delete topics by name (and by id from v6)."""

from __future__ import annotations

from odradek.protocol.generated.delete_topics_response import DeletableTopicResult, DeleteTopicsResponse
from odradek.protocol.generated.error_codes import ErrorCode
from odradek.protocol.primitives import ZERO_UUID
from odradek.server.topics import TopicError


async def handle(ctx, request):
    broker = ctx.broker
    wanted = [(name, None) for name in request.topic_names]
    wanted += [(t.name, t.topic_id) for t in request.topics]
    results = []
    for name, topic_id in wanted:
        image = broker.metadata_image()
        result = DeletableTopicResult(name=name, topic_id=topic_id or ZERO_UUID)
        if name is None:
            found = image.topic_by_id(topic_id)
            if found is None:
                result.error_code = ErrorCode.UNKNOWN_TOPIC_ID
                results.append(result)
                continue
            name = result.name = found.name
        try:
            assignment = image.topic(name)
            if assignment is not None:
                result.topic_id = assignment.topic_id
            if broker.is_internal_topic(name):
                raise TopicError(ErrorCode.INVALID_TOPIC_EXCEPTION, f"Topic {name} is internal")
            await broker.topics.delete(name)
        except TopicError as e:
            result.error_code, result.error_message = e.error, e.message
        results.append(result)
    return DeleteTopicsResponse(throttle_time_ms=0, responses=results)
