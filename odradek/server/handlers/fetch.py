"""Fetch (key 1): whole batches from each partition, starting at the batch holding the offset.

Records are never decoded: each partition's answer is a file region of the log that the
connection sends as it lies on disk. Limits: ``partition_max_bytes`` per partition and
``max_bytes`` for the response, except that the first partition with data always gets at least
one whole batch (so a batch larger than the limits cannot stall a consumer). Consumers read
up to the high watermark (the last stable offset for ``read_committed``, equal without
transactions); followers (``replica_id >= 0``) up to the log end.

Long poll: while the response holds fewer than ``min_bytes`` and no partition has an error, the
fetch waits for an append to one of its partitions or for ``max_wait_ms``.

Fetch sessions (KIP-227): odradek answers every fetch in full and never creates a session
(``session_id`` 0 in the response, which the protocol defines as "no session"), so clients keep
sending full requests. A request naming a session id gets FETCH_SESSION_ID_NOT_FOUND, as from a
broker that has evicted that session.
"""

from __future__ import annotations

from dataclasses import dataclass

from odradek.protocol.generated.error_codes import ErrorCode
from odradek.protocol.generated.fetch_response import FetchableTopicResponse, FetchResponse, PartitionData
from odradek.server.read_errors import answer_read_error
from odradek.storage.errors import OffsetOutOfRangeError

READ_COMMITTED = 1


@dataclass(slots=True)
class _Wanted:
    topic: str | None
    topic_id: object
    request: object  # FetchPartition
    response: PartitionData


async def handle(ctx, request):
    broker = ctx.broker
    if request.session_id != 0:
        return FetchResponse(error_code=ErrorCode.FETCH_SESSION_ID_NOT_FOUND, session_id=0)
    if request.session_epoch not in (-1, 0):
        return FetchResponse(error_code=ErrorCode.INVALID_FETCH_SESSION_EPOCH, session_id=0)
    by_id = ctx.api_version >= 13
    wanted, topics = _plan(broker, request, by_id)
    total = _read_all(broker, request, wanted)
    errors = any(w.response.error_code for w in wanted)
    if total < request.min_bytes and request.max_wait_ms > 0 and not errors and wanted:
        loop_time = broker.loop_time
        deadline = loop_time() + request.max_wait_ms / 1000
        keys = {(w.topic, w.request.partition) for w in wanted}
        while total < request.min_bytes:
            remaining = deadline - loop_time()
            if remaining <= 0 or broker.stopping:
                break
            await broker.replica_manager.wait_for_appends(keys, remaining)
            total = _read_all(broker, request, wanted)
    return FetchResponse(throttle_time_ms=0, error_code=ErrorCode.NONE, session_id=0, responses=topics)


def _plan(broker, request, by_id: bool):
    image = broker.metadata_image()
    wanted: list[_Wanted] = []
    topics: list[FetchableTopicResponse] = []
    for ft in request.topics:
        if by_id:
            assignment = image.topic_by_id(ft.topic_id)
            name = assignment.name if assignment is not None else None
        else:
            name = ft.topic
        out = FetchableTopicResponse(topic=ft.topic, topic_id=ft.topic_id, partitions=[])
        for fp in ft.partitions:
            resp = PartitionData(partition_index=fp.partition, high_watermark=-1, records=b"")
            if name is None:
                resp.error_code = ErrorCode.UNKNOWN_TOPIC_ID
            out.partitions.append(resp)
            wanted.append(_Wanted(name, ft.topic_id, fp, resp))
        topics.append(out)
    return wanted, topics


def _read_all(broker, request, wanted: list[_Wanted]) -> int:
    """Fill each partition's response; return the record bytes gathered."""
    budget = request.max_bytes
    total = 0
    consumer = request.replica_id < 0 and _replica_id(request) < 0
    for w in wanted:
        if w.topic is None:
            continue
        size = _read_partition(broker, w, consumer, request.isolation_level,
                               min(w.request.partition_max_bytes, max(budget, 0)), total == 0)
        total += size
        budget -= size
    return total


def _replica_id(request) -> int:
    state = request.replica_state
    return state.replica_id if state is not None else -1


def _read_partition(broker, w: _Wanted, consumer: bool, isolation: int, max_bytes: int, first: bool) -> int:
    resp = w.response
    resp.error_code = ErrorCode.NONE
    resp.records = b""
    part, error = broker.leader_partition(w.topic, w.request.partition)
    if part is None:
        resp.error_code = error
        return 0
    epoch = w.request.current_leader_epoch
    if epoch >= 0 and epoch != part.leader_epoch:
        resp.error_code = ErrorCode.FENCED_LEADER_EPOCH if epoch < part.leader_epoch else ErrorCode.UNKNOWN_LEADER_EPOCH
        return 0
    hw = part.high_watermark
    resp.high_watermark = hw
    resp.last_stable_offset = part.last_stable_offset()
    resp.log_start_offset = part.log_start_offset
    if consumer and isolation == READ_COMMITTED:
        resp.aborted_transactions = []
    limit = (resp.last_stable_offset if isolation == READ_COMMITTED else hw) if consumer else None
    try:
        region = part.log.read(w.request.fetch_offset, max_bytes, max_offset=limit, min_one=first)
    except OffsetOutOfRangeError:
        resp.error_code = ErrorCode.OFFSET_OUT_OF_RANGE
        return 0
    except Exception as e:  # a damaged segment or a failing disk: this partition's error only
        resp.error_code = answer_read_error(broker, "fetch", w.topic, w.request.partition, e)
        resp.high_watermark = resp.last_stable_offset = resp.log_start_offset = -1
        return 0
    size = len(region)
    resp.records = region if size else b""
    return size


