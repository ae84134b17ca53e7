"""A consumer's membership of a KIP-848 consumer group (``group_protocol="consumer"``).

The asyncio edge of ``consumer_heartbeat_state.ConsumerHeartbeatState``, as Kafka's
``ConsumerHeartbeatRequestManager`` and the application-thread half of
``ConsumerMembershipManager`` are for Java's ``AsyncKafkaConsumer``. The coordinator computes
every assignment itself (``group.remote.assignor`` names its assignor, or its default), so a
member only heartbeats and reconciles:

- A task sends ConsumerGroupHeartbeat (API 68) over the coordinator's own connection
  (``GroupCoordinatorClient``): when joining, every heartbeat interval the coordinator gives,
  and at once after a reconciliation, to acknowledge it. One attempt per request: NOT_COORDINATOR,
  COORDINATOR_NOT_AVAILABLE or a broken connection find the coordinator again,
  COORDINATOR_LOAD_IN_PROGRESS backs off, and the next request carries every field.
- ``poll`` (the application's thread, so rebalance listeners may call the consumer) runs what
  the answers call for. A new target assignment (topic ids, resolved to names through the
  metadata; unknown ids refresh it) is reconciled incrementally: the partitions no longer
  assigned are revoked first (with ``enable_auto_commit`` their offsets are committed, then
  ``on_partitions_revoked``), then the new ones are added (``on_partitions_assigned`` with the
  added partitions, possibly none), and the next heartbeat acknowledges the owned partitions.
  Partitions kept keep their positions and buffered records.
- FENCED_MEMBER_EPOCH or UNKNOWN_MEMBER_ID: every partition is lost (``on_partitions_lost``,
  no commit) and the member rejoins at epoch 0, same member id.
- Not polled for ``max_poll_interval_ms``: the member leaves (epoch -1) and is *stale*; the next
  ``poll`` releases its partitions as lost and rejoins.
- ``unsubscribe``/``close``: commit (auto commit), ``on_partitions_revoked``, then one leave
  heartbeat, epoch -1, or -2 for a static member (``group_instance_id``) that will come back.

Commits carry the member epoch as generation id and the member id. An application's commit
refused with STALE_MEMBER_EPOCH, UNKNOWN_MEMBER_ID or ILLEGAL_GENERATION raises
``CommitFailedError`` (Java's ``commitSync``); the automatic commit before a revocation
retries STALE_MEMBER_EPOCH with the latest epoch until its deadline, as Java's
``CommitRequestManager.maybeAutoCommitSyncBeforeRevocation`` does.

Subscriptions: a topic list goes as SubscribedTopicNames; a regex (``Whitelist``, or a pattern
string) as SubscribedTopicRegex (v1+), matched by the coordinator; another ``TopicFilter``
(``Blacklist``) is matched here on every full metadata refresh and sent as names.
"""

from __future__ import annotations

import asyncio
import logging
import uuid

from odradek.client.coordinator import GroupCoordinatorClient
from odradek.client.consumer_heartbeat_state import (
    FATAL,
    FENCED,
    STALE,
    ConsumerHeartbeatState,
    Subscription,
)
from odradek.client.errors import BrokerError, KafkaError, UnsupportedVersionError
from odradek.client.member_config import CommitFailedError, Generation, MembershipConfig
from odradek.client.rebalance_listener import invoke_listener
from odradek.client.topic_filter import TopicFilter, Whitelist
from odradek.client.topic_partition import TopicPartition
from odradek.protocol.generated import ApiKey
from odradek.protocol.generated.error_codes import ErrorCode

__all__ = ["ConsumerGroupMembership"]

_log = logging.getLogger("odradek.client.consumer")

_COMMIT_REFUSED = frozenset({ErrorCode.STALE_MEMBER_EPOCH, ErrorCode.UNKNOWN_MEMBER_ID,
                             ErrorCode.ILLEGAL_GENERATION, ErrorCode.FENCED_MEMBER_EPOCH})
