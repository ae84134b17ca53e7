"""``SessionChanges``: which partitions of a KIP-227 fetch session may have news for its
fetcher, so that an incremental fetch reads only those (O(what changed), not O(session)).

Kafka's ``IncrementalFetchContext`` reads every partition of the session at every fetch and
then keeps those ``CachedPartition.maybeUpdateResponseData`` selects (records, an error, a
preferred read replica, a diverging epoch, a high watermark or log start offset other than
the last sent). A partition can only be selected if something of it changed since it was last
read, or if it was left with something to say at that read. So the session keeps ``pending``,
the session keys to read at its next fetch, and the rest are not read at all:

- a partition enters ``pending`` when it joins the session or its fetcher sends it again
  (new fetch offset, leader epoch, ...: ``fetch_context._update``), and on every
  ``ReplicaManager.notify`` of its ``(topic, partition)`` (appends, high watermark, last stable
  offset and log start offset moves, leader epoch and role changes, the partition leaving:
  ``watch``);
- a fetch ``take``s the pending keys; once it answered, the partitions it read leave
  ``pending`` unless ``settled`` says their read left nothing to say: the handler
  (``handlers/fetch.py``) counts a partition unsettled when it answered an error or a
  preferred read replica, when records remain above its fetch offset (a byte limit or a
  replication throttle cut the read), or, for a follower, while the follower is out of the
  ISR (so an expansion refused once, say behind a pending ISR change, is tried at each fetch
  as Kafka does); those are read again at the next fetch;
- a fetch that is not answered (throttled by quota, failed, cancelled) gives what it took
  back (``restore``);
- a partition whose topic id this broker does not know is not watched: it answers
  UNKNOWN_TOPIC_ID and stays pending; each ``take`` tries to resolve it again.

A fetch that found nothing waits on the session (``wait``: one future per session, whatever
its size), woken by the first change of any of its partitions.

Follower sessions (``replica_id`` set): a partition not read at a fetch did not see that
fetch's time. ``partition_changed`` first tells ``ReplicaManager.follower_fetched_unchanged``
that the follower fetched it, unchanged, at the session's last fetch, so the ISR rules see
the follower as caught up until then, as Kafka's per-fetch ``updateFollowerFetchState`` would.

Invariant (checked by tests/server/test_fetch_session_changes.py against a full rescan): the
partitions an incremental response carries are those Kafka's would carry.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable

TopicPartition = tuple[str, int]


class SessionChanges:
    """The change tracking of one session. ``registry``: the ``ReplicaManager`` (``watch``,
    ``unwatch``, ``follower_fetched_unchanged``); ``resolve``: session key ->
    ``(topic, partition)``, or None while the topic is unknown; ``replica_id``: the fetching
    follower, -1 for a consumer. Event-loop only."""

    def __init__(self, registry, resolve: Callable[[tuple], TopicPartition | None], replica_id: int = -1):
        self.registry = registry
        self.resolve = resolve
        self.replica_id = replica_id
        self.pending: dict[tuple, None] = {}  # session key -> None, an ordered set
        self.names: dict[TopicPartition, tuple] = {}  # watched (topic, partition) -> session key
        self.watched: dict[tuple, TopicPartition] = {}  # the reverse: session key -> (topic, partition)
        self._unresolved: dict[tuple, None] = {}
        self.last_fetch_ms = 0  # when the session's latest fetch arrived
        self._waiter: asyncio.Future | None = None
        self.closed = False

    # --- membership -----------------------------------------------------------------------------
    def add(self, key: tuple, pending: bool = True) -> None:
        """``key`` joins the session (or is sent again by its fetcher): watched, and pending
        unless ``pending`` is False (a full fetch's partition that it read with nothing left)."""
        if key not in self._unresolved and key not in self.watched:
            self._watch(key)
        if pending:
            self.pending[key] = None

    def remove(self, key: tuple) -> None:
        """``key`` left the session (forgotten)."""
        self.pending.pop(key, None)
        self._unresolved.pop(key, None)
        name = self.watched.pop(key, None)
        if name is not None and self.names.get(name) == key:
            del self.names[name]
            self.registry.unwatch(name, self)

    def close(self) -> None:
        """The session is gone (closed, evicted): stop watching, wake its fetch."""
        self.closed = True
        for name in self.names:
            self.registry.unwatch(name, self)
        self.names.clear()
        self.watched.clear()
        self._wake()

    def _watch(self, key: tuple) -> None:
        name = self.resolve(key)
        if name is None:
            self._unresolved[key] = None
            self.pending[key] = None
            return
        self._unresolved.pop(key, None)
        self.names[name] = key
        self.watched[key] = name
        self.registry.watch(name, self)

    # --- changes --------------------------------------------------------------------------------
    def partition_changed(self, name: TopicPartition) -> None:
        """``ReplicaManager.notify``: ``name`` changed; it is read at the session's next fetch
        (the one waiting, if any, wakes)."""
        key = self.names.get(name)
        if key is None:
            return
        if key not in self.pending:
            if self.replica_id >= 0 and self.last_fetch_ms:
                self.registry.follower_fetched_unchanged(name, self.replica_id, self.last_fetch_ms)
            self.pending[key] = None
        self._wake()

    def take(self, now_ms: int) -> list[tuple]:
        """The pending keys, in the order they became pending, for the fetch that arrived at
        ``now_ms``; ``pending`` is empty after."""
        self.last_fetch_ms = now_ms
        for key in list(self._unresolved):  # a topic id learnt since
            self._watch(key)
        taken = list(self.pending)
        self.pending.clear()
        return taken

    def take_more(self) -> list[tuple]:
        """What became pending while the fetch waited (it reads these as well)."""
        taken = list(self.pending)
        self.pending.clear()
        return taken

    def settle(self, read: Iterable[tuple], settled: set) -> None:
        """The fetch answered: of the keys it ``read``, those not in ``settled`` stay pending."""
        for key in read:
            if key not in settled:
                self.pending[key] = None

    def restore(self, read: Iterable[tuple]) -> None:
        """The fetch was not answered: everything it took is pending again."""
        for key in read:
            self.pending[key] = None

    # --- waiting --------------------------------------------------------------------------------
    async def wait(self, timeout_s: float) -> None:
        """Return once a partition of the session changed (at once if one is pending already),
        the session closed, or after ``timeout_s``."""
        if timeout_s <= 0 or self.pending or self.closed:
            return
        if self._waiter is None or self._waiter.done():
            self._waiter = asyncio.get_running_loop().create_future()
        fut = self._waiter
        try:
            async with asyncio.timeout(timeout_s):  # (not wait_for: it can drop a cancel)
                await asyncio.shield(fut)
        except TimeoutError:
            pass

    def _wake(self) -> None:
        fut = self._waiter
        if fut is not None:
            self._waiter = None
            if not fut.done():
                fut.set_result(None)


def changes_factory(broker, uses_topic_ids: bool, replica_id: int) -> Callable[[], SessionChanges]:
    """What ``fetch_context`` calls to give a new session of ``broker`` its tracking; session
    keys are ``(topic id, partition)`` with topic ids (resolved through the metadata image),
    else ``(topic, partition)`` already."""
    if uses_topic_ids:
        def resolve(key: tuple) -> TopicPartition | None:
            assignment = broker.metadata_image().topic_by_id(key[0])
            return (assignment.name, key[1]) if assignment is not None else None
    else:
        def resolve(key: tuple) -> TopicPartition | None:
            return key if key[0] is not None else None
    return lambda: SessionChanges(broker.replica_manager, resolve, replica_id)


READ_COMMITTED = 1


def settled_partitions(broker, wanted, replica_id: int, isolation: int, by_id: bool) -> set:
    """The session keys of the partitions a fetch read (``wanted``: ``handlers/fetch._Wanted``)
    that are left with nothing to say until they change: no error, no preferred read replica,
    nothing above the fetch offset the fetcher may read (the high watermark, or the last
    stable offset for ``read_committed``, for a consumer; the log end offset for a follower),
    and a follower in the ISR. The others are read again at the session's next fetch (see the
    module docstring)."""
    settled = set()
    partitions = broker.replica_manager.partitions
    for w in wanted:
        resp = w.response
        if w.topic is None or resp.error_code or resp.preferred_read_replica >= 0:
            continue
        part = partitions.get((w.topic, w.request.partition))
        if part is None:
            continue
        offset = w.request.fetch_offset
        if replica_id >= 0:
            if replica_id not in part.isr or offset < part.log_end_offset:
                continue
        elif offset < (resp.last_stable_offset if isolation == READ_COMMITTED else resp.high_watermark):
            continue
        settled.add((w.topic_id if by_id else w.topic, w.request.partition))
    return settled
