"""``GroupCoordinatorShard``: the group coordinator's state machine for one partition of
``__consumer_offsets``: the groups that hash to it, their members and their offsets.

It is sans-I/O: it reads time from the clock it is given, keeps its timers in a
``TimerQueue`` for someone else to run, and never writes. Each operation returns a
``CoordinatorResult`` (a response and the records to write); ``replay`` applies a record,
whether it was just written or is being loaded after a restart. Replaying a partition's
records from the start rebuilds the shard's groups and offsets: that is the whole recovery.

The operations, and which part of the shard answers:

==========================  ======================================================
JoinGroup, SyncGroup,       ``groups`` (GroupMetadataManager): the rebalance protocol
Heartbeat, LeaveGroup,
DescribeGroups, ListGroups
OffsetCommit, OffsetFetch,  ``offsets`` (OffsetMetadataManager)
OffsetDelete,
TxnOffsetCommit, markers
DeleteGroups, expiry        here, as they touch both
ConsumerGroupHeartbeat,     ``consumer`` (ConsumerGroupManager, KIP-848 consumer groups:
ConsumerGroupDescribe       ``coordinator/group/consumer/``)
ShareGroupHeartbeat,        ``share`` (ShareGroupManager, KIP-932 share groups:
ShareGroupDescribe          ``coordinator/group/share/``)
==========================  ======================================================

A group id names a classic group or a consumer group, never both: an empty classic group
(offsets only) becomes a consumer group when a member joins with ConsumerGroupHeartbeat, an
empty consumer group a classic one when a member joins with JoinGroup. A group in use under
the other protocol migrates online as ``group.consumer.migration.policy`` allows
(``consumer/group_migration.py``): a classic group upgrades on a ConsumerGroupHeartbeat, and
JoinGroup/SyncGroup/Heartbeat/LeaveGroup of classic members are served by the consumer group;
with the policy ``disabled`` the other protocol is refused (GROUP_ID_NOT_FOUND,
INCONSISTENT_GROUP_PROTOCOL). A share group's id is never used by the other protocols (nor
theirs by it): each refuses it with GROUP_ID_NOT_FOUND.
"""

from __future__ import annotations

import logging

from odradek.coordinator.group.consumer.assignors import consumer_group_assignors
from odradek.coordinator.group.consumer.consumer_group import ConsumerGroupState
from odradek.coordinator.group.consumer.consumer_group_heartbeat import HeartbeatResult
from odradek.coordinator.group.consumer.consumer_group_manager import ConsumerGroupManager
from odradek.coordinator.group.consumer.consumer_group_records import ConsumerGroupRecord
from odradek.coordinator.group.coordinator_record import (
    GroupMetadataRecord,
    OffsetCommitRecord,
)
from odradek.coordinator.group.group_results import GroupDescription, JoinResult
from odradek.coordinator.group.coordinator_result import CoordinatorResult, Write
from odradek.coordinator.group.group_config import GroupConfig
from odradek.coordinator.group.group_metadata_manager import GroupMetadataManager
from odradek.coordinator.group.group_state import GroupState
from odradek.coordinator.group.offset_metadata_manager import OffsetMetadataManager
from odradek.coordinator.group.share.share_group_manager import ShareGroupManager
from odradek.coordinator.group.share.share_group_records import ShareGroupRecord
from odradek.coordinator.group.timer_queue import TimerQueue
from odradek.protocol.generated.error_codes import ErrorCode

log = logging.getLogger("odradek.coordinator.group")


