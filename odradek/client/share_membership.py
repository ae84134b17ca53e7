"""A share consumer's membership of its share group: the asyncio edge of
``share_heartbeat_state.ShareHeartbeatState`` (Kafka's ``ShareHeartbeatRequestManager`` and
``ShareMembershipManager``).

A task sends ShareGroupHeartbeat (API 76, v1) over the coordinator's own connection
(``GroupCoordinatorClient``, FindCoordinator key type 0: share groups live in the group
coordinator): at once when joining or when the subscription changes, then every heartbeat
interval the coordinator gives (group.share.heartbeat.interval.ms). NOT_COORDINATOR,
COORDINATOR_NOT_AVAILABLE or a broken connection find the coordinator again;
COORDINATOR_LOAD_IN_PROGRESS backs off. ``assigned()`` resolves the assignment's topic ids to
names through the metadata (refreshing it, at most once per retry backoff, for ids it does
not know yet). ``leave`` sends one heartbeat at epoch -1, not retried: a member whose leave is
lost is removed when group.share.session.timeout.ms passes.
"""

from __future__ import annotations

import asyncio
import logging

from odradek.client.coordinator import GroupCoordinatorClient
from odradek.client.errors import BrokerError, KafkaError, UnsupportedVersionError
from odradek.client.share_acknowledgements import TopicIdPartition
from odradek.client.share_heartbeat_state import FATAL, ShareHeartbeatState
from odradek.protocol.generated import ApiKey
from odradek.protocol.generated.error_codes import ErrorCode

__all__ = ["ShareMembership"]

_log = logging.getLogger("odradek.client.share_consumer")
_LEAVE_TIMEOUT = 5.0  # seconds the leave heartbeat of a close may take
_UNSUPPORTED = "the cluster does not support share groups (ShareGroupHeartbeat v1, KIP-932)"


class ShareMembership:
    def __init__(self, coordinator: GroupCoordinatorClient, *, rack_id: str | None = None, wake=lambda: None) -> None:
        self.coordinator = coordinator
        self.cluster = coordinator.cluster
        self.group_id = coordinator.group_id
        self.state = ShareHeartbeatState(self.group_id, rack_id=rack_id,
                                         retry_backoff_ms=int(self.cluster.retry_backoff * 1000))
        self.fatal: KafkaError | None = None
        self._wake = wake
        self._kick = asyncio.Event()
        self._task: asyncio.Task | None = None
        self._names: dict = {}
        self._resolve_at = 0.0

    @property
    def member_id(self) -> str:
        return self.state.member_id

    def subscribe(self, topics) -> None:
        self.state.subscribe(topics)
        if self.cluster.add_topics(set(topics)):
            self.cluster.request_update()
        if self._task is None:
            self._task = self.cluster.loop.create_task(self._loop())
        self._kick.set()

    async def assigned(self) -> frozenset[TopicIdPartition]:
        """The assigned share partitions whose topic ids the metadata names."""
        target = self.state.assignment
        missing = [t for t in target if t not in self._names]
        if missing:
            self._learn_names()
            now = self.cluster.loop.time()
            if any(t not in self._names for t in target) and now >= self._resolve_at:
                self._resolve_at = now + self.cluster.retry_backoff
                try:
                    await self.cluster.refresh(None)
                except KafkaError as e:
                    if not e.retriable:
                        raise
                self._learn_names()
        return frozenset(TopicIdPartition(t, self._names[t], p)
                         for t, ps in target.items() if t in self._names for p in ps)

    def _learn_names(self) -> None:
        for name, info in self.cluster.metadata.topics.items():
            self._names[info.topic_id] = name

    # --- heartbeats ---------------------------------------------------------------------------
    async def _loop(self) -> None:
        while True:
            try:
                await self._step()
            except asyncio.CancelledError:
                raise
            except Exception:  # noqa: BLE001 - the heartbeat task must outlive a bug report
                _log.exception("share group %s: heartbeat failed", self.group_id)
                await asyncio.sleep(self.cluster.retry_backoff)

    async def _step(self) -> None:
        state = self.state
        now = self.cluster.loop.time()
        at = state.next_heartbeat_at()
        if at is None or at > now:
            self._kick.clear()
            try:
                await asyncio.wait_for(self._kick.wait(), None if at is None else at - now)
            except TimeoutError:
                pass
            return
        changes = state.assignment_changes
        await self._send()
        if state.assignment_changes != changes or state.state == FATAL:
            self._wake()

    async def _send(self) -> None:
        state, coordinator = self.state, self.coordinator
        try:
            conn = await coordinator.connection()
            conn.api_version(ApiKey.SHARE_GROUP_HEARTBEAT)
        except UnsupportedVersionError as e:
            self._fail(UnsupportedVersionError(f"share group {self.group_id}: {_UNSUPPORTED} ({e})"))
            return
        except KafkaError as e:
            self._retry_later(e)
            return
        request = state.build_request()
        try:
            response = await conn.send(ApiKey.SHARE_GROUP_HEARTBEAT, request)
        except KafkaError as e:
            coordinator.mark_dead()
            self._retry_later(e)
            return
        except BaseException:
            state.on_failure(self.cluster.loop.time())
            raise
        action = state.on_response(response, self.cluster.loop.time())
        if action == "rediscover":
            coordinator.mark_dead()
        elif action == "fatal":
            code, message = state.fatal
            self._fail(BrokerError(code, message, f"share group {self.group_id}"))
        elif action == "fenced":
            _log.info("share group %s: member %s fenced (%s): rejoining", self.group_id, state.member_id,
                      ErrorCode(response.error_code).name)

    def _retry_later(self, error: KafkaError) -> None:
        if not error.retriable:
            self._fail(error)
            return
        _log.debug("share group %s: heartbeat failed, retrying: %s", self.group_id, error)
        self.state.on_failure(self.cluster.loop.time())

    def _fail(self, error: KafkaError) -> None:
        self.state.state = FATAL
        self.fatal = error
        self._wake()

    # --- leaving ------------------------------------------------------------------------------
    async def stop(self) -> None:
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)

    async def leave(self) -> None:
        """Stop heartbeating and send one leave heartbeat (epoch -1)."""
        await self.stop()
        state = self.state
        state.leave()
        if state.next_heartbeat_at() is None:
            return
        try:
            conn = await asyncio.wait_for(self.coordinator.connection(), _LEAVE_TIMEOUT)
            await conn.send(ApiKey.SHARE_GROUP_HEARTBEAT, state.build_request(), timeout=_LEAVE_TIMEOUT)
        except (KafkaError, TimeoutError) as e:
            _log.info("share group %s: leave heartbeat failed (the session will time out): %s", self.group_id, e)
        finally:
            state.left()
