"""The console's consumer group pages as JSON (``/api/groups``, ``/api/groups/<id>``), from
ListGroups, ConsumerGroupDescribe and DescribeGroups (group_descriptions.py), OffsetFetch and
ListOffsets.

Both group types of KIP-848 are shown: each group has its ``type`` (``classic`` or
``consumer``). A ``consumer`` group's page adds what only it has: the group epoch, the target
assignment epoch (``assignment_epoch``), the assignor (``protocol``, as Kafka's
``ConsumerGroupDescription.partitionAssignor``), and per member its epoch, its current
assignment and its target assignment; a member whose assignment differs from its target is
still reconciling (KIP-848's revoke-then-assign steps).

A KIP-932 ``share`` group has no committed offsets and no lag: its row in the list has
``in_flight`` instead (``lag`` None), and its page is share_group_view.py's (share-partition
start offsets, end offsets and in-flight counts).

Lag follows ``kafka-consumer-groups --describe`` (group_lag.py); a partition assigned to a
member with nothing committed shows no offset and no lag.
"""

from __future__ import annotations

import asyncio

from odradek.console.group_descriptions import (
    CONSUMER, SHARE, describe_any, describe_listed, group_type, protocol, protocol_type,
)
from odradek.console.group_lag import committed_and_ends, group_total, lag
from odradek.console.offset_lookup import LATEST, OFFSETS_TIMEOUT_MS
from odradek.console.samples import with_now
from odradek.console.share_group_view import share_group_page


class GroupNotFound(Exception):
    """Neither ConsumerGroupDescribe nor DescribeGroups knows the group (state Dead)."""


async def groups(admin) -> dict:
    """``{"groups": [{"id", "type", "state", "protocol_type", "protocol", "members", "lag"}]}``,
    sorted by id; ``type`` is ``classic``, ``consumer`` (KIP-848) or ``share`` (KIP-932),
    ``lag`` the total lag (None for groups that are not consumer groups). A share group's row
    has ``lag`` None and ``in_flight``, its total in-flight count (None when unknown). A
    group whose description was refused shows its listing's type and state, no protocol and
    0 members."""
    listed = await admin.list_groups()
    described = await describe_listed(admin, listed) if listed else {}
    totals = await asyncio.gather(*(group_total(admin, g) for g in listed), return_exceptions=True)
    rows = []
    for g, total in zip(listed, totals):
        d = described.get(g.group_id)
        d = None if isinstance(d, Exception) else d
        kind = group_type(d, g.type)
        counted = total if isinstance(total, int) else None
        row = {"id": g.group_id, "type": kind, "state": d.state if d else g.state,
               "protocol_type": g.protocol_type or (protocol_type(d) if d else ""),
               "protocol": protocol(d) if d else "", "members": len(d.members) if d else 0,
               "lag": None if kind == SHARE else counted}
        if kind == SHARE:
            row["in_flight"] = counted
        rows.append(row)
    return {"groups": rows}


async def group(admin, group_id: str, samples) -> dict:
    """One group: type, state, protocol, members with their assignment, and per partition the
    committed offset, end offset, lag and owning member (by current assignment);
    ``lag_history``: [[t, lag], ...]. A ``consumer`` group also has ``group_epoch``,
    ``assignment_epoch`` and ``assignor``, and its members ``member_epoch`` and
    ``target_assignment`` (``consumer_group_fields``). A ``share`` group's page is
    share_group_view.py's."""
    described = await describe_any(admin, group_id)
    if described.state == "Dead":
        raise GroupNotFound(group_id)
    if group_type(described) == SHARE:
        return await share_group_page(admin, described, samples)
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
    page = {
        "id": group_id,
        "type": group_type(described),
        "state": described.state,
        "protocol_type": described.protocol_type,
        "protocol": described.protocol,
        "members": [{"id": m.member_id, "instance_id": m.group_instance_id, "client_id": m.client_id,
                     "host": m.client_host, "assignment": [str(tp) for tp in m.assignment]}
                    for m in described.members],
        "partitions": partitions,
        "lag": total,
        "lag_history": with_now(history.points() if history else [], total),
    }
    if page["type"] == CONSUMER:
        consumer_group_fields(page, described)
    return page


def consumer_group_fields(page: dict, described) -> None:
    """Adds a KIP-848 group's own fields to its page (a ``ConsumerGroupDescription``):
    ``group_epoch``, ``assignment_epoch`` (the target assignment's), ``assignor``, and to each
    member (same order as ``described.members``) ``member_epoch``, ``target_assignment``
    ("topic-partition" texts, sorted), ``reconciling`` (current assignment is not yet the
    target) and ``subscribed_topics``."""
    page.update(group_epoch=described.group_epoch, assignment_epoch=described.assignment_epoch,
                assignor=described.protocol)
    for row, m in zip(page["members"], described.members):
        row.update(member_epoch=m.member_epoch, target_assignment=[str(tp) for tp in m.target_assignment],
                   reconciling=set(m.assignment) != set(m.target_assignment),
                   subscribed_topics=list(m.subscribed_topics))

