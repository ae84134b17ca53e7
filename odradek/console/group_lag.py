"""A group's lag, as ``kafka-consumer-groups --describe`` counts it, and the one number the
group list and the sampler show of any group (``group_total``).

Lag per partition is the partition's end offset (high watermark) minus the group's committed
offset, for partitions the group has committed an offset in, never below 0; a group's total
lag is the sum over its partitions with a lag. A KIP-932 share group has no committed offsets:
its number is its total in-flight count (share_group_view.py).

Used by the group pages (groups_view.py) and the sampler's round (cluster_view.py).
"""

from __future__ import annotations

from odradek.console.group_descriptions import SHARE
from odradek.console.offset_lookup import known_or_latest
from odradek.console.share_group_view import total_in_flight


async def committed_and_ends(admin, group_id: str, ends: dict | None = None):
    """The group's committed offsets and the end offsets of those partitions (looked up
    unless already in ``ends``)."""
    committed = await admin.list_group_offsets(group_id)
    offsets = {tp: o.offset for tp, o in committed.items() if o is not None and o.offset >= 0}
    return offsets, await known_or_latest(admin, offsets, ends)


def lag(committed: int | None, end: int | None) -> int | None:
    """End minus committed, never below 0 (a commit past the end, before records arrive,
    is not negative lag); None when either is unknown."""
    if committed is None or end is None:
        return None
    return max(end - committed, 0)


async def total_lag(admin, group_id: str, ends: dict | None = None) -> int:
    offsets, merged = await committed_and_ends(admin, group_id, ends)
    return sum(lag(o, merged.get(tp)) or 0 for tp, o in offsets.items())


async def group_total(admin, listing, ends: dict | None = None) -> int:
    """What the list and the sampler show of a group (``GroupListing``): a share group's
    total in-flight count (share_group_view.py), any other group's total lag."""
    if listing.type.lower() == SHARE:
        return await total_in_flight(admin, listing.group_id, ends)
    return await total_lag(admin, listing.group_id, ends)
