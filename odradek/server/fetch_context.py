"""``FetchContext``: how one Fetch request relates to a fetch session (KIP-227, Kafka's
``FetchManager.newContext`` and the contexts of ``FetchSession.scala``).

``new_context`` reads the request's ``session_id`` and ``session_epoch``:
- epoch -1 (``FINAL_EPOCH``): a sessionless full fetch (``SessionlessFetchContext``); a
  ``session_id`` other than 0 is closed first;
- epoch 0 (``INITIAL_EPOCH``): a full fetch that asks for a session (``FullFetchContext``); a
  ``session_id`` other than 0 is closed first; the response carries the new session's id, or 0
  when the cache has no room (``fetch_session_cache.py``);
- epoch > 0: an incremental fetch of session ``session_id`` (``IncrementalFetchContext``): an
  unknown id is FETCH_SESSION_ID_NOT_FOUND, an epoch other than the session's next one
  INVALID_FETCH_SESSION_EPOCH, a session made with topic ids (Fetch v13+) fetched by a version
  without them, or the reverse, FETCH_SESSION_TOPIC_ID_ERROR (``SessionErrorContext``: the
  top-level error, no partitions, session id 0). The request's partitions are added to the
  session or update it, ``forgotten_topics_data`` (by topic id from v13, by name before)
  leaves it; the broker then reads every partition of the session, and answers only those
  ``CachedPartition.must_respond`` selects. A session left with no partitions is removed and
  the fetch answered sessionless.

The handler (``handlers/fetch.py``) reads ``context.topics`` (``FetchTopic`` values, in the
order to read) and passes what it read to ``context.response_topics``.
"""

from __future__ import annotations

from odradek.protocol.generated.error_codes import ErrorCode
from odradek.protocol.generated.fetch_request import FetchPartition, FetchTopic
from odradek.server.fetch_session_cache import (
    FINAL_EPOCH, INITIAL_EPOCH, INVALID_SESSION_ID, CachedPartition, FetchSession, FetchSessionCache, next_epoch,
)


class SessionlessFetchContext:
    """Every partition asked for is read and answered; no session."""
    error = ErrorCode.NONE

    def __init__(self, request):
        self.topics = request.topics
        self.session_id = INVALID_SESSION_ID

    def response_topics(self, topics: list, throttled: bool) -> list:
        return topics


class SessionErrorContext(SessionlessFetchContext):
    """A session-level error: nothing read, no partitions answered."""

    def __init__(self, error: ErrorCode):
        self.topics = []
        self.session_id = INVALID_SESSION_ID
        self.error = error


class FullFetchContext(SessionlessFetchContext):
    """A full fetch at epoch 0: answered in full, then a session is made of its partitions,
    each remembering what was sent (unless the answer was throttled, as Kafka's
    ``getThrottledResponse`` makes none)."""

    def __init__(self, request, cache: FetchSessionCache, now: int, uses_topic_ids: bool, privileged: bool):
        super().__init__(request)
        self._request, self._cache, self._now = request, cache, now
        self._uses_topic_ids, self._privileged = uses_topic_ids, privileged

    def response_topics(self, topics: list, throttled: bool) -> list:
        if throttled:
            return topics
        partitions = {}
        for ft, out in zip(self._request.topics, topics):
            for fp, resp in zip(ft.partitions, out.partitions):
                cached = _cached(ft, fp)
                cached.must_respond(resp, update=True)
                partitions[(ft.topic_id, fp.partition) if self._uses_topic_ids else (ft.topic, fp.partition)] = cached
        self.session_id = self._cache.maybe_create_session(self._now, self._privileged, self._uses_topic_ids, partitions)
        return topics


class IncrementalFetchContext(SessionlessFetchContext):
    """Reads the whole session; answers the partitions with news. Partitions answered with
    records move to the end of the session's order, so a response byte limit does not keep
    starving the same partitions (Kafka does the same)."""

    def __init__(self, session: FetchSession):
        self.session = session
        self.session_id = session.id
        self.topics = _session_topics(session)

    def response_topics(self, topics: list, throttled: bool) -> list:
        if throttled:
            return []
        parts = self.session.partitions
        answered = []
        for ft, out in zip(self.topics, topics):
            kept = []
            for resp in out.partitions:
                key = self.session.key(ft.topic, ft.topic_id, resp.partition_index)
                cached = parts.get(key)
                if cached is None or not cached.must_respond(resp, update=True):
                    continue
                kept.append(resp)
                if resp.records and len(resp.records) > 0:
                    parts[key] = parts.pop(key)
            if kept:
                out.partitions = kept
                answered.append(out)
        return answered


def new_context(cache: FetchSessionCache, request, now: int, uses_topic_ids: bool, privileged: bool):
    """The context for ``request`` (see the module docstring). Takes the session's epoch: two
    fetches racing on one epoch cannot both succeed."""
    epoch, session_id = request.session_epoch, request.session_id
    if epoch in (FINAL_EPOCH, INITIAL_EPOCH):
        if session_id != INVALID_SESSION_ID:
            cache.remove(session_id)
        if epoch == FINAL_EPOCH:
            return SessionlessFetchContext(request)
        return FullFetchContext(request, cache, now, uses_topic_ids, privileged)
    session = cache.get(session_id)
    if session is None:
        return SessionErrorContext(ErrorCode.FETCH_SESSION_ID_NOT_FOUND)
    if session.epoch != epoch:
        return SessionErrorContext(ErrorCode.INVALID_FETCH_SESSION_EPOCH)
    if session.uses_topic_ids != uses_topic_ids:
        return SessionErrorContext(ErrorCode.FETCH_SESSION_TOPIC_ID_ERROR)
    _update(session, request)
    if not session.partitions:
        cache.remove(session.id)
        return SessionlessFetchContext(request)
    cache.touch(session, now)
    session.epoch = next_epoch(session.epoch)
    return IncrementalFetchContext(session)


def _update(session: FetchSession, request) -> None:
    """Kafka's ``FetchSession.update``: partitions added or changed, then forgotten ones."""
    parts = session.partitions
    for ft in request.topics:
        for fp in ft.partitions:
            key = session.key(ft.topic, ft.topic_id, fp.partition)
            cached = parts.get(key)
            if cached is None:
                parts[key] = _cached(ft, fp)
            else:
                cached.update_request(fp)
    for forgotten in request.forgotten_topics_data:
        for p in forgotten.partitions:
            parts.pop(session.key(forgotten.topic, forgotten.topic_id, p), None)


def _cached(ft, fp) -> CachedPartition:
    return CachedPartition(ft.topic_id, ft.topic, fp.partition, fp.fetch_offset, fp.log_start_offset,
                           fp.partition_max_bytes, fp.current_leader_epoch, fp.last_fetched_epoch)


def _session_topics(session: FetchSession) -> list[FetchTopic]:
    """The session's partitions as request topics, consecutive partitions of one topic
    grouped, in the session's order."""
    topics: list[FetchTopic] = []
    for c in session.partitions.values():
        if not topics or (topics[-1].topic_id, topics[-1].topic) != (c.topic_id, c.topic):
            topics.append(FetchTopic(topic=c.topic, topic_id=c.topic_id, partitions=[]))
        topics[-1].partitions.append(FetchPartition(
            partition=c.partition, current_leader_epoch=c.current_leader_epoch, fetch_offset=c.fetch_offset,
            last_fetched_epoch=c.last_fetched_epoch, log_start_offset=c.fetcher_log_start_offset,
            partition_max_bytes=c.max_bytes))
    return topics
