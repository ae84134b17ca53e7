"""``SharePartitionManager``: the share-partitions this broker leads and the share sessions of
the members fetching them (KIP-932; Kafka 4.2's SharePartitionManager).

It owns:
- ``sessions``: the ``ShareSessionCache`` (``share_session_cache.py``), bounded by
  group.share.max.share.sessions;
- the ``SharePartition``s, keyed ``(group id, topic id, partition)``, made on first use and
  initialized from the broker's Persister (ReadShareGroupState, ``share_partition_io.py``) with
  the log's start offset and high watermark; one made under an older leader epoch of its
  partition is dropped and made again (the persister fences the old one anyway);
- ``timers``: one ``TimerQueue`` for every acquisition lock; ``run_timers(now)`` (driven by
  ``run()``, a broker background task) releases the expired locks and writes the result;
- the wake-ups of waiting ShareFetches (``delayed_share_fetch.py``): records released by an
  acknowledgement, a lock expiry or a closed session can be acquired again.

A closed client connection (``on_connection_close``, one of the broker's
``connection_close_listeners`` called by ``server/connection.py``) removes the share sessions
it owns and releases what their members acquired here, written through the persister like any
release, without waiting for the locks to expire (Kafka 4.2's ShareSessionCache
connectionDisconnectListener, then ShareGroupListener.onMemberLeave -> releaseSession).

Writes of one share-partition go to the persister in the order their updates were made
(``_write``: each waits for the one before), as ``share_partition_io.py`` requires.

Group configs (the share group's own, else the broker's group.share.* default):
share.auto.offset.reset (latest), share.isolation.level (read_uncommitted),
share.record.lock.duration.ms (group.share.record.lock.duration.ms), share.delivery.count.limit
(group.share.delivery.count.limit), share.partition.max.record.locks
(group.share.partition.max.record.locks). ``group_config(group_id)`` gives them, by default
from ``broker.group_configs`` (``server/group_configs.py``); a share-partition reads them as
they stand at each acquisition, acknowledgement and lock expiry (``SharePartition.config``, as
Kafka's SharePartition asks its ShareGroupConfigProvider), share.auto.offset.reset only when it
is initialized, share.isolation.level at each ShareFetch (``read_committed``).

Leadership: ``on_leadership_change`` drops the share-partitions of partitions no longer led
(their locks' timers cancelled; the new leader reads the persisted state, where acquired
records are AVAILABLE again).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from uuid import UUID

from odradek.coordinator.group.timer_queue import TimerQueue
from odradek.protocol.generated.error_codes import ErrorCode
from odradek.server.share import share_partition_io
from odradek.server.share.share_partition import SharePartition
from odradek.server.share.share_session_cache import ShareSession, ShareSessionCache
from odradek.server.share.share_types import AcknowledgementBatch, SharePartitionConfig
from odradek.server.share.state_update import StateUpdate

__all__ = ["SharePartitionManager", "ShareManagerConfig", "ShareKey"]

log = logging.getLogger("odradek.share")

ShareKey = tuple[str, UUID, int]  # (group id, topic id, partition)
READ_COMMITTED = "read_committed"
# The timer task sleeps at most this long, so a deadline scheduled while it sleeps is late
# by at most this much when nothing else woke it (``_scheduled`` wakes it for earlier ones).
_MAX_TIMER_SLEEP_S = 1.0


@dataclass(frozen=True, slots=True)
class ShareManagerConfig:
    """The broker's defaults (server.properties names)."""

    max_share_sessions: int = 2000  # group.share.max.share.sessions
    record_lock_duration_ms: int = 30_000  # group.share.record.lock.duration.ms
    delivery_count_limit: int = 5  # group.share.delivery.count.limit
    partition_max_record_locks: int = 2000  # group.share.partition.max.record.locks

    @classmethod
    def from_broker_config(cls, config) -> ShareManagerConfig:
        return cls(config["group.share.max.share.sessions"], config["group.share.record.lock.duration.ms"],
                   config["group.share.delivery.count.limit"], config["group.share.partition.max.record.locks"])


class _TaggedTimers:
    """The shared ``TimerQueue`` as one share-partition sees it: what its popped functions
    return comes back tagged with the share-partition's key."""

    def __init__(self, manager: SharePartitionManager, key: ShareKey) -> None:
        self._manager, self._key = manager, key

    def schedule(self, name: str, deadline_ms: int, fn: Callable) -> None:
        key = self._key
        self._manager.timers.schedule(name, deadline_ms, lambda: (key, fn()))
        self._manager._scheduled(deadline_ms)

    def cancel(self, name: str) -> None:
        self._manager.timers.cancel(name)

    def cancel_prefix(self, prefix: str) -> None:
        self._manager.timers.cancel_prefix(prefix)


@dataclass(slots=True)
class _Held:
    sp: SharePartition
    topic: str
    write_tail: asyncio.Future | None = None  # the last write sent (``_write``)


