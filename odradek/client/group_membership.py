"""A consumer's membership of its group: Kafka's classic group protocol, from the member's side.

``GroupMembership`` is what ``AsyncConsumer.subscribe`` switches on. It keeps the member's
identity (member id, generation, chosen protocol), joins, heartbeats, commits as a member of
its generation, and leaves, through the consumer's ``GroupCoordinatorClient`` (a connection
of its own to the coordinator; coordinator retries). States, as in Kafka's client::

    UNJOINED --JoinGroup sent--> PREPARING --JoinGroup answered--> COMPLETING
        --SyncGroup answered--> STABLE --(rebalance, subscription or metadata changed)-->
        rejoin needed --(next poll)--> PREPARING ...

A rebalance has three steps (range and roundrobin are *eager*: every member gives up all its
partitions before it rejoins):

1. *prepare*, in ``poll``: with ``enable_auto_commit``, commit what was consumed (a broker
   takes commits of the current generation during PreparingRebalance), call
   ``on_partitions_revoked`` (``on_partitions_lost`` when the generation is already lost),
   drop the assignment.
2. *join*, a task that outlives the ``poll`` that started it (``poll`` waits for it at most its
   timeout, so members polled one after another in one thread still meet): JoinGroup offering
   one protocol per assignor, in preference order, each with the member's subscription;
   MEMBER_ID_REQUIRED is answered by joining again with the id given; the leader refreshes
   the metadata of every member's topics, runs the chosen assignor and sends the assignments
   in SyncGroup, from which every member gets its own.
3. *complete*, in ``poll``: take the assignment, call ``on_partitions_assigned``.

While STABLE a task heartbeats every ``heartbeat_interval_ms``. REBALANCE_IN_PROGRESS asks
for a rejoin; ILLEGAL_GENERATION and UNKNOWN_MEMBER_ID mean the generation is lost (and with
the latter the member id); FENCED_INSTANCE_ID (another process has this ``group_instance_id``)
is fatal, raised by every later ``poll``. A member not polled for ``max_poll_interval_ms``
(the rebalance timeout) leaves the group, as Kafka's heartbeat thread makes it do.

Topics: a list is fixed; a pattern (``topic_filter``) is matched again on a full metadata
refresh every ``metadata_max_age_ms``, and a new match rejoins. The leader remembers the
partition counts it assigned from and rejoins when a refresh shows them changed. Static
members (``group_instance_id``) keep their place over a restart within the session timeout,
getting their assignment back without a rebalance, so they send no LeaveGroup on close.
"""

from __future__ import annotations

import asyncio
import logging

from odradek.client.assignors import (
    PROTOCOL_TYPE,
    assign_encoded,
    assignor_for,
    decode_assignment,
    encode_subscription,
    member_subscriptions,
)
from odradek.client.coordinator import GroupCoordinatorClient
from odradek.client.errors import BrokerError, KafkaError
from odradek.client.member_config import CommitFailedError, Generation, MembershipConfig
from odradek.client.rebalance_listener import invoke_listener
from odradek.client.topic_filter import TopicFilter
from odradek.client.topic_partition import TopicPartition
from odradek.protocol.generated import ApiKey
from odradek.protocol.generated.error_codes import ErrorCode
from odradek.protocol.generated.heartbeat_request import HeartbeatRequest
from odradek.protocol.generated.join_group_request import (
    JoinGroupRequest,
    JoinGroupRequestProtocol,
)
from odradek.protocol.generated.leave_group_request import (
    LeaveGroupRequest,
    MemberIdentity,
)
from odradek.protocol.generated.sync_group_request import (
    SyncGroupRequest,
    SyncGroupRequestAssignment,
)

__all__ = ["CommitFailedError", "Generation", "GroupMembership", "MembershipConfig"]

_log = logging.getLogger("odradek.client.consumer")

UNJOINED, PREPARING, COMPLETING, STABLE = "unjoined", "preparing", "completing", "stable"
_JOIN_SLACK = 5.0  # seconds a JoinGroup/SyncGroup may take beyond the rebalance timeout (Java's)
_GENERATION_LOST = frozenset({ErrorCode.ILLEGAL_GENERATION, ErrorCode.UNKNOWN_MEMBER_ID})


