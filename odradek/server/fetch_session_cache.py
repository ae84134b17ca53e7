"""``FetchSessionCache``: the broker's incremental fetch sessions (KIP-227, Kafka's
``FetchSession.scala``).

A session remembers, per partition, what its fetcher last asked for (fetch offset, the
fetcher's log start offset, max bytes, leader epochs) and what the broker last sent it (high
watermark, log start offset, last stable offset), so that later requests list only the
partitions that changed and responses carry only the partitions with something new
(``fetch_context.py``).

Invariants and rules, as Kafka's:
- at most ``max.incremental.fetch.session.cache.slots`` sessions (default 1000);
- a session id is a random non-zero int32 not in use; ``epoch`` is the next epoch the session
  expects (1 after creation, then ``next_epoch``: wraps from 2**31-1 to 1);
- a full cache makes room only by eviction (``try_evict``): first the least recently used
  session if it has been idle longer than ``min.incremental.fetch.session.eviction.ms``; else
  the least valuable *evictable* session, valued by ``EvictableKey`` (privileged, partition
  count, id), if the new session is worth at least as much. Evictability is decided when a
  session is touched: a session older than the eviction time (since creation) is evictable by
  anyone; a consumer's (non-privileged) session is evictable at once by a follower's
  (privileged) one. A fetch that finds no room is answered without a session.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

INVALID_SESSION_ID = 0
INITIAL_EPOCH = 0  # a full fetch that asks for a session
FINAL_EPOCH = -1  # a sessionless full fetch, or the close of a session


def next_epoch(epoch: int) -> int:
    """Kafka's ``FetchMetadata.nextEpoch``."""
    if epoch < 0:
        return FINAL_EPOCH
    return 1 if epoch == 2**31 - 1 else epoch + 1


@dataclass(slots=True)
class CachedPartition:
    """One partition of a session. ``topic`` is None while a topic id is unknown to the broker.
    The ``high_watermark``/``log_start_offset``/``last_stable_offset`` are those last sent
    (-1: nothing sent yet, or the last answer was an error, so the next one is sent)."""
    topic_id: object
    topic: str | None
    partition: int
    fetch_offset: int
    fetcher_log_start_offset: int
    max_bytes: int
    current_leader_epoch: int = -1
    last_fetched_epoch: int = -1
    high_watermark: int = -1
    log_start_offset: int = -1
    last_stable_offset: int = -1
    position: int = 0  # the session's fetch order: lower first (see FetchSession.move_to_end)

    def update_request(self, fp) -> None:
        """The fields a fetcher sends again when they change (a ``FetchPartition``)."""
        self.fetch_offset = fp.fetch_offset
        self.fetcher_log_start_offset = fp.log_start_offset
        self.max_bytes = fp.partition_max_bytes
        self.current_leader_epoch = fp.current_leader_epoch
        self.last_fetched_epoch = fp.last_fetched_epoch

    def must_respond(self, resp, update: bool) -> bool:
        """Kafka's ``CachedPartition.maybeUpdateResponseData``: a partition goes into an
        incremental response with records, an error, a preferred read replica, a diverging
        epoch, or a high watermark or log start offset other than the last sent. ``update``
        records what is sent (an error resets the high watermark, so the partition is sent
        again once the error clears)."""
        respond = bool(resp.records) and len(resp.records) > 0
        if self.high_watermark != resp.high_watermark:
            respond = True
            if update:
                self.high_watermark = resp.high_watermark
        if self.log_start_offset != resp.log_start_offset:
            respond = True
            if update:
                self.log_start_offset = resp.log_start_offset
        if update:
            self.last_stable_offset = resp.last_stable_offset
        if resp.preferred_read_replica >= 0:
            respond = True
        if resp.error_code:
            respond = True
            if update:
                self.high_watermark = -1
        diverging = resp.diverging_epoch
        if diverging is not None and diverging.epoch >= 0:
            respond = True
        return respond