class SharePartitionManager:
    def __init__(self, broker, persister, clock, config: ShareManagerConfig,
                 group_config: Callable[[str], dict] | None = None) -> None:
        """``broker``: what is read of it is ``leader_partition(topic, index)`` and
        ``stopping``; ``persister``: the Persister (``coordinator/share/persister.py``)."""
        self.broker = broker
        self.persister = persister
        self.clock = clock
        self.config = config
        self.group_config = group_config or self._broker_group_config
        self.sessions = ShareSessionCache(config.max_share_sessions)
        self.timers = TimerQueue()
        self._held: dict[ShareKey, _Held] = {}
        self._loading: dict[ShareKey, asyncio.Future] = {}
        self._waiters: dict[ShareKey, list[asyncio.Future]] = {}
        self._timer_wake: asyncio.Event | None = None
        self._sleep_until_ms: int | None = None
        self._tasks: set[asyncio.Task] = set()

    # --- group configs ------------------------------------------------------------------------
    def _broker_group_config(self, group_id: str) -> dict:
        configs = getattr(self.broker, "group_configs", None)  # server/group_configs.py
        return {} if configs is None else configs.get(group_id)

    def partition_config(self, group_id: str) -> SharePartitionConfig:
        own = self.group_config(group_id)
        c = self.config
        return SharePartitionConfig(
            record_lock_duration_ms=int(own.get("share.record.lock.duration.ms", c.record_lock_duration_ms)),
            delivery_count_limit=int(own.get("share.delivery.count.limit", c.delivery_count_limit)),
            max_record_locks=int(own.get("share.partition.max.record.locks", c.partition_max_record_locks)),
            auto_offset_reset=str(own.get("share.auto.offset.reset", "latest")))

    def read_committed(self, group_id: str) -> bool:
        return str(self.group_config(group_id).get("share.isolation.level", "")).lower() == READ_COMMITTED

    def record_lock_duration_ms(self, group_id: str) -> int:
        return self.partition_config(group_id).record_lock_duration_ms

    # --- share-partitions ---------------------------------------------------------------------
    def get(self, key: ShareKey) -> SharePartition | None:
        held = self._held.get(key)
        return None if held is None else held.sp

    async def share_partition(self, key: ShareKey, topic: str, part) -> tuple[SharePartition | None, ErrorCode]:
        """The initialized share-partition of ``key`` on ``part`` (the led partition), made
        and initialized when missing; ``(None, error)`` when its state cannot be read."""
        held = self._held.get(key)
        if held is not None and held.sp.leader_epoch == part.leader_epoch:
            error = held.sp.error_code()
            return (held.sp, error) if error is ErrorCode.NONE else (None, error)
        loading = self._loading.get(key)
        if loading is not None:
            await asyncio.shield(loading)
            return await self.share_partition(key, topic, part)
        if held is not None:
            self._drop(key)
        future = asyncio.get_running_loop().create_future()
        self._loading[key] = future
        try:
            return await self._initialize(key, topic, part)
        finally:
            del self._loading[key]
            future.set_result(None)

    async def _initialize(self, key: ShareKey, topic: str, part) -> tuple[SharePartition | None, ErrorCode]:
        group_id, topic_id, index = key
        sp = SharePartition(group_id, topic_id, index, leader_epoch=part.leader_epoch,
                            config=self.partition_config(group_id), clock=self.clock,
                            timers=_TaggedTimers(self, key),
                            config_provider=lambda: self.partition_config(group_id))
        try:
            error = await share_partition_io.initialize(sp, self.persister, log_start_offset=part.log_start_offset,
                                                        high_watermark=part.high_watermark)
        except Exception:
            log.exception("share-partition %s-%s-%d: reading its state failed", group_id, topic, index)
            error = ErrorCode.UNKNOWN_SERVER_ERROR
        if error is not ErrorCode.NONE:
            sp.close()
            # retriable answers: the share coordinator is loading or moving
            return None, error
        self._held[key] = _Held(sp, topic)
        return sp, ErrorCode.NONE

    def _drop(self, key: ShareKey) -> None:
        held = self._held.pop(key, None)
        if held is not None:
            held.sp.close()
        self._wake([key])

    def on_leadership_change(self, resigned: Iterable[tuple[str, int]]) -> None:
        """Drop the share-partitions of partitions this broker no longer leads."""
        lost = set(resigned)
        for key in [k for k, h in self._held.items() if (h.topic, k[2]) in lost]:
            self._drop(key)

    def shutdown(self) -> None:
        for key in list(self._held):
            self._drop(key)

    # --- acknowledgements and releases --------------------------------------------------------
    async def acknowledge(self, key: ShareKey, member_id: str,
                          batches: list[AcknowledgementBatch]) -> ErrorCode:
        """Acknowledge ``batches`` for ``member_id``: written through the persister before
        the answer (``SharePartition.acknowledge``). A share-partition not held here (never
        fetched from this broker, or dropped) answers INVALID_RECORD_STATE: nothing of it
        was acquired here."""
        held = self._held.get(key)
        if held is None:
            return ErrorCode.INVALID_RECORD_STATE
        error = await self._write(key, held, held.sp.acknowledge(member_id, batches))
        self._wake([key])
        return error

    async def release_session(self, session: ShareSession) -> None:
        """Release what the member of ``session`` holds in its share-partitions (it closed or
        replaced the session; Kafka's releaseSession)."""
        writes = []
        for topic_id, index in session.partitions:
            key = (session.group_id, topic_id, index)
            held = self._held.get(key)
            if held is not None:
                writes.append(self._write(key, held, held.sp.release_acquired_records(session.member_id)))
        await asyncio.gather(*writes)
        self._wake([(session.group_id, t, p) for t, p in session.partitions])

    def on_connection_close(self, connection_id: str) -> asyncio.Task | None:
        """A client connection closed: remove the share sessions it owns and release their
        members' records in the background. Returns the releasing task (None: it owned none).
        Called from ``Connection.connection_lost``, on the event loop. While the broker stops
        nothing is written: the share-partitions are dropped, and the next leader reads
        acquired records as AVAILABLE from the persisted state anyway."""
        sessions = self.sessions.remove_connection(connection_id)
        if not sessions or self.broker.stopping:
            return None
        for session in sessions:
            log.debug("share session of %s in group %s: connection %s closed, releasing its records",
                      session.member_id, session.group_id, connection_id)
        return self._spawn(self._release_sessions(sessions))

    async def _release_sessions(self, sessions: list[ShareSession]) -> None:
        await asyncio.gather(*(self.release_session(s) for s in sessions))

    async def _write(self, key: ShareKey, held: _Held, update: StateUpdate) -> ErrorCode:
        """Send ``update`` after the share-partition's previous write, report its result."""
        if update.error is not ErrorCode.NONE or not update.needs_write:
            return held.sp.complete_update(update, ErrorCode.NONE) if update.error is ErrorCode.NONE else update.error
        previous = held.write_tail
        done = asyncio.get_running_loop().create_future()
        held.write_tail = done
        try:
            if previous is not None:
                await asyncio.shield(previous)
            return await share_partition_io.write_update(held.sp, self.persister, update)
        except Exception:
            log.exception("share-partition %s: writing its state failed", key)
            return held.sp.complete_update(update, ErrorCode.UNKNOWN_SERVER_ERROR)
        finally:
            done.set_result(None)
            if held.write_tail is done:
                held.write_tail = None

    # --- lock expiry --------------------------------------------------------------------------
    def run_timers(self, now_ms: int) -> int:
        """Run the lock expiries due at ``now_ms``: their records are AVAILABLE (or ARCHIVED)
        at once; the writes go out in the background. Returns how many fired."""
        fired = self.timers.pop_due(now_ms)
        woken = []
        for fn in fired:
            key, update = fn()
            held = self._held.get(key)
            if update is None or held is None:
                continue
            woken.append(key)
            self._spawn(self._write(key, held, update))
        self._wake(woken)
        return len(fired)

    def _scheduled(self, deadline_ms: int) -> None:
        if self._timer_wake is not None and (self._sleep_until_ms is None or deadline_ms < self._sleep_until_ms):
            self._timer_wake.set()

    async def run(self) -> None:
        """The timer task (a broker background task): sleep until the next lock deadline."""
        self._timer_wake = asyncio.Event()
        while not self.broker.stopping:
            self.run_timers(self.clock.milliseconds())
            deadline = self.timers.next_deadline()
            now = self.clock.milliseconds()
            sleep_s = _MAX_TIMER_SLEEP_S if deadline is None else min(max(deadline - now, 0) / 1000, _MAX_TIMER_SLEEP_S)
            self._sleep_until_ms = now + int(sleep_s * 1000)
            self._timer_wake.clear()
            try:
                async with asyncio.timeout(sleep_s):
                    await self._timer_wake.wait()
            except TimeoutError:
                pass

    def _spawn(self, coro) -> asyncio.Task:
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        track = getattr(self.broker, "track", None)  # Broker.track: stop() finishes it
        if track is not None:
            track(task)
        return task

    # --- waiting ShareFetches -----------------------------------------------------------------
    def _wake(self, keys: Iterable[ShareKey]) -> None:
        for key in keys:
            for fut in self._waiters.pop(key, ()):
                if not fut.done():
                    fut.set_result(None)

    async def wait_for_release(self, keys: list[ShareKey], timeout_s: float) -> None:
        """Return once records of one of ``keys`` may be acquirable again, or after
        ``timeout_s``."""
        if timeout_s <= 0:
            return
        fut = asyncio.get_running_loop().create_future()
        for key in keys:
            self._waiters.setdefault(key, []).append(fut)
        try:
            async with asyncio.timeout(timeout_s):
                await fut
        except TimeoutError:
            pass
        finally:
            for key in keys:
                waiters = self._waiters.get(key)
                if waiters and fut in waiters:
                    waiters.remove(fut)
                    if not waiters:
                        del self._waiters[key]
