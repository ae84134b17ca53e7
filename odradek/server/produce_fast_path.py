"""The produce fast path: the common Produce request, from frame to response bytes in a few
calls, the generic path (``handlers/produce.py``) taking every other one.

Why it exists: a Produce request from a batching client (kcat, librdkafka, the Java client:
~0.5-1 MB every few milliseconds) costs the generic path ~140 Python calls (decode into
dataclasses, handler, partition, log, response encode). Run every 5 ms on a core the client
used meanwhile, that Python ran ~3x slower than back to back (cold caches), and it was half
of the broker's CPU per record (issue 8 has the profiles). Here the work per request is three
C calls (``protocol/_produce_codec.c`` parses the frame and encodes the response,
``records/_log_validator.c`` checks and numbers each partition's batches) around the
log append, which stays the one in ``storage/log.py``.

Contract: ``ProduceFastPath.handle(frame, connection)`` returns the whole response frame
(bytes), or None when the request is not one it takes, in which case it changed nothing but
batch fields every append overwrites (base offset, leader epoch) and the caller runs the
generic path on the same frame, which answers exactly as it always did. It takes a request
when:

- it is Produce v3-v11 without a transactional id, well formed (else the generic decoder's
  answer: an error or a closed connection);
- with an authorizer (``authorizer.class.name``), the connection's principal may WRITE every
  topic of it (``server/authorize.py``, as the generic path asks); a denied topic is answered
  TOPIC_AUTHORIZATION_FAILED by the generic path, so refusals are written in one place;
- no client has a ``request_percentage`` quota (those time the generic handlers,
  ``server/client_request_quota.py``; a rare setting, so the fast path does not time itself);
- acks is 1, or -1 where the append alone completes the acks=all wait: this broker the only
  replica the high watermark waits for (the ISR, and no followers at all: a caught-up
  follower outside the ISR holds the high watermark too, ``isr.high_watermark_bound``) and
  ``min.insync.replicas`` met (else the generic path refuses NOT_ENOUGH_REPLICAS before
  appending). The answer is then the completion rule's, asked after the append as the
  generic path asks it (``Partition.check_enough_replicas_reach_offset``); acks=0 goes the
  generic way (no response either way);
- every partition is led here, is not an internal topic, appears once, and its topic keeps
  batches as produced (``compression.type=producer``, CreateTime, no ``flush.messages``);
- every partition's batches pass the generic path's checks (their records walked in C,
  compressed ones decompressed up to ``INLINE_DECOMPRESSED``), none has a producer id (the
  idempotent and transactional producers' sequence checks stay in Python), none is legacy,
  and no append to the partition waits for records checked off the event loop.

Nothing is appended until every partition is known to pass, so a request is handled entirely
here or entirely by the generic path. The response is what the generic path would send for
the same appends (the codec's tests prove the bytes equal), throttle time included: while
some client quota exists, the request's record bytes count against the client's
``producer_byte_rate`` and a client over it is muted (``server/client_quota_manager.py``),
exactly as the generic path does it. A partition whose append the disk refuses (ENOSPC, EIO)
is answered KAFKA_STORAGE_ERROR with its log unchanged, as the generic path answers it; the
others are appended and answered as usual.
"""

from __future__ import annotations

from odradek.protocol._produce_codec import encode_response, parse_request
from odradek.protocol.acl_binding import TOPIC, WRITE
from odradek.protocol.generated import ApiKey
from odradek.protocol.generated.error_codes import ErrorCode
from odradek.replication.produce_validation import ProduceError
from odradek.server.authorize import connection_allowed
from odradek.server.internal_topics import INTERNAL_TOPICS
from odradek.server.client_quota_manager import throttle_connection


