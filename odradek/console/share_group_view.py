"""A KIP-932 share group's page as JSON (``/api/groups/<id>`` for a group of type ``share``)
and its in-flight count for the list and the sampler (groups_view.py, group_lag.py).

A share group has no committed offsets: each share-partition (group, topic, partition) on the
partition's leader keeps an in-flight window from its start offset (SPSO: every record before
it is acknowledged or archived) to its end offset (SPEO), in which records are available,
acquired by a member, acknowledged or archived. What a person wants to know is how much of a
partition the group has not finished with, so the page shows per partition:

- ``start_offset``: the share-partition start offset from DescribeShareGroupOffsets (the
  admin client's ``list_share_group_offsets``, client/admin_share_groups.py); None when the
  share coordinator has none yet;
- ``end``: the partition's log end offset (ListOffsets latest, the high watermark);
- ``in_flight``: the broker's lag when it gives one (DescribeShareGroupOffsets v1, Kafka's
  ``SharePartitionOffsetInfo.lag``), else ``end - start_offset`` (never below 0): the records
  from the start offset on, which are either not yet delivered or in flight (acquired and not
  yet acknowledged, or acknowledged above a record that is not). Kafka 4.2's coordinator
  answers lag -1, so this is what the page shows there; ``in_flight_basis`` names which
  (``"lag"`` or ``"end offset - start offset"``). None when either offset is unknown.

The group's ``in_flight`` is the sum over its partitions with a count, as a classic group's
``lag`` is; ``in_flight_history`` is the sampler's series of it (samples.py).

A share-partition is assigned to every member the assignor gave it to (KIP-932's
``SimpleAssignor`` shares partitions when members outnumber them), so a partition row lists
``members`` (ids), not one owner.
"""

from __future__ import annotations

from odradek.client.topic_partition import TopicPartition
from odradek.console.offset_lookup import known_or_latest
from odradek.console.samples import with_now
from odradek.client.admin_share_groups import ShareGroupDescription, SharePartitionOffset
from odradek.console.group_descriptions import SHARE

FROM_LAG = "lag"
FROM_OFFSETS = "end offset - start offset"  # records not yet delivered or in flight


def in_flight(offset: SharePartitionOffset | None, end: int | None) -> tuple[int | None, str | None]:
    """``(count, basis)`` for one share-partition (see the module's docstring)."""
    if offset is None:
        return None, None
    if offset.lag >= 0:
        return offset.lag, FROM_LAG
    if offset.start_offset < 0 or end is None:
        return None, None
    return max(end - offset.start_offset, 0), FROM_OFFSETS


async def offsets_and_ends(admin, group_id: str, partitions=(), ends: dict | None = None):
    """The group's share-partition offsets, and the end offsets of those partitions and of
    ``partitions`` (looked up unless already in ``ends``)."""
    offsets = await admin.list_share_group_offsets(group_id)
    return offsets, await known_or_latest(admin, set(offsets) | set(partitions), ends)


async def total_in_flight(admin, group_id: str, ends: dict | None = None) -> int:
    offsets, merged = await offsets_and_ends(admin, group_id, (), ends)
    return sum(in_flight(o, merged.get(tp))[0] or 0 for tp, o in offsets.items())


async def share_group_page(admin, described: ShareGroupDescription, samples) -> dict:
    """The page of a share group: ``type`` "share", ``state``, ``protocol_type`` "share",
    ``protocol`` and ``assignor`` (the assignor's name), ``group_epoch``, ``assignment_epoch``,
    ``members`` [{id, client_id, host, rack, member_epoch, subscribed_topics, assignment}],
    ``partitions`` [{topic, partition, start_offset, end, in_flight, in_flight_basis,
    members}], sorted, ``in_flight`` and ``in_flight_history`` ([[t, count], ...])."""
    holders: dict[TopicPartition, list[str]] = {}
    for m in described.members:
        for tp in m.assignment:
            holders.setdefault(tp, []).append(m.member_id)
    offsets, ends = await offsets_and_ends(admin, described.group_id, holders)
    partitions = []
    for tp in sorted(set(offsets) | set(holders)):
        offset = offsets.get(tp)
        count, basis = in_flight(offset, ends.get(tp))
        start = offset.start_offset if offset is not None and offset.start_offset >= 0 else None
        partitions.append({"topic": tp.topic, "partition": tp.partition, "start_offset": start,
                           "end": ends.get(tp), "in_flight": count, "in_flight_basis": basis,
                           "members": holders.get(tp, [])})
    total = sum(p["in_flight"] or 0 for p in partitions)
    history = samples.groups.get(described.group_id)
    return {
        "id": described.group_id, "type": described.type, "state": described.state,
        "protocol_type": SHARE, "protocol": described.assignor, "assignor": described.assignor,
        "group_epoch": described.group_epoch, "assignment_epoch": described.assignment_epoch,
        "members": [{"id": m.member_id, "client_id": m.client_id, "host": m.client_host, "rack": m.rack_id,
                     "member_epoch": m.member_epoch, "subscribed_topics": list(m.subscribed_topics),
                     "assignment": [str(tp) for tp in m.assignment]} for m in described.members],
        "partitions": partitions,
        "in_flight": total,
        "in_flight_history": with_now(history.points() if history else [], total),
    }
