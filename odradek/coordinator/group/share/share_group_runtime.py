"""The KIP-932 share groups' part of the group coordinator (``ShareGroupRuntime``, mixed into
``GroupCoordinator``, coordinator/group/group_coordinator.py; Kafka's share-group methods of
``GroupCoordinatorService``).

Share groups live in the same shards as the other groups (``GroupCoordinatorShard.share``,
coordinator/group/share/): ShareGroupHeartbeat and ShareGroupDescribe are served as the
consumer groups' are, answered once their records are replicated. What is theirs alone is the
share-group state at the share coordinator (coordinator/share/): when a heartbeat assigns a
share partition for the first time the shard asks for InitializeShareGroupState (state epoch
0, start offset -1, so the share partition applies ``share.auto.offset.reset``), and when a
group is deleted for DeleteShareGroupState. Those calls go through the broker's ``Persister``
(``broker.share_persister``, coordinator/share/persister.py) only once the records that asked
for them are written; their answers come back to the shard as records
(``initialized`` / ``initialize_failed``). Without a persister, or when the write failed, an
initialization is failed at once and asked again at a later heartbeat.

The mixin uses the runtime's ``_slot_for``, ``_apply``, ``_spawn`` and ``_slots``.
"""

from __future__ import annotations

import logging

from odradek.coordinator.coordinator_runtime import CoordinatorError
from odradek.coordinator.group.coordinator_result import group_write_error
from odradek.coordinator.group.share.share_group_heartbeat import ShareHeartbeatResult
from odradek.protocol.generated.error_codes import ErrorCode

log = logging.getLogger("odradek.coordinator.group")


class ShareGroupRuntime:
    """ShareGroupHeartbeat, ShareGroupDescribe and ListGroups' share groups, and the
    share-group state calls (see the module's docstring)."""

    async def share_group_heartbeat(self, req) -> ShareHeartbeatResult:
        """ShareGroupHeartbeat: answered once its records are replicated (as the consumer
        groups'); the share-group state initializations it asks for then go to the persister."""
        try:
            slot = self._slot_for(req.group_id)
        except CoordinatorError as e:
            return ShareHeartbeatResult(e.error, None, req.member_id or None, req.member_epoch)
        slot.shard.share.state_initialization = self._share_persister() is not None
        result = slot.shard.share_group_heartbeat(req)
        errors = [await f for f in self._apply(slot, result)]
        failed = next((e for e in errors if e != ErrorCode.NONE), None)
        self._spawn_share_state_calls(slot, failed is None)
        if failed is not None:
            return ShareHeartbeatResult(group_write_error(failed), None, req.member_id or None, req.member_epoch)
        return result.response

    def share_group(self, group_id: str):
        """``(error, ShareGroup or None)`` for ShareGroupDescribe (read on the loop)."""
        try:
            slot = self._slot_for(group_id)
        except CoordinatorError as e:
            return e.error, None
        return ErrorCode.NONE, slot.shard.share_group(group_id)

    def list_share_groups(self, state_names=None) -> list:
        groups = []
        for slot in self._slots.values():
            if not slot.loading:
                groups += slot.shard.list_share_groups(state_names)
        return groups

    def _share_persister(self):
        """The broker's ``Persister`` (``coordinator/share/persister.py``), None without one."""
        return getattr(self.broker, "share_persister", None)

    def _spawn_share_state_calls(self, slot, written: bool) -> None:
        """Send the shard's InitializeShareGroupState and DeleteShareGroupState calls (only
        once their records are written) and feed the answers back to the shard."""
        share = slot.shard.share
        initialize, delete = share.take_initialize_requests(), share.take_delete_state_requests()
        persister = self._share_persister()
        if persister is None or not written:
            for request in initialize:
                self._apply(slot, share.initialize_failed(request.group_id, request.topics))
            return
        for request in initialize:
            self._spawn(self._initialize_share_state(slot, persister, request), slot)
        for request in delete:
            self._spawn(self._delete_share_state(persister, request), slot)

    async def _initialize_share_state(self, slot, persister, request) -> None:
        done: dict = {}
        failed: dict = {}
        for topic_id, (name, partitions) in sorted(request.topics.items()):
            for p in sorted(partitions):
                try:  # state epoch 0, start offset -1: the share partition applies share.auto.offset.reset
                    error = await persister.initialize_state(request.group_id, topic_id, p, 0, -1)
                except Exception:  # noqa: BLE001 - a failed call is retried at a later heartbeat
                    log.exception("InitializeShareGroupState %s %s-%d failed", request.group_id, name, p)
                    error = ErrorCode.UNKNOWN_SERVER_ERROR
                target = done if error == ErrorCode.NONE else failed
                target.setdefault(topic_id, (name, set()))[1].add(p)
        if self._slots.get(slot.partition) is not slot:
            return
        share = slot.shard.share
        if done:
            self._apply(slot, share.initialized(request.group_id, {t: (n, frozenset(ps)) for t, (n, ps) in done.items()}))
        if failed:
            self._apply(slot, share.initialize_failed(request.group_id,
                                                      {t: (n, frozenset(ps)) for t, (n, ps) in failed.items()}))

    async def _delete_share_state(self, persister, request) -> None:
        for topic_id, partitions in sorted(request.topics.items()):
            for p in sorted(partitions):
                try:
                    await persister.delete_state(request.group_id, topic_id, p)
                except Exception:  # noqa: BLE001 - the group is gone either way
                    log.exception("DeleteShareGroupState %s %s-%d failed", request.group_id, topic_id, p)
