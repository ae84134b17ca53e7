"""``OffsetMetadataManager``: the committed offsets of the groups of one shard.

Offsets change only by replaying records: a commit returns OffsetCommit records (and the
response that holds if they are written); the runtime appends them and replays them here,
exactly as loading the partition after a restart does. Deletions and expiry return tombstones
(a null value), and when that leaves an empty group without offsets, a group tombstone too,
which removes the group when replayed (Kafka's ``cleanupGroupMetadata``).

Who may commit (Kafka's rules): a member of the current generation (its member id and
generation must match: UNKNOWN_MEMBER_ID, ILLEGAL_GENERATION, FENCED_INSTANCE_ID otherwise),
or, with generation -1 and no member id, anyone while the group has no members (consumers
that assign partitions themselves and only store offsets). A group that does not exist is
created by such a commit. During CompletingRebalance commits get REBALANCE_IN_PROGRESS.

Expiry (KIP-211): an offset with its own expire timestamp (OffsetCommit v2-v4 retention)
expires then; otherwise, in an empty group, all offsets expire ``offsets.retention.minutes``
after the group became empty; in a stable consumer group, offsets of topics no member
subscribes to expire that long after their commit; a group that only stores offsets (no
protocol type) loses each offset that long after its commit.

Transactional offsets (TxnOffsetCommit, Kafka's ``commitTransactionalOffset``): the same
records, written in a transactional batch of the producer; replayed, they stay pending
(``pending_offsets``) until the producer's marker: a COMMIT makes them committed unless an
offset written later in the log was committed meanwhile (``positions`` keeps each committed
offset's record offset), an ABORT drops them. Who may commit transactionally is checked as
for OffsetCommit, except that a commit without member id and generation is accepted whatever
the group's state (old producers send none) and a group completing a rebalance is no obstacle.
A pending offset holds back its partition: OffsetFetch with ``require_stable`` answers
UNSTABLE_OFFSET_COMMIT for it, its committed offset does not expire, a group with open
transactions is not removed by expiry; tombstones (OffsetDelete, DeleteGroups, deleted
topics) cover pending partitions too, and drop them when replayed.
"""

from __future__ import annotations

from odradek.coordinator.group.classic_group import CONSUMER_PROTOCOL_TYPE, ClassicGroup
from odradek.coordinator.group.coordinator_record import (
    GroupMetadataRecord,
    OffsetCommitRecord,
)
from odradek.coordinator.group.coordinator_result import CoordinatorResult, Write
from odradek.coordinator.group.group_config import GroupConfig
from odradek.coordinator.group.group_metadata_manager import GroupMetadataManager
from odradek.coordinator.group.group_requests import (
    UNKNOWN_MEMBER_ID,
    CommitRequest,
    TxnCommitRequest,
)
from odradek.coordinator.group.group_state import GroupState
from odradek.coordinator.group.offset_and_metadata import OffsetAndMetadata
from odradek.coordinator.group.pending_offsets import PendingTransactionalOffsets
from odradek.protocol.generated.error_codes import ErrorCode

INT64_MAX = 2**63 - 1

TopicPartition = tuple[str, int]

NO_PRODUCER_ID = -1


class _Unstable:
    """``fetch``'s answer for a partition with a pending transactional offset (require_stable)."""

    def __repr__(self) -> str:
        return "UNSTABLE"


UNSTABLE = _Unstable()


