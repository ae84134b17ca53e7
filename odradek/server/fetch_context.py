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
  leaves it; the broker then reads the session's partitions that may have news
  (``fetch_session_changes.py``: those pending; every partition when the session has no
  change tracking), and answers only those ``CachedPartition.must_respond`` selects. A
  session left with no partitions is removed and the fetch answered sessionless.

The handler (``handlers/fetch.py``) reads ``context.topics`` (``FetchTopic`` values, in the
order to read) and passes what it read to ``context.response_topics``, with the session keys
of the partitions read that are ``settled`` (nothing left to say until they change). A
context that ``tracks_changes`` may have nothing to read: the handler then waits on it
(``wait``), reads what ``more`` adds, and calls ``release`` in any case when done (it gives
an unanswered fetch's partitions back to the session).
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
    tracks_changes = False

    def __init__(self, request):
        self.topics = request.topics
        self.session_id = INVALID_SESSION_ID

    def response_topics(self, topics: list, throttled: bool, settled: set | None = None) -> list:
        return topics

    def release(self) -> None:
        pass


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

    def __init__(self, request, cache: FetchSessionCache, now: int, uses_topic_ids: bool, privileged: bool,
                 make_changes=None):
        super().__init__(request)
        self._request, self._cache, self._now = request, cache, now
        self._uses_topic_ids, self._privileged = uses_topic_ids, privileged
        self._make_changes = make_changes

    def response_topics(self, topics: list, throttled: bool, settled: set | None = None) -> list:
        if throttled:
            return topics
        partitions = {}
        for ft, out in zip(self._request.topics, topics):
            for fp, resp in zip(ft.partitions, out.partitions):
                cached = _cached(ft, fp)
                cached.must_respond(resp, update=True)
                partitions[(ft.topic_id, fp.partition) if self._uses_topic_ids else (ft.topic, fp.partition)] = cached
        for position, cached in enumerate(partitions.values()):
            cached.position = position
        changes = self._make_changes() if self._make_changes is not None else None
        self.session_id = self._cache.maybe_create_session(self._now, self._privileged, self._uses_topic_ids,
                                                           partitions, changes)
        if self.session_id != INVALID_SESSION_ID and changes is not None:  # what this answer left unsaid is read next
            changes.last_fetch_ms = self._now
            settled = settled or set()
            for key in partitions:
                changes.add(key, pending=key not in settled)
        return topics


class IncrementalFetchContext(SessionlessFetchContext):
    """Reads the session's partitions that may have news (all of them without change
    tracking); answers those with news. Partitions answered with records move to the end of
    the session's order, so a response byte limit does not keep starving the same partitions
    (Kafka does the same)."""

    def __init__(self, session: FetchSession, now: int = 0):
        self.session = session
        self.session_id = session.id
        self.changes = session.changes
        self.tracks_changes = self.changes is not None
        self._answered = False
        if self.tracks_changes:
            self._read: dict = dict.fromkeys(self.changes.take(now))
            self.topics = _session_topics(session, self._read)
        else:
            self.topics = _session_topics(session)

    async def wait(self, timeout_s: float) -> None:
        await self.changes.wait(timeout_s)

    def more(self) -> bool:
        """Add what changed while the fetch waited to what it reads (``topics``); whether
        anything was added."""
        changed = self.changes.take_more()
        if not changed:
            return False
        self._read.update(dict.fromkeys(changed))  # (one read already may have changed again)
        self.topics = _session_topics(self.session, self._read)
        return True

    @property
    def closed(self) -> bool:
        """The session went (closed, evicted) while the fetch waited."""
        return self.changes.closed

    def response_topics(self, topics: list, throttled: bool, settled: set | None = None) -> list:
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
                    self.session.move_to_end(key)
            if kept:
                out.partitions = kept
                answered.append(out)
        if self.tracks_changes:
            self._answered = True
            self.changes.settle(self._read, settled or set())
        return answered

    def release(self) -> None:
        """An unanswered fetch (throttled, failed, cancelled) gives back what it took."""
        if self.tracks_changes and not self._answered:
            self._answered = True
            self.changes.restore(self._read)


def new_context(cache: FetchSessionCache, request, now: int, uses_topic_ids: bool, privileged: bool,
                make_changes=None):
    """The context for ``request`` (see the module docstring). Takes the session's epoch: two
    fetches racing on one epoch cannot both succeed. ``make_changes``: makes a new session's
    change tracking (``fetch_session_changes.changes_factory``); None: sessions read all their
    partitions at every fetch."""
    epoch, session_id = request.session_epoch, request.session_id
    if epoch in (FINAL_EPOCH, INITIAL_EPOCH):
        if session_id != INVALID_SESSION_ID:
            cache.remove(session_id)
        if epoch == FINAL_EPOCH:
            return SessionlessFetchContext(request)
        return FullFetchContext(request, cache, now, uses_topic_ids, privileged, make_changes)
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
    return IncrementalFetchContext(session, now)


def _update(session: FetchSession, request) -> None:
    """Kafka's ``FetchSession.update``: partitions added or changed, then forgotten ones."""
    parts = session.partitions
    changes = session.changes
    for ft in request.topics:
        for fp in ft.partitions:
            key = session.key(ft.topic, ft.topic_id, fp.partition)
            cached = parts.get(key)
            if cached is None:
                session.add(key, _cached(ft, fp))
            else:
                cached.update_request(fp)
            if changes is not None:
                changes.add(key)
    for forgotten in request.forgotten_topics_data:
        for p in forgotten.partitions:
            key = session.key(forgotten.topic, forgotten.topic_id, p)
            if parts.pop(key, None) is not None and changes is not None:
                changes.remove(key)


def _cached(ft, fp) -> CachedPartition:
    return CachedPartition(ft.topic_id, ft.topic, fp.partition, fp.fetch_offset, fp.log_start_offset,
                           fp.partition_max_bytes, fp.current_leader_epoch, fp.last_fetched_epoch)


def _session_topics(session: FetchSession, keys=None) -> list[FetchTopic]:
    """The session's partitions (those of ``keys`` only, when given) as request topics,
    consecutive partitions of one topic grouped, in the session's order."""
    topics: list[FetchTopic] = []
    if keys is None:
        chosen = session.partitions.values()
    else:
        parts = session.partitions
        chosen = sorted((parts[k] for k in keys if k in parts), key=lambda c: c.position)
    for c in chosen:
        if not topics or (topics[-1].topic_id, topics[-1].topic) != (c.topic_id, c.topic):
            topics.append(FetchTopic(topic=c.topic, topic_id=c.topic_id, partitions=[]))
        topics[-1].partitions.append(FetchPartition(
            partition=c.partition, current_leader_epoch=c.current_leader_epoch, fetch_offset=c.fetch_offset,
            last_fetched_epoch=c.last_fetched_epoch, log_start_offset=c.fetcher_log_start_offset,
            partition_max_bytes=c.max_bytes))
    return topics