_LEAVE_TIMEOUT = 5.0  # seconds the leave heartbeat of a close may take
_UNSUPPORTED = ("the cluster does not support the consumer group protocol (ConsumerGroupHeartbeat): "
                "use group_protocol='classic'")


class ConsumerGroupMembership:
    def __init__(self, coordinator: GroupCoordinatorClient, config: MembershipConfig, *, assign, consumed,
                 wake, server_assignor: str | None = None) -> None:
        """``assign(partitions)`` replaces the consumer's assignment (keeping the state of the
        partitions it keeps), ``consumed()`` gives the offsets to commit, ``wake()`` ends a
        wait in ``poll`` so it acts at once (the same seams as ``GroupMembership``)."""
        self.coordinator = coordinator
        self.cluster = coordinator.cluster
        self.group_id = coordinator.group_id
        self.config = config
        self.heartbeat = ConsumerHeartbeatState(
            self.group_id, rebalance_timeout_ms=config.rebalance_timeout_ms,
            instance_id=config.group_instance_id, server_assignor=server_assignor,
            retry_backoff_ms=int(self.cluster.retry_backoff * 1000))
        self._assign, self._consumed, self._wake = assign, consumed, wake
        self.filter: TopicFilter | None = None
        self.listener = None
        self.topics: frozenset[str] = frozenset()
        self.assigned: frozenset[TopicPartition] = frozenset()
        self.fatal: KafkaError | None = None
        self._names: dict[uuid.UUID, str] = {}  # ids of topics assigned before, resolved
        self._resolve_at = 0.0  # no metadata refresh for unknown topic ids before this
        self._kick = asyncio.Event()
        self._heartbeats: asyncio.Task | None = None
        self._commit_task: asyncio.Task | None = None
        self._next_auto_commit = 0.0
        self._last_poll = 0.0
        self._next_match = 0.0
        self._assigned_join: int | None = None  # the join whose assignment was last announced
        self._closed = False

    @property
    def loop(self) -> asyncio.AbstractEventLoop:
        return self.cluster.loop

    @property
    def subscribed(self) -> bool:
        return self.filter is not None

    @property
    def generation(self) -> Generation:
        """The member epoch and member id, as the classic generation is read (commits,
        ``group_metadata``)."""
        return Generation(self.heartbeat.member_epoch, self.heartbeat.member_id, None)

    # --- subscription ----------------------------------------------------------------------
    def subscribe(self, topic_filter: TopicFilter, listener) -> None:
        self.filter = topic_filter
        self.listener = listener
        if isinstance(topic_filter, Whitelist):
            self.heartbeat.subscribe(Subscription(regex=topic_filter.pattern.pattern))
        elif topic_filter.dynamic:
            self._next_match = 0.0  # matched by the next poll
            self.heartbeat.subscribe(Subscription(topics=self.topics))
        else:
            self._set_topics(topic_filter.topics)
        self._kick.set()

    def _set_topics(self, topics: frozenset[str]) -> None:
        self.topics = frozenset(topics)
        if self.cluster.add_topics(self.topics):
            self.cluster.request_update()
        self.heartbeat.subscribe(Subscription(topics=self.topics))

    async def _match_filter(self) -> None:
        """A client-side filter: match it against every topic (a full metadata refresh)."""
        self._next_match = self.loop.time() + self.config.metadata_max_age_ms / 1000
        meta = await self.cluster.refresh(None)
        if self.filter is not None and self.filter.dynamic and not isinstance(self.filter, Whitelist):
            topics = self.filter.matching(meta)
            if topics != self.topics or self.heartbeat.subscription is None:
                self._set_topics(topics)
                self._kick.set()

    # --- polling ---------------------------------------------------------------------------
    async def poll(self, deadline: float) -> None:
        """Called by every ``poll``: release lost partitions, rejoin, reconcile a new target,
        or start an auto commit, as due. ``deadline`` is unused: nothing here waits for the
        coordinator (the heartbeat task does)."""
        self._last_poll = self.loop.time()
        if self.fatal is not None:
            raise self.fatal
        if not self.subscribed or self._closed:
            return
        if self._heartbeats is None:
            self._heartbeats = self.loop.create_task(self._heartbeat_loop())
        state = self.heartbeat
        if self.filter.dynamic and not isinstance(self.filter, Whitelist) and self._last_poll >= self._next_match:
            try:
                await self._match_filter()
            except KafkaError as e:
                if not e.retriable:
                    raise
        if state.state in (FENCED, STALE):
            stale = state.state == STALE
            await self._release_lost()
            state.rejoin() if stale else state.release()
            self._kick.set()
        pending = state.pending_reconciliation()
        if pending is not None:
            await self._reconcile(*pending)
        elif state.state != FATAL:
            self._maybe_auto_commit()
        if self.fatal is not None:
            raise self.fatal

    async def _release_lost(self) -> None:
        lost, self.assigned = self.assigned, frozenset()
        self._assign([])
        if lost:
            _log.info("group %s: member %s lost %s", self.group_id, self.heartbeat.member_id,
                      ", ".join(map(str, sorted(lost))))
            error = await invoke_listener(self.listener, "on_partitions_lost", lost)
            if error is not None:
                raise error

    async def _reconcile(self, joins: int, target: dict[uuid.UUID, frozenset[int]]) -> None:
        """Revoke what ``target`` leaves out, then assign what it adds (see the module doc);
        a listener's error is raised once the assignment is in place."""
        names = await self._resolve(target)
        resolved = {t: ps for t, ps in target.items() if t in names}
        new = frozenset(TopicPartition(names[t], p) for t, ps in resolved.items() for p in ps)
        if isinstance(self.filter, Whitelist):
            self.topics = frozenset(names[t] for t in resolved)
        revoked, added = self.assigned - new, new - self.assigned
        errors = []
        if revoked:
            if self.config.enable_auto_commit:
                await self._commit_before_revocation()
            errors.append(await invoke_listener(self.listener, "on_partitions_revoked", revoked))
            self.assigned -= revoked
            self._assign(sorted(self.assigned))
        self.assigned = new
        self._assign(sorted(new))
        if not (added or revoked) and resolved == self.heartbeat.owned and len(resolved) < len(target):
            return  # nothing new resolvable: wait for the metadata to know the other topics
        if added or revoked or joins != self._assigned_join:
            _log.info("group %s: member %s epoch %d: assigned %s (added %s, revoked %s)", self.group_id,
                      self.heartbeat.member_id, self.heartbeat.member_epoch, sorted(new), sorted(added),
                      sorted(revoked))
            self._assigned_join = joins
            self._next_auto_commit = self.loop.time() + self.config.auto_commit_interval_ms / 1000
            errors.append(await invoke_listener(self.listener, "on_partitions_assigned", added))
        if self.heartbeat.reconciled(joins, resolved):
            self._kick.set()
        for error in errors:
            if error is not None:
                raise error

    async def _resolve(self, target) -> dict[uuid.UUID, str]:
        """Topic names of the ids in ``target`` that the metadata knows (refreshing it, at most
        once per retry backoff, when some are unknown)."""
        def known() -> dict[uuid.UUID, str]:
            found = {info.topic_id: name for name, info in self.cluster.metadata.topics.items()}
            return {t: found.get(t) or self._names[t] for t in target if t in found or t in self._names}

        names = known()
        now = self.loop.time()
        if len(names) < len(target) and now >= self._resolve_at:
            self._resolve_at = now + self.cluster.retry_backoff
            try:
                await self.cluster.refresh(None)
            except KafkaError as e:
                if not e.retriable:
                    raise
            names = known()
        missing = set(target) - set(names)
        if missing:
            _log.info("group %s: topic ids %s of the assignment are not in the metadata yet", self.group_id,
                      ", ".join(map(str, sorted(missing))))
        self._names.update(names)
        return names

    # --- heartbeats ------------------------------------------------------------------------
    async def _heartbeat_loop(self) -> None:
        while not self._closed:
            try:
                await self._heartbeat_step()
            except asyncio.CancelledError:
                raise
            except Exception:  # noqa: BLE001 - the heartbeat task must outlive a bug report
                _log.exception("group %s: heartbeat failed", self.group_id)
                await asyncio.sleep(self.cluster.retry_backoff)

    async def _heartbeat_step(self) -> None:
        """Wait until a request is due (or something changes), then send it."""
        state = self.heartbeat
        now = self.loop.time()
        if now - self._last_poll > self.config.rebalance_timeout_ms / 1000 and state.next_heartbeat_at() is not None:
            _log.warning("group %s: consumer not polled within max_poll_interval_ms: leaving the group",
                         self.group_id)
            state.poll_timer_expired()
        at = state.next_heartbeat_at()
        if at is None or at > now:
            self._kick.clear()
            timeout = None if at is None else at - now
            try:
                await asyncio.wait_for(self._kick.wait(), timeout)
            except TimeoutError:
                pass
            return
        await self._send_heartbeat()
        if state.state in (FENCED, FATAL, STALE) or state.pending_reconciliation() is not None:
            self._wake()

    async def _send_heartbeat(self) -> None:
        state = self.heartbeat
        coordinator = self.coordinator
        try:
            conn = await coordinator.connection()
            version = conn.api_version(ApiKey.CONSUMER_GROUP_HEARTBEAT)
        except UnsupportedVersionError as e:
            self._fail(UnsupportedVersionError(f"group {self.group_id}: {_UNSUPPORTED} ({e})"))
            return
        except KafkaError as e:
            self._retry_later(e)
            return
        if state.subscription is not None and state.subscription.regex is not None and version < 1:
            self._fail(UnsupportedVersionError(
                f"group {self.group_id}: a regex subscription needs ConsumerGroupHeartbeat v1, the coordinator has v0"))
            return
        request = state.build_request(self.loop.time(), version)
        try:
            response = await conn.send(ApiKey.CONSUMER_GROUP_HEARTBEAT, request, version=version)
        except KafkaError as e:
            coordinator.mark_dead()
            self._retry_later(e)
            return
        except BaseException:
            state.on_failure(self.loop.time())
            raise
        action = state.on_response(response, self.loop.time())
        if action == "rediscover":
            coordinator.mark_dead()
        elif action == "fatal":
            code, message = state.fatal
            if code == ErrorCode.UNSUPPORTED_VERSION:
                message = _UNSUPPORTED
            self._fail(BrokerError(code, message, f"group {self.group_id}"))
        elif action == "fenced":
            _log.info("group %s: member %s fenced (%s): rejoining", self.group_id, state.member_id,
                      ErrorCode(response.error_code).name)

    def _retry_later(self, error: KafkaError) -> None:
        if not error.retriable:
            self._fail(error)
            return
        _log.debug("group %s: heartbeat failed, retrying: %s", self.group_id, error)
        self.heartbeat.on_failure(self.loop.time())

    def _fail(self, error: KafkaError) -> None:
        self.heartbeat.state = FATAL
        self.fatal = error
        self._wake()

    # --- commits ---------------------------------------------------------------------------
    async def commit(self, offsets: dict) -> None:
        """Commit ``offsets`` as this member (its epoch as generation id); CommitFailedError
        when the group does not count it a member with that epoch."""
        member_id, epoch = self.heartbeat.member_id, self.heartbeat.member_epoch
        if epoch <= 0:
            raise CommitFailedError(f"group {self.group_id}: not a member of the group (joining or rejoining)")
        try:
            await self.coordinator.commit_offsets(offsets, generation=epoch, member_id=member_id,
                                                  group_instance_id=self.config.group_instance_id)
        except BrokerError as e:
            if e.code in _COMMIT_REFUSED:
                raise CommitFailedError(f"group {self.group_id} refused the commit of epoch {epoch}: {e}") from e
            raise

    async def _commit_before_revocation(self) -> None:
        """Commit what was consumed before partitions are revoked: STALE_MEMBER_EPOCH is
        retried with the latest epoch (the heartbeat brings it) until the deadline; any
        other failure is logged and the revocation goes on."""
        offsets = self._consumed()
        if not offsets:
            return
        deadline = self.loop.time() + self.cluster.request_timeout
        while True:
            try:
                await self.commit(offsets)
                return
            except CommitFailedError as e:
                stale = isinstance(e.__cause__, BrokerError) and e.__cause__.code == ErrorCode.STALE_MEMBER_EPOCH
                if not stale or self.loop.time() + self.cluster.retry_backoff >= deadline:
                    _log.warning("group %s: commit before revocation failed: %s", self.group_id, e)
                    return
                await asyncio.sleep(self.cluster.retry_backoff)
            except KafkaError as e:
                _log.warning("group %s: commit before revocation failed: %s", self.group_id, e)
                return

    async def _commit_quietly(self, offsets: dict) -> None:
        try:
            await self.commit(offsets)
        except KafkaError as e:
            _log.warning("group %s: auto commit of %s failed: %s", self.group_id, sorted(offsets), e)

    def _maybe_auto_commit(self) -> None:
        now = self.loop.time()
        if not self.config.enable_auto_commit or now < self._next_auto_commit or not self.assigned:
            return
        if self._commit_task is not None and not self._commit_task.done():
            return
        self._next_auto_commit = now + self.config.auto_commit_interval_ms / 1000
        offsets = self._consumed()
        if offsets:
            self._commit_task = self.loop.create_task(self._commit_quietly(offsets))

    # --- leaving ---------------------------------------------------------------------------
    async def _stop_heartbeats(self) -> None:
        tasks = [t for t in (self._heartbeats, self._commit_task) if t is not None and not t.done()]
        self._heartbeats = None
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    async def _send_leave(self) -> None:
        """One leave heartbeat (epoch -1, or -2 when static), not retried: a member whose leave
        is lost is removed when its session times out."""
        state = self.heartbeat
        state.leave()
        if state.next_heartbeat_at() is None:
            return
        try:
            conn = await asyncio.wait_for(self.coordinator.connection(), _LEAVE_TIMEOUT)
            version = conn.api_version(ApiKey.CONSUMER_GROUP_HEARTBEAT)
            request = state.build_request(self.loop.time(), version)
            await conn.send(ApiKey.CONSUMER_GROUP_HEARTBEAT, request, version=version, timeout=_LEAVE_TIMEOUT)
        except (KafkaError, TimeoutError) as e:
            _log.info("group %s: leave heartbeat failed (the session will time out): %s", self.group_id, e)
        finally:
            state.left()

    async def unsubscribe(self, reason: str = "the consumer unsubscribed") -> None:
        """Give up the assignment (auto commit, revoked callback; lost when no longer a
        member), leave the group, forget the subscription."""
        if not self.subscribed:
            return
        await self._stop_heartbeats()
        state = self.heartbeat
        error = None
        try:
            if state.member_epoch > 0 and state.state not in (FENCED, STALE, FATAL):
                if self.config.enable_auto_commit:
                    await self._commit_before_revocation()
                error = await invoke_listener(self.listener, "on_partitions_revoked", self.assigned)
            elif self.assigned:
                error = await invoke_listener(self.listener, "on_partitions_lost", self.assigned)
        finally:
            self.assigned = frozenset()
            self._assign([])
            _log.info("group %s: member %s leaving: %s", self.group_id, state.member_id, reason)
            if state.state != FATAL:
                await self._send_leave()
            self.filter = None
            self.topics = frozenset()
            state.subscription = None
        if error is not None:
            raise error

    async def close(self) -> None:
        """Commit (auto commit), call revoked, leave, stop the tasks. Errors are logged:
        closing always finishes."""
        if self._closed:
            return
        self._closed = True
        self._kick.set()
        await self._stop_heartbeats()
        if not self.subscribed:
            return
        try:
            await self.unsubscribe("the consumer is closing")
        except Exception as e:  # noqa: BLE001 - a listener's error must not stop the close
            _log.warning("group %s: while leaving: %r", self.group_id, e)
