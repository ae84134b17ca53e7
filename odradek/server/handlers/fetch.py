"""Fetch (key 1): whole batches from each partition, starting at the batch holding the offset.

Records are never decoded: each partition's answer is a file region of the log that the
connection sends as it lies on disk. Limits: ``partition_max_bytes`` per partition and
``max_bytes`` for the response, except that the first partition with data always gets at least
one whole batch (so a batch larger than the limits cannot stall a consumer). Consumers read
up to the high watermark, or with ``read_committed`` (isolation level 1) up to the last
stable offset, with the aborted transactions (producer id, first offset) whose data overlaps
the range fetched (``replication/transactions.aborted_transactions``: the ``.txnindex`` of the
segments from the fetch offset on, up to the end of the batches sent), so the consumer drops
their records; every answer carries the LSO; followers (``replica_id >= 0``, or ``replica_state.replica_id`` from v15) up
to the log end, and each of their fetches tells the leader how far that follower got
(``_record_follower_fetch``: the high watermark, the ISR). A follower out of the ISR fetching a
throttled replica gets no records while the leader's replication quota is exceeded
(``server/replication_quota_manager.py``).

Fetch quota (``consumer_byte_rate``): a consumer's ``max_bytes`` is capped to what its quota
allows in one quota window, and a fetch that puts it over its quota is answered with no
partitions and the throttle time (its bytes are not counted), as Kafka answers it.

Long poll: while the response holds fewer than ``min_bytes`` and no partition has an error, the
fetch waits for an append to one of its partitions or for ``max_wait_ms``.

Old versions (Fetch v0-v3, from clients that read only the legacy message formats): each
partition's batches are down-converted (``records.down_conversion``), magic 0 for v0-v1 and
magic 1 for v2-v3, within the same byte limits and from at most ~1 MiB of the log per
partition and fetch, unless ``message.downconversion.enable`` (topic) /
``log.message.downconversion.enable`` (broker) is false, when the partition answers
UNSUPPORTED_VERSION (Kafka 3.x). Conversion decodes and re-encodes every record it sends: the
cost is in ``bench/README.md``; newer clients never pay it.

Fetch sessions (KIP-227): ``server/fetch_context.py`` decides which partitions a fetch reads
(a full request's, or an incremental session's) and which the response carries;
``server/fetch_session_cache.py`` holds the sessions (``max.incremental.fetch.session.cache.slots``,
``min.incremental.fetch.session.eviction.ms``). A sessionless fetch (session 0, epoch -1)
is answered as before, with ``session_id`` 0. An incremental fetch reads only the session's
partitions that changed since its last answer or had more to say then
(``server/fetch_session_changes.py``), and when none has news it waits on the session (one
waiter, whatever the session's size) rather than on each partition.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from dataclasses import dataclass

from odradek.protocol.generated.error_codes import ErrorCode
from odradek.protocol.generated.fetch_response import (
    AbortedTransaction,
    FetchableTopicResponse,
    FetchResponse,
    PartitionData,
)
from odradek.replication.transactions import aborted_transactions, fetched_aborted_transactions
from odradek.server import authorize, client_quota_manager
from odradek.protocol.acl_binding import CLUSTER_ACTION, READ, TOPIC
from odradek.server.fetch_context import FullFetchContext, SessionlessFetchContext, new_context
from odradek.server.fetch_from_follower import (
    FETCH_FROM_FOLLOWER_VERSION, client_metadata, preferred_read_replica, readable_partition,
)
from odradek.server.fetch_session_cache import FINAL_EPOCH, FetchSessionCache
from odradek.server.fetch_session_changes import changes_factory, settled_partitions
from odradek.server.read_errors import answer_read_error
from odradek.storage.errors import OffsetOutOfRangeError

READ_COMMITTED = 1
# Fetch versions answered in a legacy message format: version -> magic.
LEGACY_MAGIC = {0: 0, 1: 0, 2: 1, 3: 1}
# A down-converted read that yields nothing (only transaction markers, which legacy formats
# cannot carry) reads on past them, at most this many times per partition and fetch.
_CONVERSION_READS = 4
# Stored bytes converted per partition and fetch, at most (more only for a first batch that is
# larger): an old client asking for 100 MB per partition must not make the broker decode and
# hold 100 MB at once. Sending less than asked is always allowed; the client fetches again.
_CONVERSION_CHUNK = 1 << 20


@dataclass(slots=True)
class _Wanted:
    topic: str | None
    topic_id: object
    request: object  # FetchPartition
    response: PartitionData


async def handle(ctx, request):
    broker = ctx.broker
    if _follower_of(request) >= 0:  # timed as Kafka's FetchFollower (server/metrics/request_metrics.py)
        broker.metrics.requests.mark_follower_fetch()
    by_id = ctx.api_version >= 13
    context = _fetch_context(broker, request, by_id)
    if context.error:
        return FetchResponse(error_code=context.error, session_id=0)
    try:
        return await _answer(ctx, request, context, by_id)
    finally:
        context.release()  # an unanswered fetch gives its partitions back to its session


async def _answer(ctx, request, context, by_id: bool):
    broker = ctx.broker
    request.topics = context.topics
    if ctx.api_version < FETCH_FROM_FOLLOWER_VERSION:
        request.rack_id = None  # no client metadata: read from the leader only (server/fetch_from_follower.py)
    if _follower_of(request) < 0 and not broker.client_quotas.empty:
        _cap_to_fetch_quota(ctx, request)
    may_read = _read_check(ctx, request)
    wanted, topics = _plan(broker, request, by_id, may_read)
    magic = LEGACY_MAGIC.get(ctx.api_version)
    total = (_read_all(broker, request, wanted) if magic is None
             else await _read_converted(broker, request, wanted, magic))
    # a partition sent to its preferred read replica (KIP-392) is answered at once, as an error is
    errors = _answer_now(wanted)
    # A session tracking its changes may have read nothing at all: it waits on the session.
    if (total < request.min_bytes and request.max_wait_ms > 0 and not errors
            and (wanted or context.tracks_changes)):
        loop_time = broker.loop_time
        deadline = loop_time() + request.max_wait_ms / 1000
        keys = {(w.topic, w.request.partition) for w in wanted} if not context.tracks_changes else None
        while total < request.min_bytes:
            remaining = deadline - loop_time()
            if remaining <= 0 or broker.stopping:
                break
            if context.tracks_changes:  # one waiter for the session, woken by any of its partitions
                await context.wait(remaining)
                if not context.more():
                    if context.closed:
                        break
                    continue
                request.topics = context.topics
                wanted, topics = _plan(broker, request, by_id, may_read)
            else:
                await broker.replica_manager.wait_for_appends(keys, remaining)
            total = (_read_all(broker, request, wanted) if magic is None
                     else await _read_converted(broker, request, wanted, magic))
            if context.tracks_changes and _answer_now(wanted):
                break
    throttle_ms = 0
    if _follower_of(request) >= 0:
        _record_throttled(broker, wanted)
    else:
        if not broker.client_quotas.empty:  # Kafka's fetch quota: the bytes returned to a consumer
            throttle_ms = client_quota_manager.throttle(ctx, broker.fetch_quotas, total)
        if throttle_ms > 0:  # answered empty, as Kafka does: the bytes were not sent after all
            broker.fetch_quotas.unrecord(ctx.connection.principal.name, ctx.client_id or "", total)
            topics = []
        else:
            broker.metrics.topics.fetched([(w.topic, w.response.records) for w in wanted])  # BytesOutPerSec
    settled = (settled_partitions(broker, wanted, _follower_of(request), request.isolation_level, by_id)
               if context.tracks_changes or isinstance(context, FullFetchContext) else None)
    topics = context.response_topics(topics, throttled=throttle_ms > 0, settled=settled)
    return FetchResponse(throttle_time_ms=throttle_ms, error_code=ErrorCode.NONE, session_id=context.session_id,
                         responses=topics)


def _answer_now(wanted: list[_Wanted]) -> bool:
    """An error or a preferred read replica: the fetch is answered without waiting."""
    return any(w.response.error_code or w.response.preferred_read_replica >= 0 for w in wanted)


def _fetch_context(broker, request, by_id: bool):
    """The request's fetch session context (``server/fetch_context.py``); Fetch v0-v6 have
    no sessions. The cache lives on the broker, made on first use. Sessions track which of
    their partitions changed (``server/fetch_session_changes.py``)."""
    if request.session_id == 0 and request.session_epoch == FINAL_EPOCH:
        return SessionlessFetchContext(request)
    cache = getattr(broker, "fetch_sessions", None)
    if cache is None:
        cache = broker.fetch_sessions = FetchSessionCache.from_config(broker.config)
    replica_id = _follower_of(request)
    return new_context(cache, request, broker.clock.milliseconds(), by_id, replica_id >= 0,
                       changes_factory(broker, by_id, replica_id))


def _cap_to_fetch_quota(ctx, request) -> None:
    """A consumer's ``max_bytes`` (and ``min_bytes``) at most what its fetch quota allows in
    one quota window (Kafka's KafkaApis does the same)."""
    cap = ctx.broker.fetch_quotas.max_value_in_quota_window(ctx.connection.principal.name, ctx.client_id or "")
    if cap < request.max_bytes:
        request.max_bytes = max(int(cap), 0)
        request.min_bytes = min(request.min_bytes, request.max_bytes)


def _read_check(ctx, request):
    """Kafka's handleFetchRequest: a follower needs CLUSTER_ACTION, a consumer READ on each
    topic; a partition that fails answers TOPIC_AUTHORIZATION_FAILED."""
    if not authorize.enabled(ctx):
        return lambda name: True
    if _follower_of(request) >= 0:
        follower_ok = authorize.allowed_cluster(ctx, CLUSTER_ACTION)
        return lambda name: follower_ok
    return lambda name: authorize.allowed(ctx, READ, TOPIC, name)


def _plan(broker, request, by_id: bool, may_read=lambda name: True):
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
            elif not may_read(name):
                resp.error_code = ErrorCode.TOPIC_AUTHORIZATION_FAILED
                out.partitions.append(resp)
                continue
            out.partitions.append(resp)
            wanted.append(_Wanted(name, ft.topic_id, fp, resp))
        topics.append(out)
    return wanted, topics


def _read_all(broker, request, wanted: list[_Wanted]) -> int:
    """Fill each partition's response; return the record bytes gathered."""
    return sum(_reads(broker, request, wanted, None))


async def _read_converted(broker, request, wanted: list[_Wanted], magic: int) -> int:
    """``_read_all`` in the legacy format ``magic``. Converting is CPU work (~16 ms per MiB,
    ~115 ms per MiB of gzip, ``bench/README.md``): other connections get the event loop
    between partitions."""
    total = 0
    for size in _reads(broker, request, wanted, magic):
        total += size
        if size:
            await asyncio.sleep(0)
    return total


def _reads(broker, request, wanted: list[_Wanted], magic: int | None) -> Iterator[int]:
    """Fill each partition's response in turn, yielding the record bytes of each. ``magic``:
    the legacy format to answer in, None for v2 batches as stored."""
    budget = request.max_bytes
    total = 0
    replica_id = _follower_of(request)
    client = client_metadata(request)
    for w in wanted:
        if w.topic is None:
            continue
        size = _read_partition(broker, w, replica_id, request.isolation_level,
                               min(w.request.partition_max_bytes, max(budget, 0)), total == 0, magic, client)
        total += size
        budget -= size
        yield size


def _follower_of(request) -> int:
    """The fetching follower's broker id (-1: a consumer)."""
    if request.replica_id >= 0:
        return request.replica_id
    state = request.replica_state
    return state.replica_id if state is not None else -1


def _leader_throttled(broker, part, replica_id: int, topic: str) -> bool:
    """Kafka's ``shouldLeaderThrottle``: an out-of-sync follower of a throttled replica gets
    no records while the leader's replication quota is exceeded."""
    quota = broker.replication_quotas.leader
    return replica_id not in part.isr and quota.is_throttled(topic, part.key[1]) and quota.is_quota_exceeded()


def _record_throttled(broker, wanted: list[_Wanted]) -> None:
    """The bytes sent for throttled replicas count against the leader's quota (Kafka's
    ``sizeOfThrottledPartitions``), in sync or not."""
    quota = broker.replication_quotas.leader
    size = sum(len(w.response.records) for w in wanted
               if w.topic is not None and w.response.records and quota.is_throttled(w.topic, w.request.partition))
    quota.record(size)


def _read_partition(broker, w: _Wanted, replica_id: int, isolation: int, max_bytes: int, first: bool,
                    magic: int | None, client=None) -> int:
    resp = w.response
    resp.error_code = ErrorCode.NONE
    resp.records = b""
    resp.preferred_read_replica = -1
    consumer = replica_id < 0
    # the leader, or for a consumer's Fetch v11+ a follower too (server/fetch_from_follower.py)
    part, error = readable_partition(broker, w.topic, w.request.partition, consumer, client)
    if part is None:
        resp.error_code = error
        return 0
    epoch = w.request.current_leader_epoch
    if epoch >= 0 and epoch != part.leader_epoch:
        resp.error_code = ErrorCode.FENCED_LEADER_EPOCH if epoch < part.leader_epoch else ErrorCode.UNKNOWN_LEADER_EPOCH
        return 0
    if not consumer:
        error = _record_follower_fetch(broker, part, replica_id, w.request)
        if error:
            resp.error_code = error
            return 0
    hw = part.high_watermark
    resp.high_watermark = hw
    resp.last_stable_offset = part.last_stable_offset()
    resp.log_start_offset = part.log_start_offset
    if consumer:  # KIP-392: the leader names a closer replica and sends no records
        resp.preferred_read_replica = preferred_read_replica(broker, part, client, w.request.fetch_offset)
        if resp.preferred_read_replica >= 0:
            return 0
    if not consumer and _leader_throttled(broker, part, replica_id, w.topic):
        return 0
    if consumer and isolation == READ_COMMITTED:
        resp.aborted_transactions = []
    limit = (resp.last_stable_offset if isolation == READ_COMMITTED else hw) if consumer else None
    if magic is not None and not _down_conversion_enabled(broker, w.topic):
        resp.error_code = ErrorCode.UNSUPPORTED_VERSION
        return 0
    try:
        if magic is None:
            region = part.log.read(w.request.fetch_offset, max_bytes, max_offset=limit, min_one=first)
        else:
            region = _down_converted(part.log, w.request.fetch_offset, max_bytes, limit, first, magic)
    except OffsetOutOfRangeError:
        resp.error_code = ErrorCode.OFFSET_OUT_OF_RANGE
        return 0
    except Exception as e:  # a damaged segment or a failing disk: this partition's error only
        resp.error_code = answer_read_error(broker, "fetch", w.topic, w.request.partition, e)
        broker.metrics.topics.fetch_failed(w.topic, resp.error_code)
        resp.high_watermark = resp.last_stable_offset = resp.log_start_offset = -1
        return 0
    size = len(region)
    resp.records = region if size else b""
    if size and consumer and isolation == READ_COMMITTED:
        aborted = (fetched_aborted_transactions(part.log, w.request.fetch_offset, region, limit) if magic is None
                   else aborted_transactions(part.log, w.request.fetch_offset, limit))
        resp.aborted_transactions = [AbortedTransaction(t.producer_id, t.first_offset) for t in aborted]
    return size


def _record_follower_fetch(broker, part, replica_id: int, fp) -> ErrorCode:
    """The replica path: follower ``replica_id`` has everything below its fetch offset
    (``Partition.update_follower_fetch_state``). A moved high watermark wakes the produces
    (acks=all) and fetches waiting on the partition; an ISR expansion goes to the controller
    (``AlterPartitionManager``). Recorded before the read, so the answer carries the high
    watermark this fetch moved. A fetch offset past the log end is not recorded (the read
    answers OFFSET_OUT_OF_RANGE: a follower with records the leader lacks truncates first);
    a broker not among the partition's replicas gets NOT_LEADER_OR_FOLLOWER."""
    if fp.fetch_offset > part.log_end_offset:
        return ErrorCode.NONE
    update = part.update_follower_fetch_state(replica_id, fp.fetch_offset, fp.log_start_offset,
                                              broker.clock.milliseconds())
    if update is None:
        return ErrorCode.NOT_LEADER_OR_FOLLOWER
    if update.high_watermark_moved:
        broker.replica_manager.notify(part.key)
    if update.isr_change is not None:
        broker.alter_partitions.submit(part)
    return ErrorCode.NONE


def _down_converted(log, offset: int, max_bytes: int, limit: int | None, first: bool, magic: int) -> bytes:
    """The records from ``offset`` as a legacy message set of ``magic`` (see the module
    docstring): at most ``max_bytes`` of it, but one message at least when ``first``."""
    # Here, not at the top: down-conversion (old clients only) walks records with numpy, which
    # the broker otherwise never loads.
    from odradek.records.down_conversion import down_convert

    start = offset
    for _ in range(_CONVERSION_READS):
        region = log.read(start, min(max_bytes, _CONVERSION_CHUNK), max_offset=limit, min_one=False)
        if not len(region) and (first or max_bytes > _CONVERSION_CHUNK):  # a batch above the chunk
            region = log.read(start, max_bytes, max_offset=limit, min_one=first)
        if not len(region):
            return b""
        converted = down_convert(region.read(), magic, first_offset=offset, max_bytes=max_bytes, min_one=first)
        if converted.message_set or converted.next_offset <= start:
            return converted.message_set
        start = converted.next_offset  # only markers so far: read on past them
    return b""


def _down_conversion_enabled(broker, topic: str) -> bool:
    """``message.downconversion.enable`` of the topic, else the broker's
    ``log.message.downconversion.enable``."""
    value = broker.metadata_image().topic_config(topic).get("message.downconversion.enable")
    return broker.down_conversion_enabled() if value is None else value.strip().lower() == "true"
