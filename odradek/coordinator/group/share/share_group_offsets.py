"""A share group's start offsets for administrators: Kafka 4.2's
``GroupCoordinatorService.describeShareGroupOffsets``, ``alterShareGroupOffsets`` and
``deleteShareGroupOffsets`` on odradek's ``GroupCoordinator`` and the broker's ``Persister``.

- describe: each share-partition's start offset, leader epoch and lag from the persister's
  ``read_summary`` (ReadShareGroupStateSummary v1); a topic unknown to the metadata, or a
  partition the persister answers with an error, has start offset -1 (no offsets, not an
  error, as OffsetFetch). Without topics: the partitions the group has initialized. Lag as
  Kafka 4.2 (KIP-1226, GroupCoordinatorService.computeShareGroupLagAndBuildResponse):
  partition end offset (high watermark, ``partition_end_offsets.py``) - start offset -
  delivery complete count; -1 when the summary failed or its start offset or delivery
  complete count is -1; a partition whose end offset cannot be had answers that error.
- alter: only a share group that exists (GROUP_ID_NOT_FOUND) and is empty (NON_EMPTY_GROUP).
  The partitions are recorded as initializing (ShareGroupStatePartitionMetadata), then
  InitializeShareGroupState writes each one's new start offset at a new state epoch, the
  larger of the group epoch and one above the stored state epoch, so a share partition still
  loaded on its leader is fenced (FENCED_STATE_EPOCH) and reads the new state; once done the
  partitions become initialized (``ShareGroupManager.initialized``). A partition beyond the
  topic's partitions, or of an unknown topic, is UNKNOWN_TOPIC_OR_PARTITION.
- delete: only an existing, empty share group. Each topic's initialized partitions move to
  deleting, DeleteShareGroupState removes them, then the topic leaves deleting. A topic
  without state is UNKNOWN_TOPIC_OR_PARTITION ("There is no offset information to delete.").

Results are plain tuples; the wire is ``server/handlers/share_group_offsets.py``'s business.
"""

from __future__ import annotations

import logging

from odradek.coordinator.coordinator_runtime import CoordinatorError
from odradek.coordinator.group.coordinator_result import CoordinatorResult, Write, group_write_error
from odradek.coordinator.group.share.share_group import ShareGroupState
from odradek.coordinator.group.share.share_group_records import ShareStatePartitionMetadataRecord
from odradek.protocol.generated.error_codes import ErrorCode as E

log = logging.getLogger("odradek.coordinator.group")
NO_OFFSETS = "There is no offset information to delete."


def _empty_share_group(coordinator, group_id: str):
    """``(slot, group)`` of an existing empty share group; CoordinatorError otherwise, with
    Kafka's codes and messages."""
    slot = coordinator._slot_for(group_id)
    group = slot.shard.share.group(group_id)
    if group is None or group.dead:
        other = slot.shard.share.other_group(group_id)
        raise _Refused(E.GROUP_ID_NOT_FOUND, f"Group {group_id} is not a share group." if other
                       else f"Group {group_id} not found.")
    if group.state != ShareGroupState.EMPTY:
        raise _Refused(E.NON_EMPTY_GROUP, f"Share group {group_id} is not empty.")
    return slot, group


class _Refused(CoordinatorError):
    def __init__(self, error, message: str) -> None:
        super().__init__(error)
        self.error, self.message = error, message


async def _write(coordinator, slot, records: list) -> E | None:
    errors = [await f for f in coordinator._apply(slot, CoordinatorResult(None, [Write(records)]))]
    failed = next((e for e in errors if e != E.NONE), None)
    return None if failed is None else group_write_error(failed)


async def describe(coordinator, persister, group_id: str, topics, image, end_offsets=None):
    """``topics``: ``[(name, [partitions])]`` or None for every initialized partition;
    ``end_offsets``: ``async ([(name, partition)]) -> {(name, partition): (error, offset)}``
    (None: lag -1). Returns ``(error, message, [(name, topic_id, [(partition, start_offset,
    leader_epoch, lag, error)])])``."""
    if topics is None:
        try:
            slot = coordinator._slot_for(group_id)
        except CoordinatorError as e:
            return e.error, None, []
        group = slot.shard.share.group(group_id)
        topics = []
        for topic_id, (name, partitions) in sorted((group.initialized if group else {}).items(), key=str):
            t = image.topic_by_id(topic_id)
            topics.append((t.name if t is not None else name, sorted(partitions)))
    summaries = []
    for name, partitions in topics:
        t = image.topic(name)
        if t is None:
            summaries.append((name, None, [(p, None) for p in partitions]))
            continue
        summaries.append((name, t.topic_id, [(p, await _summary(persister, group_id, t.topic_id, name, p))
                                             for p in partitions]))
    wanted = [(name, p) for name, tid, rows in summaries for p, s in rows if _has_lag(s)]
    ends = await end_offsets(wanted) if wanted and end_offsets is not None else {}
    out = []
    for name, topic_id, rows in summaries:
        out.append((name, topic_id, [_row(p, s, ends.get((name, p))) for p, s in rows]))
    return E.NONE, None, out


async def _summary(persister, group_id, topic_id, name: str, p: int):
    try:
        return await persister.read_summary(group_id, topic_id, p, -1)
    except Exception:  # noqa: BLE001 - answered as no offset, as Kafka does for an error
        log.exception("ReadShareGroupStateSummary %s %s-%d failed", group_id, name, p)
        return None


def _has_lag(summary) -> bool:
    """Kafka's shouldComputeSharePartitionLag."""
    return (summary is not None and summary.error == E.NONE and summary.start_offset != -1
            and getattr(summary, "delivery_complete_count", -1) != -1)