class OffsetMetadataManager:
    def __init__(self, config: GroupConfig, clock, groups: GroupMetadataManager) -> None:
        self.config = config
        self.clock = clock
        self.groups = groups
        self.offsets: dict[str, dict[TopicPartition, OffsetAndMetadata]] = {}
        # The record offset in ``__consumer_offsets`` of each committed offset (-1: unknown).
        self.positions: dict[str, dict[TopicPartition, int]] = {}
        self.pending = PendingTransactionalOffsets()
        # The shard's ConsumerGroupManager: a KIP-848 group's commits are checked by member
        # epoch (``ConsumerGroup.commit_error``) and create no classic group.
        self.consumer_groups = None

    def has_offsets(self, group_id: str) -> bool:
        return bool(self.offsets.get(group_id))

    def committed(self, group_id: str) -> dict[TopicPartition, OffsetAndMetadata]:
        return dict(self.offsets.get(group_id, {}))

    def partitions_with_offsets(self, group_id: str) -> list[TopicPartition]:
        """Partitions with a committed or a pending transactional offset, sorted."""
        return sorted(set(self.offsets.get(group_id, {})) | self.pending.partitions(group_id))

    # --- commit -----------------------------------------------------------------------------
    def commit(self, req: CommitRequest) -> CoordinatorResult:
        """Response: ``{(topic, partition): error}``, valid if the records get written."""
        keys = [(p.topic, p.partition) for p in req.partitions]
        consumer = self._consumer_group(req.group_id)
        if consumer is not None:
            # Kafka's ConsumerGroup.validateOffsetCommit: the generation is the member epoch.
            error = consumer.commit_error(req.member_id, req.generation_id, api_version=req.api_version)
            if error is not None:
                return CoordinatorResult({k: error for k in keys})
            return self._write_commit(req)
        error = self._check_commit(req)
        if error is not None:
            return CoordinatorResult({k: error for k in keys})
        group = self.groups.get_or_create(req.group_id)
        if group.state in (GroupState.STABLE, GroupState.PREPARING_REBALANCE):
            # Commits during PreparingRebalance are allowed: the member learns of the
            # rebalance from its next heartbeat.
            self.groups.touch(group, req.member_id)
        return self._write_commit(req)

    def _write_commit(self, req: CommitRequest) -> CoordinatorResult:
        now = self.clock.milliseconds()
        # Capped at Long.MAX_VALUE: the record's expire timestamp is an int64, and a client's
        # retention of up to Long.MAX_VALUE ms means "keep it" (Java would wrap to negative).
        expire = min(now + req.retention_time_ms, INT64_MAX) if req.retention_time_ms >= 0 else None
        response, records = self._records(req.group_id, req.partitions, now, expire)
        return CoordinatorResult(response, [Write(records)] if records else [])

    def _records(self, group_id: str, partitions, now: int, expire: int | None):
        """``({(topic, partition): error}, [OffsetCommitRecord])`` for committed partitions."""
        response: dict[TopicPartition, ErrorCode] = {}
        records = []
        for p in partitions:
            metadata = p.metadata or ""
            if len(metadata.encode("utf-8", "surrogateescape")) > self.config.offset_metadata_max_bytes:
                response[(p.topic, p.partition)] = ErrorCode.OFFSET_METADATA_TOO_LARGE
                continue
            stamp = p.commit_timestamp_ms if p.commit_timestamp_ms >= 0 else now
            value = OffsetAndMetadata(p.offset, p.leader_epoch, metadata, stamp, expire)
            records.append(OffsetCommitRecord(group_id, p.topic, p.partition, value))
            response[(p.topic, p.partition)] = ErrorCode.NONE
        return response, records

    def commit_transactional(self, req: TxnCommitRequest) -> CoordinatorResult:
        """TxnOffsetCommit. Response: ``{(topic, partition): error}``, valid if the records get
        written: one transactional batch of ``req.producer_id``/``producer_epoch``, pending
        until that producer's marker."""
        keys = [(p.topic, p.partition) for p in req.partitions]
        consumer = self._consumer_group(req.group_id)
        if consumer is not None:
            error = consumer.commit_error(req.member_id, req.generation_id)
        else:
            error = self._check_txn_commit(req)
        if error is not None:
            return CoordinatorResult({k: error for k in keys})
        if consumer is None:
            self.groups.get_or_create(req.group_id)
        response, records = self._records(req.group_id, req.partitions, self.clock.milliseconds(), None)
        write = Write(records, producer_id=req.producer_id, producer_epoch=req.producer_epoch)
        return CoordinatorResult(response, [write] if records else [])

    def _check_txn_commit(self, req: TxnCommitRequest) -> ErrorCode | None:
        """Kafka's ``validateOffsetCommit`` with ``isTransactional``."""
        group = self.groups.group(req.group_id)
        if group is None or group.is_(GroupState.DEAD):
            return None if req.generation_id < 0 else ErrorCode.ILLEGAL_GENERATION
        if req.generation_id < 0 and group.is_(GroupState.EMPTY):
            return None
        if req.generation_id >= 0 or req.member_id != UNKNOWN_MEMBER_ID or req.group_instance_id is not None:
            return group.member_error(req.member_id, req.group_instance_id, req.generation_id)
        return None

    def _check_commit(self, req: CommitRequest) -> ErrorCode | None:
        group = self.groups.group(req.group_id)
        if group is None or group.is_(GroupState.DEAD):
            return None if req.generation_id < 0 else ErrorCode.ILLEGAL_GENERATION
        if req.generation_id < 0 and group.is_(GroupState.EMPTY):
            # Kafka's ClassicGroup.validateOffsetCommit: an empty group takes commits at
            # generation -1 from anyone, also with a member id (a KIP-848 client that only
            # assign()s always sends its own member id).
            return None
        if req.generation_id >= 0 or req.member_id != UNKNOWN_MEMBER_ID or req.group_instance_id is not None:
            error = group.member_error(req.member_id, req.group_instance_id, req.generation_id)
            if error is not None:
                return error
        elif not group.is_(GroupState.EMPTY):
            return ErrorCode.UNKNOWN_MEMBER_ID
        if group.is_(GroupState.COMPLETING_REBALANCE):
            return ErrorCode.REBALANCE_IN_PROGRESS
        return None

    def _consumer_group(self, group_id: str):
        return None if self.consumer_groups is None else self.consumer_groups.group(group_id)

    def fetch_error(self, group_id: str, member_id: str | None, member_epoch: int) -> ErrorCode | None:
        """OffsetFetch v9+ from a member of a consumer group: Kafka's
        ``ConsumerGroup.validateOffsetFetch`` (UNKNOWN_MEMBER_ID, STALE_MEMBER_EPOCH)."""
        consumer = self._consumer_group(group_id)
        if consumer is None:
            return None
        return consumer.fetch_error(member_id, member_epoch)

    # --- fetch ------------------------------------------------------------------------------
    def fetch(self, group_id: str, wanted: list[tuple[str, list[int]]] | None, require_stable: bool = False
              ) -> list[tuple[str, list[tuple[int, OffsetAndMetadata | None]]]]:
        """Committed offsets by topic: of ``wanted`` (None where nothing is committed), or all
        the group has when ``wanted`` is None. With ``require_stable``, a partition with a
        pending transactional offset answers ``UNSTABLE`` instead (Kafka: per partition; with
        ``wanted`` None only committed partitions are listed)."""
        committed = self.offsets.get(group_id, {})

        def value(tp: TopicPartition):
            if require_stable and self.pending.has_pending(group_id, tp):
                return UNSTABLE
            return committed.get(tp)

        if wanted is None:
            by_topic: dict[str, list] = {}
            for tp in sorted(committed):
                by_topic.setdefault(tp[0], []).append((tp[1], value(tp)))
            return list(by_topic.items())
        return [(topic, [(p, value((topic, p))) for p in partitions]) for topic, partitions in wanted]

    # --- delete -----------------------------------------------------------------------------
    def delete_offsets(self, group_id: str, partitions: list[TopicPartition]) -> CoordinatorResult:
        """OffsetDelete. Response: ``(group error, {(topic, partition): error})``."""
        consumer = self._consumer_group(group_id)
        if consumer is not None:
            return self._delete_consumer_group_offsets(consumer, group_id, partitions)
        group = self.groups.group(group_id)
        if group is None or group.is_(GroupState.DEAD):
            return CoordinatorResult((ErrorCode.GROUP_ID_NOT_FOUND, {}))
        errors: dict[TopicPartition, ErrorCode] = {}
        if group.is_(GroupState.EMPTY):
            eligible = list(partitions)
        elif group.protocol_type == CONSUMER_PROTOCOL_TYPE:
            eligible = [tp for tp in partitions if not group.is_subscribed_to(tp[0])]
            errors.update({tp: ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC for tp in partitions if group.is_subscribed_to(tp[0])})
        else:
            return CoordinatorResult((ErrorCode.NON_EMPTY_GROUP, {}))
        errors.update({tp: ErrorCode.NONE for tp in eligible})
        held = set(self.partitions_with_offsets(group_id))
        records = self.cleanup(group, [tp for tp in eligible if tp in held])
        return CoordinatorResult((ErrorCode.NONE, errors), [Write(records)] if records else [])

    def _delete_consumer_group_offsets(self, consumer, group_id: str, partitions) -> CoordinatorResult:
        """Kafka's ConsumerGroup.validateOffsetDelete accepts a consumer group in any state:
        the topics it subscribes to answer GROUP_SUBSCRIBED_TO_TOPIC, the rest are deleted."""
        errors = {tp: ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC if consumer.is_subscribed_to(tp[0]) else ErrorCode.NONE
                  for tp in partitions}
        held = set(self.partitions_with_offsets(group_id))
        records = [OffsetCommitRecord(group_id, t, p, None) for (t, p), error in errors.items()
                   if error == ErrorCode.NONE and (t, p) in held]
        return CoordinatorResult((ErrorCode.NONE, errors), [Write(records)] if records else [])

    def cleanup(self, group: ClassicGroup, removed: list[TopicPartition]) -> list:
        """Tombstones for ``removed``, and for the group itself if it is left empty with no
        offsets and no open transaction (it is then Dead: Kafka's cleanupGroupMetadata)."""
        records: list = [OffsetCommitRecord(group.group_id, t, p, None) for t, p in removed]
        left = set(self.offsets.get(group.group_id, {})) - set(removed)
        if group.is_(GroupState.EMPTY) and not left and not self.pending.has_open_transactions(group.group_id):
            records.append(GroupMetadataRecord(group.group_id, None))
        return records

    # --- expiry -----------------------------------------------------------------------------
    def expired(self, group: ClassicGroup, now_ms: int) -> list[TopicPartition]:
        """The offsets of ``group`` whose retention has passed at ``now_ms``."""
        # An offset with a pending transactional one of its partition is kept (Kafka's rule).
        offsets = {tp: v for tp, v in self.offsets.get(group.group_id, {}).items()
                   if not self.pending.has_pending(group.group_id, tp)}
        retention = self.config.offsets_retention_ms

        def gone(value: OffsetAndMetadata, base_ms: int) -> bool:
            if value.expire_timestamp_ms is not None:
                return now_ms >= value.expire_timestamp_ms
            return now_ms - base_ms >= retention

        if group.protocol_type is not None and group.is_(GroupState.EMPTY):
            since = group.state_timestamp_ms
            return [tp for tp, v in offsets.items() if gone(v, v.commit_timestamp_ms if since is None else since)]
        if (group.protocol_type == CONSUMER_PROTOCOL_TYPE and group.subscribed_topics is not None
                and group.is_(GroupState.STABLE)):
            return [tp for tp, v in offsets.items()
                    if tp[0] not in group.subscribed_topics and gone(v, v.commit_timestamp_ms)]
        if group.protocol_type is None:
            return [tp for tp, v in offsets.items() if gone(v, v.commit_timestamp_ms)]
        return []

    # --- replay -----------------------------------------------------------------------------
    def replay(self, record: OffsetCommitRecord, producer_id: int = NO_PRODUCER_ID,
               record_offset: int = -1) -> None:
        """Apply one offset record at ``record_offset`` of the log; ``producer_id`` is that of
        its batch when the batch is transactional (the offset is then pending), else -1."""
        key = (record.topic, record.partition)
        if record.offset is None:
            self._forget(record.group_id, key)
            self.pending.remove_partition(record.group_id, key)
        elif producer_id != NO_PRODUCER_ID:
            self.pending.put(producer_id, record.group_id, key, record_offset, record.offset)
        else:
            self._store(record.group_id, key, record.offset, record_offset)

    def replay_end_transaction(self, producer_id: int, committed: bool) -> list[str]:
        """Apply ``producer_id``'s transaction marker: its pending offsets become committed
        (unless an offset written later in the log is committed already) or are dropped.
        Returns the groups that had pending offsets."""
        ended = self.pending.end(producer_id)
        if not committed:
            return list(ended)
        for group_id, offsets in ended.items():
            positions = self.positions.get(group_id, {})
            for tp, (position, value) in offsets.items():
                existing = positions.get(tp)
                if existing is None or existing < 0 or position > existing:
                    self._store(group_id, tp, value, position)
        return list(ended)

    def _store(self, group_id: str, tp: TopicPartition, value: OffsetAndMetadata, position: int) -> None:
        self.offsets.setdefault(group_id, {})[tp] = value
        self.positions.setdefault(group_id, {})[tp] = position

    def _forget(self, group_id: str, tp: TopicPartition) -> None:
        for table in (self.offsets, self.positions):
            group_table = table.get(group_id)
            if group_table is not None:
                group_table.pop(tp, None)
                if not group_table:
                    del table[group_id]

    def unload(self) -> None:
        self.offsets.clear()
        self.positions.clear()
        self.pending.clear()