class GroupMembership:
    def __init__(self, coordinator: GroupCoordinatorClient, config: MembershipConfig, *, assign, consumed,
                 wake) -> None:
        """``assign(partitions)`` replaces the consumer's assignment, ``consumed()`` gives the
        offsets to commit for what the application has been handed, ``wake()`` ends a wait
        in ``poll`` so it acts on a rejoin at once."""
        self.coordinator = coordinator
        self.cluster = coordinator.cluster
        self.group_id = coordinator.group_id
        self.config = config
        self.assignors = {a.name: a for a in (assignor_for(spec) for spec in config.assignors)}
        self._assign, self._consumed, self._wake = assign, consumed, wake
        self.filter: TopicFilter | None = None
        self.listener = None
        self.topics: frozenset[str] = frozenset()
        self.assigned: frozenset[TopicPartition] = frozenset()
        self.state = UNJOINED
        self.generation = Generation(-1, "", None)
        self.fatal: KafkaError | None = None
        self._rejoin_needed = False
        self._reason = "the consumer subscribed"
        self._prepared = False  # step 1 of the current rebalance is done
        self._join_task: asyncio.Task | None = None
        self._retry_at = 0.0
        self._heartbeats: asyncio.Task | None = None
        self._commit_task: asyncio.Task | None = None
        self._next_auto_commit = 0.0
        self._last_committed: dict = {}
        self._last_poll = 0.0
        self._matched = False  # a pattern was matched against a full topic list
        self._next_match = 0.0
        self._snapshot: dict[str, int | None] | None = None  # the leader's partition counts
        self._closed = False
        self.cluster.metadata_listeners.append(self._on_metadata)

    @property
    def loop(self) -> asyncio.AbstractEventLoop:
        return self.cluster.loop

    @property
    def subscribed(self) -> bool:
        return self.filter is not None

    def request_rejoin(self, reason: str) -> None:
        if not self._rejoin_needed:
            _log.info("group %s: rejoining: %s", self.group_id, reason)
        self._rejoin_needed = True
        self._reason = reason
        self._wake()

    def _reset_generation(self, forget_member_id: bool, reason: str) -> None:
        """The member lost its generation (its partitions are lost, not revoked)."""
        self.generation = Generation(-1, "" if forget_member_id else self.generation.member_id, None)
        self.state = UNJOINED
        self._snapshot = None
        self.request_rejoin(reason)

    # --- subscription ----------------------------------------------------------------------
    def subscribe(self, topic_filter: TopicFilter, listener) -> None:
        """Subscribe (again): a member rejoins only when its topics change (for a pattern:
        when the next poll matches it to other topics)."""
        self.filter = topic_filter
        self.listener = listener
        if topic_filter.dynamic:
            self._matched = False
        else:
            self._set_topics(topic_filter.topics)

    def _set_topics(self, topics: frozenset[str]) -> None:
        if topics == self.topics:
            return
        self.topics = frozenset(topics)
        if self.cluster.add_topics(self.topics):
            self.cluster.request_update()
        if self.state != UNJOINED:
            self.request_rejoin(f"the subscribed topics are now {sorted(self.topics)}")

    async def _match_pattern(self) -> None:
        """Match the pattern against every topic of the cluster (a full metadata refresh)."""
        self._next_match = self.loop.time() + self.config.metadata_max_age_ms / 1000
        meta = await self.cluster.refresh(None)
        if self.filter is not None and self.filter.dynamic:
            self._matched = True
            self._set_topics(self.filter.matching(meta))

    def _on_metadata(self, meta) -> None:
        """After every refresh: a leader rejoins when the partitions it assigned changed."""
        snapshot = self._snapshot
        if snapshot and self.state == STABLE and any(meta.partition_count(t) != n for t, n in snapshot.items()):
            self._snapshot = None
            self.request_rejoin("the partition counts of the group's topics changed")

    # --- polling ---------------------------------------------------------------------------
    async def poll(self, deadline: float) -> None:
        """Called by every ``poll``: run the rebalance steps that are due (waiting for a join at
        most until ``deadline``, loop time), or start an auto commit when one is due."""
        self._last_poll = self.loop.time()
        if self.fatal is not None:
            raise self.fatal
        if not self.subscribed or self._closed:
            return
        if self._heartbeats is None:
            self._heartbeats = self.loop.create_task(self._heartbeat_loop())
        if self.filter.dynamic and not self._matched:
            try:
                await self._match_pattern()
            except KafkaError as e:
                if not e.retriable:
                    raise
                _log.debug("group %s: topic list for %r failed: %s", self.group_id, self.filter, e)
                return
        if self._rejoin_needed or self._join_task is not None or self.state != STABLE:
            await self._rebalance(deadline)
        else:
            self._maybe_auto_commit()

    async def _rebalance(self, deadline: float) -> None:
        if not self._prepared:
            self._prepared = True  # even when a listener raises: its error is raised once
            await self._release()
        task = self._join_task
        if task is None:
            if self.loop.time() < self._retry_at:
                return
            self._rejoin_needed = False
            task = self._join_task = self.loop.create_task(self._join())
        if not task.done():
            await asyncio.wait([task], timeout=max(deadline - self.loop.time(), 0))
            if not task.done():
                return
        self._join_task = None
        if task.cancelled():
            return
        error = task.exception()
        if error is not None:
            if isinstance(error, KafkaError) and error.retriable and self.fatal is None:
                _log.info("group %s: joining failed, retrying: %s", self.group_id, error)
                self._retry_at = self.loop.time() + self.cluster.retry_backoff
                return
            raise error
        await self._complete(task.result())

    async def _release(self) -> None:
        """Give up the assignment: commit (auto commit, valid generation) and call revoked, or
        call lost when the generation is gone. The first join has nothing to give up."""
        assigned = self.assigned
        error = None
        if self.generation.generation_id >= 0:
            if self.config.enable_auto_commit:
                await self._commit_quietly(self._consumed())
            error = await invoke_listener(self.listener, "on_partitions_revoked", assigned)
        elif assigned:
            error = await invoke_listener(self.listener, "on_partitions_lost", assigned)
        self.assigned = frozenset()
        self._assign([])
        if error is not None:
            raise error

    async def _complete(self, partitions: list[TopicPartition]) -> None:
        self._prepared = False
        self._last_committed.clear()  # others may have committed these partitions meanwhile
        self.assigned = frozenset(partitions)
        self._assign(partitions)
        _log.info("group %s generation %d: assigned %s", self.group_id, self.generation.generation_id,
                  ", ".join(map(str, sorted(self.assigned))))
        self._next_auto_commit = self.loop.time() + self.config.auto_commit_interval_ms / 1000
        error = await invoke_listener(self.listener, "on_partitions_assigned", self.assigned)
        if error is not None:
            raise error

    # --- join and sync ---------------------------------------------------------------------
    async def _join(self) -> list[TopicPartition]:
        """JoinGroup and SyncGroup until the member has an assignment of a generation."""
        self.state = PREPARING
        try:
            while True:
                response = await self._send_join()
                code = response.error_code
                if code == ErrorCode.NONE:
                    self.generation = Generation(response.generation_id, response.member_id, response.protocol_name)
                    self.state = COMPLETING
                    assignment = await self._sync(response)
                    if assignment is not None:
                        self.state = STABLE
                        return assignment
                    self.state = PREPARING
                elif code == ErrorCode.MEMBER_ID_REQUIRED:
                    self.generation = Generation(-1, response.member_id, None)
                elif code == ErrorCode.UNKNOWN_MEMBER_ID:
                    self.generation = Generation(-1, "", None)
                elif code not in (ErrorCode.ILLEGAL_GENERATION, ErrorCode.REBALANCE_IN_PROGRESS):
                    raise self._error(code)
        except BaseException:
            if self.state != STABLE:
                self.state = UNJOINED
            raise

    def _error(self, code: int) -> BrokerError:
        error = BrokerError(code, subject=f"group {self.group_id}")
        if code == ErrorCode.FENCED_INSTANCE_ID:
            self.fatal = error
        return error

    def _timeouts(self) -> tuple[float, float]:
        """A JoinGroup or SyncGroup's request timeout and retry deadline: the broker may hold
        it for a whole rebalance timeout."""
        timeout = self.config.rebalance_timeout_ms / 1000 + _JOIN_SLACK
        return timeout, self.loop.time() + max(timeout, self.cluster.request_timeout * 2)

    async def _send_join(self):
        subscription = encode_subscription(self.topics)
        cfg = self.config
        request = JoinGroupRequest(
            group_id=self.group_id, session_timeout_ms=cfg.session_timeout_ms,
            rebalance_timeout_ms=cfg.rebalance_timeout_ms, member_id=self.generation.member_id,
            group_instance_id=cfg.group_instance_id, protocol_type=PROTOCOL_TYPE,
            protocols=[JoinGroupRequestProtocol(name, subscription) for name in self.assignors],
            reason=self._reason,
        )
        timeout, deadline = self._timeouts()
        return await self.coordinator.send(ApiKey.JOIN_GROUP, request, lambda r: r.error_code,
                                           timeout=timeout, deadline=deadline)

    async def _sync(self, joined) -> list[TopicPartition] | None:
        """SyncGroup (with every member's assignment when leading); the member's partitions, or
        None when it must join again."""
        generation = self.generation
        assignments: dict[str, bytes] = {}
        if joined.leader == generation.member_id:
            # A restarted static leader of a stable group is told to skip the assignment: the
            # group keeps the one it has.
            assignments = await self._lead(generation.protocol, joined.members, joined.skip_assignment)
        request = SyncGroupRequest(
            group_id=self.group_id, generation_id=generation.generation_id, member_id=generation.member_id,
            group_instance_id=self.config.group_instance_id, protocol_type=PROTOCOL_TYPE,
            protocol_name=generation.protocol,
            assignments=[SyncGroupRequestAssignment(m, a) for m, a in assignments.items()],
        )
        timeout, deadline = self._timeouts()
        response = await self.coordinator.send(ApiKey.SYNC_GROUP, request, lambda r: r.error_code,
                                               timeout=timeout, deadline=deadline)
        code = response.error_code
        if code == ErrorCode.NONE:
            return decode_assignment(response.assignment or b"")
        if code == ErrorCode.REBALANCE_IN_PROGRESS:
            return None
        if code in _GENERATION_LOST:
            forget = code == ErrorCode.UNKNOWN_MEMBER_ID
            self.generation = Generation(-1, "" if forget else generation.member_id, None)
            return None
        raise self._error(code)

    async def _lead(self, protocol: str | None, members, skip_assignment: bool) -> dict[str, bytes]:
        """As the leader: every member's assignment by the chosen assignor."""
        assignor = self.assignors.get(protocol)
        if assignor is None:
            raise KafkaError(f"group {self.group_id} chose protocol {protocol!r}, which this member does not offer")
        subscriptions = member_subscriptions(members)
        topics = {t for s in subscriptions.values() for t in s.topics}
        # The leader watches every topic of the group, so that it sees partitions change.
        self.cluster.add_topics(topics)
        _, deadline = self._timeouts()
        meta = await self.cluster.retry(lambda: self.cluster.refresh(topics), deadline) if topics else self.cluster.metadata
        self._snapshot = {t: meta.partition_count(t) for t in topics}
        return {} if skip_assignment else assign_encoded(assignor, self._snapshot, subscriptions)

    # --- heartbeats ------------------------------------------------------------------------
    async def _heartbeat_loop(self) -> None:
        interval = self.config.heartbeat_interval_ms / 1000
        while not self._closed:
            await asyncio.sleep(interval)
            try:
                await self._heartbeat_tick()
            except KafkaError as e:
                _log.debug("group %s: heartbeat round failed: %s", self.group_id, e)
            except Exception:  # noqa: BLE001 - the heartbeat task must outlive a bug report
                _log.exception("group %s: heartbeat round failed", self.group_id)

    async def _heartbeat_tick(self) -> None:
        now = self.loop.time()
        if self.filter is not None and self.filter.dynamic and now >= self._next_match:
            await self._match_pattern()
        if self.state != STABLE or self._rejoin_needed:
            return
        if now - self._last_poll > self.config.rebalance_timeout_ms / 1000:
            # The application stopped polling: let the group move its partitions on.
            await self._leave("the consumer was not polled within max_poll_interval_ms")
            self._reset_generation(True, "max_poll_interval_ms expired")
            return
        await self._heartbeat()

    async def _heartbeat(self) -> None:
        generation = self.generation
        request = HeartbeatRequest(group_id=self.group_id, generation_id=generation.generation_id,
                                   member_id=generation.member_id, group_instance_id=self.config.group_instance_id)
        deadline = self.loop.time() + self.config.session_timeout_ms / 1000
        response = await self.coordinator.send(ApiKey.HEARTBEAT, request, lambda r: r.error_code, deadline=deadline)
        if self.generation != generation or self.state != STABLE:
            return  # answers a generation that has ended since
        code = response.error_code
        if code == ErrorCode.REBALANCE_IN_PROGRESS:
            self.request_rejoin("the group is rebalancing")
        elif code in _GENERATION_LOST:
            self._reset_generation(code == ErrorCode.UNKNOWN_MEMBER_ID, f"heartbeat: {ErrorCode(code).name}")
        elif code != ErrorCode.NONE:
            error = self._error(code)
            if code == ErrorCode.FENCED_INSTANCE_ID:
                self._wake()
            raise error

    # --- commits ---------------------------------------------------------------------------
    async def commit(self, offsets: dict) -> None:
        """Commit ``offsets`` as a member of the current generation; CommitFailedError when
        the group no longer counts this member in it."""
        generation = self.generation
        if generation.generation_id < 0:
            raise CommitFailedError(f"group {self.group_id}: not a member of a generation (rebalancing)")
        try:
            await self.coordinator.commit_offsets(offsets, generation=generation.generation_id,
                                                  member_id=generation.member_id,
                                                  group_instance_id=self.config.group_instance_id)
        except BrokerError as e:
            if e.code in _GENERATION_LOST or e.code == ErrorCode.REBALANCE_IN_PROGRESS:
                if e.code in _GENERATION_LOST and self.generation == generation:
                    self._reset_generation(e.code == ErrorCode.UNKNOWN_MEMBER_ID, f"commit: {e.code.name}")
                else:
                    self.request_rejoin(f"commit: {e.code.name}")
                raise CommitFailedError(f"group {self.group_id} refused the commit: {e}") from e
            if e.code == ErrorCode.FENCED_INSTANCE_ID:
                self.fatal = e
            raise
        self._last_committed.update(offsets)

    async def _commit_quietly(self, offsets: dict) -> None:
        offsets = {tp: o for tp, o in offsets.items() if self._last_committed.get(tp) != o}
        if not offsets:
            return
        try:
            await self.commit(offsets)
        except KafkaError as e:
            _log.warning("group %s: auto commit of %s failed: %s", self.group_id, sorted(offsets), e)

    def _maybe_auto_commit(self) -> None:
        now = self.loop.time()
        if not self.config.enable_auto_commit or now < self._next_auto_commit:
            return
        if self._commit_task is not None and not self._commit_task.done():
            return
        self._next_auto_commit = now + self.config.auto_commit_interval_ms / 1000
        self._commit_task = self.loop.create_task(self._commit_quietly(self._consumed()))

    # --- leaving ---------------------------------------------------------------------------
    async def _leave(self, reason: str) -> None:
        """LeaveGroup, for a dynamic member that joined (static members stay until their
        session times out, so that a restart does not rebalance)."""
        member_id = self.generation.member_id
        if self.config.group_instance_id is not None or not member_id:
            return
        request = LeaveGroupRequest(group_id=self.group_id, member_id=member_id,
                                    members=[MemberIdentity(member_id=member_id, reason=reason)])
        try:
            await self.coordinator.send(ApiKey.LEAVE_GROUP, request, lambda r: r.error_code)
        except KafkaError as e:
            _log.info("group %s: LeaveGroup failed (the session will time out): %s", self.group_id, e)

    async def _stop_joining(self) -> None:
        task, self._join_task = self._join_task, None
        if task is not None and not task.done():
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)

    async def unsubscribe(self, reason: str = "the consumer unsubscribed") -> None:
        """Give up the assignment (revoked callback), leave the group, forget the subscription."""
        if not self.subscribed:
            return
        await self._stop_joining()
        try:
            if not self._prepared:
                await self._release()
        finally:
            self._prepared = False
            await self._leave(reason)
            self.filter = None
            self.topics = frozenset()
            self.generation = Generation(-1, "", None)
            self.state = UNJOINED
            self._rejoin_needed = False
            self._snapshot = None

    async def close(self) -> None:
        """Commit (auto commit), call revoked, leave (dynamic members), stop the tasks.
        Errors are logged: closing always finishes."""
        if self._closed:
            return
        self._closed = True
        try:
            self.cluster.metadata_listeners.remove(self._on_metadata)
        except ValueError:
            pass
        for task in (self._heartbeats, self._commit_task):
            if task is not None and not task.done():
                task.cancel()
        await asyncio.gather(*(t for t in (self._heartbeats, self._commit_task) if t is not None),
                             return_exceptions=True)
        if not self.subscribed:
            return
        try:
            await self.unsubscribe("the consumer is closing")
        except Exception as e:  # noqa: BLE001 - a listener's error must not stop the close
            _log.warning("group %s: while leaving: %r", self.group_id, e)
