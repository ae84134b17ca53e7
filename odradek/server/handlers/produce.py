"""Produce (key 0): append the batches of each partition, answer with their base offsets.

acks=0 gets no response at all. acks=1 is answered once the leader appended. acks=-1 (all) is
refused with NOT_ENOUGH_REPLICAS (nothing appended) while the ISR is smaller than the topic's
``min.insync.replicas``, and otherwise answered once every in-sync replica has the batches,
i.e. when the high watermark passed them; with a single replica in the ISR that is at once.
The answer then is ``ReplicaManager.replication_error``'s (Kafka's ``DelayedProduce`` asking
``Partition.checkEnoughReplicasReachOffset``): NONE only if the ISR still has
``min.insync.replicas`` members; if it shrank below while the batches waited (followers
stalled for ``replica.lag.time.max.ms``, so the high watermark jumped to the leader's log end),
NOT_ENOUGH_REPLICAS_AFTER_APPEND, retriable: the batches stay in the log, but fewer replicas
than promised hold them. A partition whose leadership is lost while it waits answers
NOT_LEADER_OR_FOLLOWER.
Errors are per partition; a partition that fails does not stop the others. A partition whose
append the disk refuses (ENOSPC, EIO) is answered KAFKA_STORAGE_ERROR with its log unchanged,
and accepts writes again as soon as the disk does.

Transactional batches (Produce v3+ with a transactional id) are appended as idempotent ones
are, and open or continue their producer's transaction at their first offset; the first of a
transaction in a partition is appended only once its coordinator confirms that the partition
is in the transaction (KIP-890 verification, ``server/txn_verification.py``). A
non-transactional batch from a producer whose transaction is open is answered
INVALID_TXN_STATE (``coordinator/producer_state.py``). The fast path hands them all here.

Records that decompress to more than may be checked on the event loop (a "bomb", or a very
large batch) are checked on a worker thread (``ReplicaManager.append_off_loop``); the
request is answered once those appends are made, and later appends to the partition queue
behind them. Refusals carry ``error_message`` and, for record-level errors (v8+), KIP-467
``record_errors``.

A partition whose unflushed offsets reached ``flush.messages`` is answered only once its log is
flushed through the append (``produce_flush``: one fsync in flight per log, shared by every
produce that arrived meanwhile); a failed fsync answers KAFKA_STORAGE_ERROR for it.

The most common request never gets here: ``server/produce_fast_path.py`` takes plain
batches (no producer id, topics that keep batches as produced, acks 1, or acks -1 on a
partition whose only replica is this broker) in a few C calls, and hands everything else,
unchanged, to this handler.
"""

from __future__ import annotations

import asyncio
import logging

from odradek.protocol.generated.error_codes import ErrorCode
from odradek.protocol.generated.produce_response import (
    BatchIndexAndErrorMessage,
    PartitionProduceResponse,
    ProduceResponse,
    TopicProduceResponse,
)
from odradek.replication.partition import CheckOffLoop
from odradek.replication.produce_validation import ProduceError
from odradek.server.handlers.produce_flush import flush_all
from odradek.server.txn_verification import verification
from odradek.server import authorize, client_quota_manager
from odradek.protocol.acl_binding import TOPIC, TRANSACTIONAL_ID, WRITE
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
    elif request.transactional_id is not None and not authorize.allowed(
            ctx, WRITE, TRANSACTIONAL_ID, request.transactional_id):
        refusal = (ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, None)
    topics = []
    appended = []  # (topic, index, response, last offset) of the partitions appended
    queued = []  # (task, topic, response, record bytes) of appends queued off the event loop
    for topic in request.topic_data:
        name = topic.name
        responses = []
        # Kafka's handleProduceRequest: WRITE on each topic, else TOPIC_AUTHORIZATION_FAILED
        denied = refusal is None and not authorize.allowed(ctx, WRITE, TOPIC, name)
        for data in topic.partition_data:
            if refusal is not None:
                resp, last_offset = _error(data.index, *refusal)
            elif denied:
                resp, last_offset = _error(data.index, ErrorCode.TOPIC_AUTHORIZATION_FAILED)
            else:
                resp, last_offset = _produce_one(broker, acks, name, data, request.transactional_id)
            if isinstance(resp, asyncio.Future):
                task, (resp, _) = resp, _error(data.index, ErrorCode.NONE)  # filled in when done
                queued.append((task, name, resp, len(data.records)))
            elif last_offset >= 0:
                appended.append((name, data.index, resp, last_offset))
            responses.append(resp)
        topics.append(TopicProduceResponse(name=name, partition_responses=responses))
    throttle_ms = 0 if broker.client_quotas.empty else _throttle(ctx, request)
    if queued:
        return _finish_queued(broker, acks, request.timeout_ms, topics, appended, queued, throttle_ms)
    return _finish(broker, acks, request.timeout_ms, topics, appended, throttle_ms)


def _throttle(ctx, request) -> int:
    """Kafka's produce quota: the request's record bytes count against the client's
    ``producer_byte_rate`` (server/client_quota_manager.py)."""
    nbytes = sum(len(d.records) for t in request.topic_data for d in t.partition_data if d.records is not None)
    return client_quota_manager.throttle(ctx, ctx.broker.produce_quotas, nbytes)