class ProduceFastPath:
    """Takes Produce requests of the common kind for one broker (see the module docstring)."""

    def __init__(self, broker) -> None:
        self._broker = broker
        replica_manager = broker.replica_manager
        self._partitions = replica_manager.partitions  # (topic, index) -> Partition, live
        self._checking_off_loop = replica_manager.off_loop_appends  # keys with queued appends, live
        self._notify = replica_manager.notify
        self._min_insync_replicas = replica_manager.min_insync_replicas  # topic -> its effective value
        self._clock = replica_manager.clock
        self._broker_id = broker.broker_id
        self._quotas = broker.client_quotas  # QuotaCache: .empty while no client quota exists
        self._produce_quotas = broker.produce_quotas  # producer_byte_rate's ClientQuotaManager
        self._topic_stats = broker.metrics.topics  # BrokerTopicStats: messages and bytes in, per topic

    def handle(self, frame, connection) -> bytes | None:
        """The response frame to the Produce request ``frame`` that ``connection`` (a
        ``server/connection.py`` Connection: principal, client host, ``throttle``) sent, or
        None for the generic path (see the module docstring)."""
        quotas = self._quotas
        if quotas.requests:  # request_percentage: Broker.dispatch times the generic handler
            return None
        parsed = parse_request(frame)
        if parsed is None:
            return None
        version, correlation_id, client_id, acks, _timeout_ms, topics = parsed
        if acks != 1 and acks != -1:
            return None
        if self._broker.authorizer is not None and not self._writable(topics, connection):
            return None  # the generic path answers TOPIC_AUTHORIZATION_FAILED
        plan = self._plan(topics, acks)
        if plan is None:
            return None
        responses = []
        notify = self._notify
        topic_stats = self._topic_stats
        for name, appends in plan:
            answers = []
            stats = topic_stats.topics.get(name) or topic_stats.topic(name)
            for part, index, records, info in appends:
                try:
                    part.append_plain(records, info)
                except ProduceError as e:  # the disk refused: this partition alone fails
                    self._broker.log_storage_error(e)
                    answers.append((index, e.error, -1, -1, -1))
                    continue
                notify((name, index))
                stats.messages_in += info[1] - info[0] + 1  # (v2 batches: offsets are contiguous)
                stats.bytes_in += len(records)
                error = 0 if acks == 1 else self._acks_all_error(part, info[1])
                answers.append((index, error, info[0], -1, part.log.log_start_offset))
            responses.append((name, answers))
        throttle_ms = 0 if quotas.empty else self._throttle(topics, connection, client_id)
        return encode_response(version, correlation_id, responses, throttle_ms)

    def _writable(self, topics, connection) -> bool:
        """WRITE on every topic of the request, as the generic path checks it. A denial here
        only hands the request over: the generic path asks again and audit-logs it at INFO."""
        broker = self._broker
        for name, _ in topics:
            if not connection_allowed(broker, connection, WRITE, TOPIC, name, api_key=ApiKey.PRODUCE,
                                      log_if_denied=False):
                return False
        return True

    def _throttle(self, topics, connection, client_id: str | None) -> int:
        """The generic path's produce quota: the request's record bytes count against the
        client's ``producer_byte_rate``; over it, the connection is muted for the time returned."""
        nbytes = sum(len(records) for _, partition_data in topics for _, records in partition_data)
        return throttle_connection(connection, client_id, self._produce_quotas, nbytes)

    def _plan(self, topics, acks: int) -> list | None:
        """``[(topic, [(partition, index, records, info)])]`` once every partition passed,
        offsets assigned; None as soon as one would need the generic path."""
        partitions = self._partitions
        broker_id = self._broker_id
        clock = self._clock
        checking = self._checking_off_loop
        plan = []
        count = 0
        for name, partition_data in topics:
            if name in INTERNAL_TOPICS:
                return None
            appends = []
            for index, records in partition_data:
                part = partitions.get((name, index))
                if part is None or part.leader_id != broker_id or part.key in checking:
                    return None  # (checking: appends queue behind one checked off the loop)
                if acks == -1 and not self._replicated_on_append(part):
                    return None
                info = part.prepare_plain_append(records, clock)
                if info is None:
                    return None
                appends.append((part, index, records, info))
            count += len(appends)
            plan.append((name, appends))
        if count > 1 and len({a[0].key for _, appends in plan for a in appends}) != count:
            return None  # a partition twice: each append must see the other's offsets
        return plan

    def _replicated_on_append(self, part) -> bool:
        """acks=-1 is taken only when the append alone moves the high watermark past the
        records (this broker the whole ISR, no followers: ``maybe_advance_high_watermark``
        then goes to the log end offset) and one in-sync replica satisfies
        ``min.insync.replicas`` (else the generic path waits, or refuses before appending)."""
        isr = part.isr
        return (len(isr) == 1 and isr[0] == self._broker_id and not part.followers
                and self._min_insync_replicas(part.topic) <= 1)

    def _acks_all_error(self, part, last_offset: int) -> int:
        """The acks=-1 answer of an append that ``_replicated_on_append`` admitted: the
        completion rule's (``Partition.check_enough_replicas_reach_offset``), NONE there. Were
        the wait not over after all, REQUEST_TIMED_OUT (the generic path's answer to a wait
        that never ends, retriable): never NONE before the high watermark passed the records."""
        error = part.check_enough_replicas_reach_offset(self._broker_id, last_offset, self._min_insync_replicas)
        return ErrorCode.REQUEST_TIMED_OUT if error is None else error