def _row(p: int, summary, end) -> tuple:
    """``(partition, start_offset, leader_epoch, lag, error)``."""
    if summary is None or summary.error != E.NONE:
        return p, -1, -1, -1, E.NONE
    epoch = getattr(summary, "leader_epoch", -1)
    if not _has_lag(summary) or end is None:
        return p, summary.start_offset, epoch, -1, E.NONE
    error, offset = end
    if error != E.NONE:
        return p, summary.start_offset, epoch, -1, error
    return p, summary.start_offset, epoch, offset - summary.start_offset - summary.delivery_complete_count, E.NONE


async def alter(coordinator, persister, group_id: str, topics: dict, image):
    """``topics``: name -> {partition: start offset}. Returns ``(error, message,
    [(name, topic_id or None, [(partition, error, message)])])``."""
    try:
        slot, group = _empty_share_group(coordinator, group_id)
    except _Refused as e:
        return e.error, e.message, []
    except CoordinatorError as e:
        return e.error, None, []
    results, wanted = [], {}
    for name, offsets in topics.items():
        t = image.topic(name)
        known = {p for p in offsets if t is not None and p in t.partitions}
        results.append((name, t.topic_id if t else None,
                        [(p, E.NONE, None) if p in known else (p, E.UNKNOWN_TOPIC_OR_PARTITION, None)
                         for p in offsets]))
        if known:
            wanted[t.topic_id] = (name, {p: offsets[p] for p in known})
    if not wanted:
        return E.NONE, None, results
    initializing = dict(group.initializing)
    for topic_id, (name, offsets) in wanted.items():
        initializing[topic_id] = (name, initializing.get(topic_id, (name, frozenset()))[1] | frozenset(offsets))
    failed = await _write(coordinator, slot, [ShareStatePartitionMetadataRecord(
        group_id, dict(group.initialized), initializing, dict(group.deleting))])
    if failed is not None:
        return failed, None, []
    done, errors = {}, {}
    for topic_id, (name, offsets) in wanted.items():
        for p, offset in sorted(offsets.items()):
            error = await _initialize(persister, group_id, topic_id, p, offset, group.group_epoch)
            if error == E.NONE:
                done.setdefault(topic_id, (name, set()))[1].add(p)
            else:
                errors[(name, p)] = error
    share = slot.shard.share
    if done:
        coordinator._apply(slot, share.initialized(group_id, {t: (n, frozenset(ps)) for t, (n, ps) in done.items()}))
    undone = {t: (n, frozenset(p for p in o if (n, p) in errors)) for t, (n, o) in wanted.items()}
    if errors:
        coordinator._apply(slot, share.initialize_failed(group_id, {t: v for t, v in undone.items() if v[1]}))
    results = [(name, tid, [(p, errors.get((name, p), err), None) for p, err, _ in rows]) for name, tid, rows in results]
    return E.NONE, None, results


async def _initialize(persister, group_id, topic_id, partition: int, offset: int, group_epoch: int) -> E:
    try:
        error, stored_epoch, _ = await persister.read_summary(group_id, topic_id, partition, -1)
        state_epoch = max(group_epoch, stored_epoch + 1 if error == E.NONE else 0)
        return await persister.initialize_state(group_id, topic_id, partition, state_epoch, offset)
    except Exception:  # noqa: BLE001 - the partition answers the error; the others go on
        log.exception("InitializeShareGroupState %s %s-%d failed", group_id, topic_id, partition)
        return E.UNKNOWN_SERVER_ERROR


async def delete(coordinator, persister, group_id: str, names: list[str], image):
    """Returns ``(error, message, [(name, topic_id or None, error, message)])``."""
    try:
        slot, group = _empty_share_group(coordinator, group_id)
    except _Refused as e:
        return e.error, e.message, []
    except CoordinatorError as e:
        return e.error, None, []
    results, deleting_now = [], {}
    initialized, deleting = dict(group.initialized), dict(group.deleting)
    for name in names:
        t = image.topic(name)
        if t is None:
            results.append((name, None, E.UNKNOWN_TOPIC_OR_PARTITION, None))
        elif t.topic_id in initialized:
            deleting_now[t.topic_id] = (name, sorted(initialized.pop(t.topic_id)[1]))
            deleting[t.topic_id] = name
        elif t.topic_id in deleting:
            deleting_now[t.topic_id] = (name, sorted(t.partitions))
        else:
            results.append((name, t.topic_id, E.UNKNOWN_TOPIC_OR_PARTITION, NO_OFFSETS))
    if not deleting_now:
        return E.NONE, None, results
    failed = await _write(coordinator, slot, [ShareStatePartitionMetadataRecord(
        group_id, initialized, dict(group.initializing), deleting)])
    if failed is not None:
        return failed, None, []
    deleted = []
    for topic_id, (name, partitions) in deleting_now.items():
        errors = [await _delete_state(persister, group_id, topic_id, p) for p in partitions]
        error = next((e for e in errors if e != E.NONE), E.NONE)
        results.append((name, topic_id, error, None))
        if error == E.NONE:
            deleted.append(topic_id)
    if deleted and slot.shard.share.group(group_id) is group:
        left = {t: n for t, n in group.deleting.items() if t not in deleted}
        await _write(coordinator, slot, [ShareStatePartitionMetadataRecord(
            group_id, dict(group.initialized), dict(group.initializing), left)])
    return E.NONE, None, results


async def _delete_state(persister, group_id, topic_id, partition: int) -> E:
    try:
        return await persister.delete_state(group_id, topic_id, partition)
    except Exception:  # noqa: BLE001 - answered as the topic's error
        log.exception("DeleteShareGroupState %s %s-%d failed", group_id, topic_id, partition)
        return E.UNKNOWN_SERVER_ERROR