class GroupCoordinatorShard:
    def __init__(self, partition: int, config: GroupConfig, clock, metadata=None) -> None:
        """``metadata()``: the broker's current ``MetadataImage`` (consumer groups' topics)."""
        self.partition = partition
        self.clock = clock
        self.timer = TimerQueue()
        self.groups = GroupMetadataManager(config, clock, self.timer)
        self.consumer = ConsumerGroupManager(config, clock, self.timer, self.groups, metadata or _no_topics,
                                             consumer_group_assignors(config.consumer_assignors).by_name)
        self.offsets = OffsetMetadataManager(config, clock, self.groups)
        self.offsets.consumer_groups = self.consumer
        self.share = ShareGroupManager(config, clock, self.timer, metadata or _no_topics, self._other_group_type)

    def _other_group_type(self, group_id: str) -> str | None:
        """The type of the classic or consumer group using ``group_id`` (not a share group)."""
        if self.consumer.group(group_id) is not None:
            return "consumer"
        classic = self.groups.group(group_id)
        return "classic" if classic is not None and not classic.is_(GroupState.DEAD) else None

    # --- operations (see the table above) ---------------------------------------------------
    def join_group(self, req, respond) -> CoordinatorResult:
        if self.share.group(req.group_id) is not None:
            respond(JoinResult.failed(req.member_id, ErrorCode.GROUP_ID_NOT_FOUND))
            return CoordinatorResult(None)
        consumer = self.consumer.group(req.group_id)
        if consumer is None:
            return self.groups.join_group(req, respond)
        if not consumer.is_empty():  # a classic member of a consumer group (online migration)
            return self.consumer.migration.join(consumer, req, respond)
        # An empty consumer group becomes a classic group: its records go first.
        deleted = CoordinatorResult(None, [Write(self.consumer.delete_records(consumer))])
        self.consumer.groups.pop(req.group_id, None)
        return deleted.then(self.groups.join_group(req, respond))

    def consumer_group_heartbeat(self, req) -> CoordinatorResult:
        if self.share.group(req.group_id) is not None:
            return CoordinatorResult(HeartbeatResult(ErrorCode.GROUP_ID_NOT_FOUND, f"Group {req.group_id} is not a "
                                                     "consumer group.", req.member_id or None, req.member_epoch))
        return self.consumer.heartbeat(req)

    def share_group_heartbeat(self, req) -> CoordinatorResult:
        return self.share.heartbeat(req)

    def share_group(self, group_id: str):
        """The share group ``group_id`` (read-only: ShareGroupDescribe), or None."""
        return self.share.group(group_id)

    def list_share_groups(self, state_names: set[str] | None = None):
        """``[(group id, state)]`` of the share groups (``state_names``: lower case)."""
        return self.share.list_groups(state_names)

    def sync_group(self, req, respond) -> CoordinatorResult:
        consumer = self.consumer.group(req.group_id)
        if consumer is not None:
            return self.consumer.migration.sync(consumer, req, respond)
        return self.groups.sync_group(req, respond)

    def heartbeat(self, group_id: str, member_id: str, instance_id: str | None, generation_id: int) -> CoordinatorResult:
        consumer = self.consumer.group(group_id)
        if consumer is not None:
            return CoordinatorResult(self.consumer.migration.heartbeat(consumer, member_id, instance_id, generation_id))
        return self.groups.heartbeat(group_id, member_id, instance_id, generation_id)

    def leave_group(self, group_id: str, leaving) -> CoordinatorResult:
        consumer = self.consumer.group(group_id)
        if consumer is not None:
            return self.consumer.migration.leave(consumer, leaving)
        return self.groups.leave_group(group_id, leaving)

    def commit_offsets(self, req) -> CoordinatorResult:
        return self.offsets.commit(req)

    def commit_transactional_offsets(self, req) -> CoordinatorResult:
        return self.offsets.commit_transactional(req)

    def fetch_offsets(self, group_id: str, wanted, require_stable: bool = False):
        return self.offsets.fetch(group_id, wanted, require_stable)

    def delete_offsets(self, group_id: str, partitions) -> CoordinatorResult:
        return self.offsets.delete_offsets(group_id, partitions)

    def describe_group(self, group_id: str):
        if self.consumer.group(group_id) is not None or self.share.group(group_id) is not None:  # not classic
            return GroupDescription(group_id, ErrorCode.GROUP_ID_NOT_FOUND, state="")
        return self.groups.describe(group_id)

    def consumer_group(self, group_id: str):
        """The consumer group ``group_id`` (read-only: ConsumerGroupDescribe), or None."""
        return self.consumer.group(group_id)

    def list_groups(self, states=None, types=None):
        return self.groups.list_groups(states, types)

    def list_consumer_groups(self, state_names: set[str] | None = None):
        """``[(group id, state)]`` of the consumer groups (``state_names``: lower case)."""
        return self.consumer.list_groups(state_names)

    def delete_groups(self, group_ids: list[str]) -> CoordinatorResult:
        """Response: ``{group_id: error}``; an empty group's offsets and the group itself get
        tombstones (replayed, they remove it)."""
        errors: dict[str, ErrorCode] = {}
        records: list = []
        for group_id in group_ids:
            share = self.share.group(group_id)
            if share is not None:
                errors[group_id] = ErrorCode.NON_EMPTY_GROUP if not share.is_empty() else ErrorCode.NONE
                records += self.share.delete_records(share) if share.is_empty() else []
                continue
            consumer = self.consumer.group(group_id)
            if consumer is not None:
                if not consumer.is_empty():
                    errors[group_id] = ErrorCode.NON_EMPTY_GROUP
                    continue
                removed = self.offsets.partitions_with_offsets(group_id)
                records += [OffsetCommitRecord(group_id, t, p, None) for t, p in removed]
                records += self.consumer.delete_records(consumer)
                errors[group_id] = ErrorCode.NONE
                continue
            group = self.groups.group(group_id)
            if group is None or group.is_(GroupState.DEAD):
                errors[group_id] = ErrorCode.GROUP_ID_NOT_FOUND
            elif not group.is_(GroupState.EMPTY):
                errors[group_id] = ErrorCode.NON_EMPTY_GROUP
            else:
                removed = self.offsets.partitions_with_offsets(group_id)
                records += [OffsetCommitRecord(group_id, t, p, None) for t, p in removed]
                records.append(GroupMetadataRecord(group_id, None))
                errors[group_id] = ErrorCode.NONE
        return CoordinatorResult(errors, [Write(records)] if records else [])

    def expire_offsets(self, now_ms: int) -> CoordinatorResult:
        """Tombstones for offsets past their retention, and for empty groups left without
        offsets (Kafka's periodic offsets cleanup)."""
        records: list = []
        for group in list(self.groups.groups.values()):
            if group.is_(GroupState.DEAD):
                continue
            expired = self.offsets.expired(group, now_ms)
            records += self.offsets.cleanup(group, expired)
        for consumer in list(self.consumer.groups.values()):
            records += self._expire_consumer_group_offsets(consumer, now_ms)
        if records:
            log.info("partition %d: expiring %d offset/group record(s)", self.partition, len(records))
        return CoordinatorResult(None, [Write(records)] if records else [])

    def _expire_consumer_group_offsets(self, group, now_ms: int) -> list:
        """An empty consumer group's offsets expire ``offsets.retention.minutes`` after their
        commit (a group with members: those of topics it no longer subscribes to); an empty
        group left without offsets is deleted."""
        retention = self.offsets.config.offsets_retention_ms
        committed = self.offsets.committed(group.group_id)
        expired = [tp for tp, v in committed.items()
                   if (group.is_empty() or not group.is_subscribed_to(tp[0]))
                   and not self.offsets.pending.has_pending(group.group_id, tp)
                   and now_ms >= (v.expire_timestamp_ms if v.expire_timestamp_ms is not None
                                  else v.commit_timestamp_ms + retention)]
        records: list = [OffsetCommitRecord(group.group_id, t, p, None) for t, p in expired]
        if (group.is_empty() and len(expired) == len(committed)
                and not self.offsets.pending.has_open_transactions(group.group_id)):
            records += self.consumer.delete_records(group)
        return records

    def on_topics_deleted(self, topics: set[str]) -> CoordinatorResult:
        """Tombstones for every group's offsets of deleted ``topics``, and for empty groups
        left without offsets (Kafka's onPartitionsDeleted): a topic created again under the
        same name must not resume from the old topic's positions."""
        records: list = []
        for group in list(self.groups.groups.values()):
            if group.is_(GroupState.DEAD):
                continue
            gone = [tp for tp in self.offsets.partitions_with_offsets(group.group_id) if tp[0] in topics]
            if gone:
                records += self.offsets.cleanup(group, gone)
        for consumer in list(self.consumer.groups.values()):
            gone = [tp for tp in self.offsets.partitions_with_offsets(consumer.group_id) if tp[0] in topics]
            records += [OffsetCommitRecord(consumer.group_id, t, p, None) for t, p in gone]
        if records:
            log.info("partition %d: removing %d offset/group record(s) of deleted topics %s",
                     self.partition, len(records), sorted(topics))
        return CoordinatorResult(None, [Write(records)] if records else [])

    # --- timers -----------------------------------------------------------------------------
    def next_deadline(self) -> int | None:
        return self.timer.next_deadline()

    def run_due_timers(self, now_ms: int) -> list[CoordinatorResult]:
        """Run every timer due at ``now_ms``; return what they want written, in order."""
        return [result for fn in self.timer.pop_due(now_ms) if (result := fn()) is not None]

    # --- replay -----------------------------------------------------------------------------
    def replay(self, record, producer_id: int = -1, record_offset: int = -1) -> None:
        """Apply one record of this partition (written just now, or loaded) at
        ``record_offset`` of the log; ``producer_id``: its batch's when transactional."""
        if isinstance(record, OffsetCommitRecord):
            if record.offset is not None and self.consumer.group(record.group_id) is None:
                self.groups.get_or_create(record.group_id)
            self.offsets.replay(record, producer_id, record_offset)
        elif isinstance(record, GroupMetadataRecord):
            self.groups.replay(record)
        elif isinstance(record, ConsumerGroupRecord):
            self.consumer.replay(record)
        elif isinstance(record, ShareGroupRecord):
            self.share.replay(record)
        else:
            raise TypeError(f"not a group coordinator record: {record!r}")

    def replay_end_transaction(self, producer_id: int, committed: bool) -> None:
        """Apply a transaction marker of ``producer_id`` (a control batch of this partition)."""
        for group_id in self.offsets.replay_end_transaction(producer_id, committed):
            if self.offsets.has_offsets(group_id) and self.consumer.group(group_id) is None:
                self.groups.get_or_create(group_id)

    def on_loaded(self) -> None:
        self.groups.on_loaded()
        self.consumer.on_loaded()
        self.share.on_loaded()

    def unload(self) -> None:
        self.groups.unload()
        self.consumer.unload()
        self.share.unload()
        self.offsets.unload()


def _no_topics():
    from odradek.metadata.image import EMPTY_IMAGE

    return EMPTY_IMAGE


__all__ = ["GroupCoordinatorShard", "ConsumerGroupState"]