def _finish(broker, acks: int, timeout_ms: int, topics, appended, throttle_ms: int = 0):
    """The response (NO_RESPONSE or CLOSE_CONNECTION for acks=0; a coroutine when it waits
    for flushes or replication) once every partition was appended or refused."""
    waits = [(name, index, last_offset, resp) for name, index, resp, last_offset in appended] if acks == -1 else []
    flushes = (broker.replica_manager.flushes_due_by_messages([(n, i, resp) for n, i, resp, _ in appended])
               if appended else ())
    if acks == 0:
        if flushes:
            broker.track(asyncio.ensure_future(flush_all([(log, up_to) for log, up_to, _ in flushes])))
        # No response to carry an error: Kafka closes the connection instead, which makes
        # the client refresh its metadata and notice.
        failed = any(r.error_code for t in topics for r in t.partition_responses)
        return CLOSE_CONNECTION if failed else NO_RESPONSE
    response = ProduceResponse(responses=topics, throttle_time_ms=throttle_ms)
    if flushes or (waits and not broker.replica_manager.all_replicated(waits)):
        return _complete(broker, flushes, waits, timeout_ms, response)
    return response


async def _finish_queued(broker, acks: int, timeout_ms: int, topics, appended, queued, throttle_ms: int = 0):
    """``_finish`` once the appends queued off the event loop are made."""
    for task, topic, resp, nbytes in queued:
        try:
            result = await task
        except ProduceError as e:
            broker.log_bad_input(f"produce to {topic}-{resp.index} refused: {e.error.name}: {e}")
            broker.metrics.topics.produce_failed(topic, e.error)
            _set_error(resp, e)
            continue
        broker.metrics.topics.produced(topic, result.base_offset, result.last_offset, nbytes)
        resp.base_offset = result.base_offset
        resp.log_append_time_ms = result.log_append_time
        resp.log_start_offset = result.log_start_offset
        appended.append((topic, resp.index, resp, result.last_offset))
    result = _finish(broker, acks, timeout_ms, topics, appended, throttle_ms)
    return await result if asyncio.iscoroutine(result) else result


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


def _set_error(resp: PartitionProduceResponse, e: ProduceError) -> None:
    """A refusal in ``resp``: the code, the message and KIP-467 record errors (encoded v8+)."""
    resp.error_code = e.error
    resp.base_offset = -1
    resp.error_message = str(e)
    resp.record_errors = [BatchIndexAndErrorMessage(i, m) for i, m in e.record_errors]


def _produce_one(broker, acks: int, topic: str, data, transactional_id: str | None):
    """The partition's response and the last offset appended (-1 when none); instead of a
    response, the task of an append queued off the event loop (behind the others of the
    partition, or behind its transaction's verification)."""
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
            broker.metrics.topics.produce_failed(topic, ErrorCode.NOT_ENOUGH_REPLICAS)
            return _error(index, ErrorCode.NOT_ENOUGH_REPLICAS, f"{len(part.isr)} in-sync replica(s) of "
                          f"{topic}-{index}, min.insync.replicas is {min_isr}")
    replica_manager = broker.replica_manager
    verifying = verification(broker, part, data.records, transactional_id)
    if verifying is not None:
        if isinstance(verifying, ProduceError):
            broker.log_bad_input(f"produce to {topic}-{index} refused: {verifying.error.name}: {verifying}")
            broker.metrics.topics.produce_failed(topic, verifying.error)
            resp, _ = _error(index, verifying.error)
            _set_error(resp, verifying)
            return resp, -1
        return replica_manager.append_off_loop(part, data.records, heavy=False, verifying=verifying), -1
    if replica_manager.checking_off_loop(part.key):  # behind an append checked off the loop
        return replica_manager.append_off_loop(part, data.records, heavy=False), -1
    try:
        result = replica_manager.append(part, data.records)
    except CheckOffLoop:
        return replica_manager.append_off_loop(part, data.records, heavy=True), -1
    except ProduceError as e:
        if e.error == ErrorCode.KAFKA_STORAGE_ERROR:
            broker.log_storage_error(e)  # the disk, not the client: its log is unchanged
        else:
            broker.log_bad_input(f"produce to {topic}-{index} refused: {e.error.name}: {e}")
        broker.metrics.topics.produce_failed(topic, e.error)
        resp, _ = _error(index, e.error)
        _set_error(resp, e)
        return resp, -1
    broker.metrics.topics.produced(topic, result.base_offset, result.last_offset, len(data.records))
    # No current_leader: it is for NOT_LEADER_OR_FOLLOWER answers, and leaving it None spares
    # building (and, when encoding, comparing) a default LeaderIdAndEpoch per partition.
    resp = PartitionProduceResponse(index=index, error_code=ErrorCode.NONE, base_offset=result.base_offset,
                                    log_append_time_ms=result.log_append_time,
                                    log_start_offset=result.log_start_offset, current_leader=None)
    return resp, result.last_offset


async def _await_replication(broker, waits, timeout_ms: int, response):
    """acks=all: hold the response until the high watermarks cover the appends. A partition
    whose leadership moved meanwhile answers NOT_LEADER_OR_FOLLOWER (the new leader may not
    have the records: the producer retries there), one whose ISR fell below
    ``min.insync.replicas`` before its high watermark passed NOT_ENOUGH_REPLICAS_AFTER_APPEND,
    one still short of it after the timeout REQUEST_TIMED_OUT."""
    replica_manager = broker.replica_manager
    await replica_manager.wait_for_replication(waits, timeout_ms / 1000)
    for topic, index, last_offset, resp in waits:
        error = replica_manager.replication_error(topic, index, last_offset)
        if error is None:
            resp.error_code = ErrorCode.REQUEST_TIMED_OUT
        elif error != ErrorCode.NONE:
            resp.error_code = error
    return response
