"""Produce (key 0): append the batches of each partition, answer with their base offsets.

acks=0 gets no response at all. acks=1 is answered once the leader appended. acks=-1 (all) is
refused with NOT_ENOUGH_REPLICAS (nothing appended) while the ISR is smaller than the topic's
``min.insync.replicas``, and otherwise answered once every in-sync replica has the batches,
i.e. when the high watermark passed them; with a single replica in the ISR that is at once.
Errors are per partition; a partition that fails does not stop the others. A partition whose
append the disk refuses (ENOSPC, EIO) is answered KAFKA_STORAGE_ERROR with its log unchanged,
and accepts writes again as soon as the disk does.

A partition whose unflushed offsets reached ``flush.messages`` is answered only once its log is
flushed through the append (``produce_flush``: one fsync in flight per log, shared by every
produce that arrived meanwhile); a failed fsync answers KAFKA_STORAGE_ERROR for it.

The most common request never gets here: ``server/produce_fast_path.py`` takes plain
batches (no producer id, topics that keep batches as produced, acks 1 or a one-replica ISR)
in a few C calls, and hands everything else, unchanged, to this handler.
"""

from __future__ import annotations

import asyncio
import logging

from odradek.protocol.generated.error_codes import ErrorCode
from odradek.protocol.generated.produce_response import (
    PartitionProduceResponse,
    ProduceResponse,
    TopicProduceResponse,
)
from odradek.replication.partition import ProduceError
from odradek.server.handlers.produce_flush import flush_all
from odradek.server.request import CLOSE_CONNECTION, NO_RESPONSE

_VALID_ACKS = (-1, 0, 1)
log = logging.getLogger("odradek.server")


def handle(ctx, request):
    broker = ctx.connection.broker
    acks = request.acks
    # Whole-request refusals, checked once rather than per partition (same answer for each).
    refusal = None
    if acks not in _VALID_ACKS:
        refusal = (ErrorCode.INVALID_REQUIRED_ACKS, None)
    elif request.transactional_id is not None:
        refusal = (ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, "transactions are not supported yet")
    topics = []
    waits = []
    appended = []
    for topic in request.topic_data:
        name = topic.name
        responses = []
        for data in topic.partition_data:
            if refusal is not None:
                resp, last_offset = _error(data.index, *refusal)
            else:
                resp, last_offset = _produce_one(broker, acks, name, data)
            responses.append(resp)
            if last_offset >= 0:
                appended.append((name, data.index, resp))
                if acks == -1:
                    waits.append((name, data.index, last_offset, resp))
        topics.append(TopicProduceResponse(name=name, partition_responses=responses))
    flushes = broker.replica_manager.flushes_due_by_messages(appended) if appended else ()
    if acks == 0:
        if flushes:
            broker.track(asyncio.ensure_future(flush_all([(log, up_to) for log, up_to, _ in flushes])))
        # No response to carry an error: Kafka closes the connection instead, which makes
        # the client refresh its metadata and notice.
        failed = any(r.error_code for t in topics for r in t.partition_responses)
        return CLOSE_CONNECTION if failed else NO_RESPONSE
    response = ProduceResponse(responses=topics, throttle_time_ms=0)
    if flushes or (waits and not broker.replica_manager.all_replicated(waits)):
        return _complete(broker, flushes, waits, request.timeout_ms, response)
    return response


async def _complete(broker, flushes, waits, timeout_ms: int, response):
    """Answer once the ``flush.messages`` policy's flushes are done (Kafka flushes inside the
    append) and, for acks=all, once the high watermarks cover the appends."""
    if flushes:
        errors = await flush_all([(log, up_to) for log, up_to, _ in flushes])
        for (plog, _, resp), error in zip(flushes, errors):
            if error is not None:
                log.error("flush of %s-%d failed: %r", plog.topic, plog.partition, error)
                resp.error_code = ErrorCode.KAFKA_STORAGE_ERROR
                resp.base_offset = -1
        waits = [w for w in waits if w[3].error_code == ErrorCode.NONE]
    if waits and not broker.replica_manager.all_replicated(waits):
        return await _await_replication(broker, waits, timeout_ms, response)
    return response


def _error(index: int, code: ErrorCode, message: str | None = None) -> tuple[PartitionProduceResponse, int]:
    return PartitionProduceResponse(index=index, error_code=code, base_offset=-1, error_message=message,
                                    current_leader=None), -1


def _produce_one(broker, acks: int, topic: str, data) -> tuple[PartitionProduceResponse, int]:
    """The partition's response and the last offset appended (-1 when none)."""
    index = data.index
    if broker.is_internal_topic(topic) and not broker.allow_internal_writes:
        return _error(index, ErrorCode.INVALID_TOPIC_EXCEPTION, f"{topic} is internal")
    part, code = broker.leader_partition(topic, index)
    if part is None:
        return _error(index, code)
    if acks == -1:
        # Checked before appending, as Kafka does: acks=all promises min.insync.replicas copies.
        min_isr = broker.topics.min_insync_replicas(topic)
        if len(part.isr) < min_isr:
            return _error(index, ErrorCode.NOT_ENOUGH_REPLICAS, f"{len(part.isr)} in-sync replica(s) of "
                          f"{topic}-{index}, min.insync.replicas is {min_isr}")
    try:
        result = broker.replica_manager.append(part, data.records)
    except ProduceError as e:
        if e.error == ErrorCode.KAFKA_STORAGE_ERROR:
            broker.log_storage_error(e)  # the disk, not the client: its log is unchanged
        else:
            broker.log_bad_input(f"produce to {topic}-{index} refused: {e.error.name}: {e}")
        return _error(index, e.error, str(e))
    # No current_leader: it is for NOT_LEADER_OR_FOLLOWER answers, and leaving it None spares
    # building (and, when encoding, comparing) a default LeaderIdAndEpoch per partition.
    resp = PartitionProduceResponse(index=index, error_code=ErrorCode.NONE, base_offset=result.base_offset,
                                    log_append_time_ms=result.log_append_time,
                                    log_start_offset=result.log_start_offset, current_leader=None)
    return resp, result.last_offset


async def _await_replication(broker, waits, timeout_ms: int, response):
    """acks=all: hold the response until the high watermarks cover the appends."""
    done = await broker.replica_manager.wait_for_replication(waits, timeout_ms / 1000)
    if not done:
        for topic, index, last_offset, resp in waits:
            if not broker.replica_manager.is_replicated(topic, index, last_offset):
                resp.error_code = ErrorCode.REQUEST_TIMED_OUT
    return response
