"""The console's consumer group pages as JSON (``/api/groups``, ``/api/groups/<id>``), from
ListGroups, DescribeGroups, OffsetFetch and ListOffsets.

Lag follows ``kafka-consumer-groups --describe``: per partition, the partition's end offset
(high watermark) minus the group's committed offset, for partitions the group has committed
an offset in; a partition assigned to a member with nothing committed shows no offset and no
lag. A group's total lag is the sum over its partitions with a lag.
"""

from __future__ import annotations

import asyncio
import time

from odradek.client.topic_partition import TopicPartition
from odradek.console.cluster_view import LATEST, OFFSETS_TIMEOUT_MS


class GroupNotFound(Exception):
    """DescribeGroups says the group does not exist (state Dead)."""


async def committed_and_ends(admin, group_id: str, ends: dict | None = None):
    """The group's committed offsets and the end offsets of those partitions (looked up
    unless already in ``ends``)."""
    committed = await admin.list_group_offsets(group_id)
    offsets = {tp: o.offset for tp, o in committed.items() if o is not None and o.offset >= 0}
    known = ends or {}
    missing = {tp: LATEST for tp in offsets if tp not in known}
    found = await admin.list_offsets(missing, timeout_ms=OFFSETS_TIMEOUT_MS) if missing else {}
    merged = {tp: known[tp] for tp in offsets if tp in known}
    merged.update({tp: o.offset for tp, o in found.items() if o is not None})
    return offsets, merged


def lag(committed: int | None, end: int | None) -> int | None:
    """End minus committed, never below 0 (a commit past the end, before records arrive,
    is not negative lag); None when either is unknown."""
    if committed is None or end is None:
        return None
    return max(end - committed, 0)


async def total_lag(admin, group_id: str, ends: dict | None = None) -> int:
    offsets, merged = await committed_and_ends(admin, group_id, ends)
    return sum(lag(o, merged.get(tp)) or 0 for tp, o in offsets.items())


async def groups(admin) -> dict:
    """``{"groups": [{"id", "state", "protocol_type", "protocol", "members", "lag"}]}``,
    sorted by id; ``lag`` is the total lag (None for groups that are not consumer groups)."""
    listed = await admin.list_groups()
    ids = [g.group_id for g in listed]
    described = await admin.describe_groups(ids) if ids else {}
    lags = await asyncio.gather(*(total_lag(admin, g) for g in ids), return_exceptions=True)
    rows = []
    for g, total in zip(listed, lags):
        d = described.get(g.group_id)
        rows.append({"id": g.group_id, "state": d.state if d else g.state, "protocol_type": g.protocol_type,
                     "protocol": d.protocol if d else "", "members": len(d.members) if d else 0,
                     "lag": total if isinstance(total, int) else None})
    return {"groups": rows}


async def group(admin, group_id: str, samples) -> dict:
    """One group: state, protocol, members with their assignment, and per partition the
    committed offset, end offset, lag and owning member; ``lag_history``: [[t, lag], ...]."""
    described = (await admin.describe_groups([group_id]))[group_id]
    if described.state == "Dead":
        raise GroupNotFound(group_id)
    offsets, ends = await committed_and_ends(admin, group_id)
    owner = {tp: m for m in described.members for tp in m.assignment}
    assigned = [tp for tp in owner if tp not in offsets]
    if assigned:
        found = await admin.list_offsets({tp: LATEST for tp in assigned}, timeout_ms=OFFSETS_TIMEOUT_MS)
        ends.update({tp: o.offset for tp, o in found.items() if o is not None})
    partitions = []
    for tp in sorted(set(offsets) | set(owner)):
        member = owner.get(tp)
        partitions.append({"topic": tp.topic, "partition": tp.partition, "committed": offsets.get(tp),
                           "end": ends.get(tp), "lag": lag(offsets.get(tp), ends.get(tp)),
                           "member": member.member_id if member else None,
                           "client_id": member.client_id if member else None,
                           "host": member.client_host if member else None})
    history = samples.groups.get(group_id)
    total = sum(p["lag"] or 0 for p in partitions)
    return {
        "id": group_id,
        "state": described.state,
        "protocol_type": described.protocol_type,
        "protocol": described.protocol,
        "members": [{"id": m.member_id, "instance_id": m.group_instance_id, "client_id": m.client_id,
                     "host": m.client_host, "assignment": [_tp_text(tp) for tp in m.assignment]}
                    for m in described.members],
        "partitions": partitions,
        "lag": total,
        "lag_history": _with_now(history.points() if history else [], total),
    }


def _with_now(points: list, value: int) -> list:
    """The sampled history ending with the value the page's card shows, at this moment: the
    chart's last point and the card agree (same number, same time). Nothing is added before
    the first sample."""
    if not points:
        return points
    now = time.time()
    return points + [(now, value)] if now > points[-1][0] else points


def _tp_text(tp: TopicPartition) -> str:
    return f"{tp.topic}-{tp.partition}"