@dataclass(slots=True, eq=False)
class FetchSession:
    """``partitions``: key -> CachedPartition in fetch order (their ``position``s rise in that
    order); the key is (topic id, partition) when ``uses_topic_ids`` (Fetch v13+), else (topic
    name, partition). ``changes``: which partitions the next fetch reads
    (``fetch_session_changes.SessionChanges``); None: all of them, at every fetch."""
    id: int
    privileged: bool
    uses_topic_ids: bool
    creation_ms: int
    last_used_ms: int
    epoch: int = 1
    partitions: dict = field(default_factory=dict)
    evictable_by_all: bool = False
    evictable_by_privileged: bool = False
    cached_size: int = 0
    changes: object = None
    next_position: int = 0

    def add(self, key, cached: CachedPartition) -> None:
        """``cached`` joins the session, last in its order."""
        cached.position = self.next_position
        self.next_position += 1
        self.partitions[key] = cached

    def move_to_end(self, key) -> None:
        """``key`` goes last in the fetch order (it was answered with records)."""
        self.add(key, self.partitions.pop(key))

    def close(self) -> None:
        if self.changes is not None:
            self.changes.close()

    def key(self, topic: str, topic_id, partition: int):
        return (topic_id, partition) if self.uses_topic_ids else (topic, partition)

    def evictable_key(self) -> tuple:
        """Kafka's ``EvictableKey``: the smaller, the less the session is worth keeping."""
        return (self.privileged, self.cached_size, self.id)


class FetchSessionCache:
    def __init__(self, max_entries: int = 1000, eviction_ms: int = 120000, rng: random.Random | None = None):
        self.max_entries = max_entries  # max.incremental.fetch.session.cache.slots
        self.eviction_ms = eviction_ms  # min.incremental.fetch.session.eviction.ms
        self._rng = rng or random.Random()
        self.sessions: dict[int, FetchSession] = {}
        self.evictions = 0

    @classmethod
    def from_config(cls, config) -> "FetchSessionCache":
        return cls(config["max.incremental.fetch.session.cache.slots"],
                   config["min.incremental.fetch.session.eviction.ms"])

    def __len__(self) -> int:
        return len(self.sessions)

    @property
    def total_partitions(self) -> int:
        return sum(s.cached_size for s in self.sessions.values())

    def get(self, session_id: int) -> FetchSession | None:
        return self.sessions.get(session_id)

    def remove(self, session_id: int) -> FetchSession | None:
        session = self.sessions.pop(session_id, None)
        if session is not None:
            session.close()
        return session

    def maybe_create_session(self, now: int, privileged: bool, uses_topic_ids: bool,
                             partitions: dict, changes=None) -> int:
        """A new session holding ``partitions`` (key -> CachedPartition, their ``position``s
        in order, below ``len(partitions)``) and tracking them with ``changes`` (None: no
        tracking); its id, or ``INVALID_SESSION_ID`` when the cache is full and nothing may be
        evicted."""
        if len(self.sessions) >= self.max_entries and not self.try_evict(privileged, len(partitions), now):
            return INVALID_SESSION_ID
        session = FetchSession(self._new_session_id(), privileged, uses_topic_ids, now, now, partitions=partitions,
                               changes=changes, next_position=len(partitions))
        self.sessions[session.id] = session
        self.touch(session, now)
        return session.id

    def touch(self, session: FetchSession, now: int) -> None:
        """Mark ``session`` used at ``now`` and decide again whether it is evictable."""
        session.last_used_ms = now
        session.cached_size = len(session.partitions)
        old = now - session.creation_ms > self.eviction_ms
        session.evictable_by_all = old
        session.evictable_by_privileged = old or not session.privileged

    def try_evict(self, privileged: bool, size: int, now: int) -> bool:
        """Kafka's ``FetchSessionCache.tryEvict`` (see the module docstring)."""
        if not self.sessions:
            return False
        stale = min(self.sessions.values(), key=lambda s: (s.last_used_ms, s.id))
        if now - stale.last_used_ms > self.eviction_ms:
            self._evict(stale)
            return True
        candidates = [s for s in self.sessions.values()
                      if (s.evictable_by_privileged if privileged else s.evictable_by_all)]
        if not candidates:
            return False
        victim = min(candidates, key=FetchSession.evictable_key)
        if (privileged, size, 0) < victim.evictable_key():
            return False
        self._evict(victim)
        return True

    def _evict(self, session: FetchSession) -> None:
        del self.sessions[session.id]
        session.close()
        self.evictions += 1

    def _new_session_id(self) -> int:
        while True:
            session_id = self._rng.randint(-2**31, 2**31 - 1)
            if session_id != INVALID_SESSION_ID and session_id not in self.sessions:
                return session_id
