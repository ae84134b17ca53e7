"""DeleteTopics (key 20): delete topics by name (and by id from v6).

Entries are checked before anything is deleted, as Kafka's ``ControllerApis.deleteTopics``
checks them: an entry with both a name and an id, or with neither, and a name or id that
appears twice in the request are INVALID_REQUEST; an id no topic has is UNKNOWN_TOPIC_ID
(with a null name). The other entries are marked for deletion together (a few store round
trips for them all: `TopicManager.mark_deleted_many`), then the answer
waits, up to the request's ``timeout_ms`` for them all, until the controller has deleted them
(REQUEST_TIMED_OUT for a topic still there; its deletion goes on), as Kafka's
``DelayedDeleteTopics``.

Under ACLs each entry needs DELETE on its topic (TOPIC_AUTHORIZATION_FAILED); an entry by id
that fails it answers a null name unless the principal may DESCRIBE the topic, so an id never
reveals a name its sender could not see in Metadata.
"""

from __future__ import annotations

import asyncio
from collections import Counter

from odradek.protocol.generated.delete_topics_response import DeletableTopicResult, DeleteTopicsResponse
from odradek.protocol.generated.error_codes import ErrorCode
from odradek.protocol.primitives import ZERO_UUID
from odradek.protocol import acl_binding as acl
from odradek.server.topics import TopicError
from odradek.server import authorize


async def handle(ctx, request):
    broker = ctx.broker
    results = []
    image = broker.metadata_image()
    wanted = []  # the entries to mark, all at once (`TopicManager.mark_deleted_many`)
    for result in _checked(request, image):
        results.append(result)
        if result.error_code or not _deletable(ctx, result):
            continue
        assignment = image.topic(result.name)
        if assignment is not None:
            result.topic_id = assignment.topic_id
        if broker.is_internal_topic(result.name):
            result.error_code = ErrorCode.INVALID_TOPIC_EXCEPTION
            result.error_message = f"Topic {result.name} is internal"
            continue
        wanted.append(result)
    marked = []  # (result, topic id) of the topics marked for deletion
    outcomes = await broker.topics.mark_deleted_many([r.name for r in wanted]) if wanted else {}
    for result in wanted:
        outcome = outcomes[result.name]
        if isinstance(outcome, TopicError):
            result.error_code, result.error_message = outcome.error, outcome.message
        else:
            marked.append((result, outcome))
    waits = [broker.topics.await_deleted(result.name, topic_id, request.timeout_ms) for result, topic_id in marked]
    for (result, _), outcome in zip(marked, await asyncio.gather(*waits, return_exceptions=True)):
        if isinstance(outcome, TopicError):
            result.error_code, result.error_message = outcome.error, outcome.message
        elif isinstance(outcome, BaseException):
            raise outcome
    return DeleteTopicsResponse(throttle_time_ms=0, responses=results)


def _deletable(ctx, result: DeletableTopicResult) -> bool:
    """DELETE on the topic (Kafka's ``ControllerApis.deleteTopics``), else TOPIC_AUTHORIZATION_FAILED.
    An entry given by id whose name the principal may not DESCRIBE answers that name as null:
    the id is the caller's own, the name it stands for is not theirs to learn (with DESCRIBE,
    or DELETE, which implies it, the name is shown)."""
    if authorize.allowed(ctx, acl.DELETE, acl.TOPIC, result.name):
        return True
    if result.topic_id != ZERO_UUID and not authorize.allowed(ctx, acl.DESCRIBE, acl.TOPIC, result.name):
        result.name = None
    result.error_code, result.error_message = ErrorCode.TOPIC_AUTHORIZATION_FAILED, "Authorization failed."
    return False


def _checked(request, image) -> list[DeletableTopicResult]:
    """One result per entry, in request order (``topic_names`` up to v5, ``topics`` from v6):
    its name resolved, or the error that refuses it."""
    entries = [(name, ZERO_UUID) for name in request.topic_names]
    entries += [(t.name, t.topic_id) for t in request.topics]
    names = Counter(name for name, topic_id in entries if topic_id == ZERO_UUID)
    ids = Counter(topic_id for name, topic_id in entries if name is None)
    results = []
    for name, topic_id in entries:
        result = DeletableTopicResult(name=name, topic_id=topic_id)
        by_id = topic_id != ZERO_UUID
        refusal = (
            "You may not specify both topic name and topic id." if by_id and name is not None
            else "Neither topic name nor id were specified." if not by_id and name is None
            else "Duplicate topic id." if by_id and ids[topic_id] > 1
            else "Duplicate topic name." if not by_id and names[name] > 1
            else None
        )
        if refusal is not None:
            result.error_code, result.error_message = ErrorCode.INVALID_REQUEST, refusal
        elif by_id:
            found = image.topic_by_id(topic_id)
            if found is None:
                result.error_code = ErrorCode.UNKNOWN_TOPIC_ID
            else:
                result.name = found.name
        results.append(result)
    return results
