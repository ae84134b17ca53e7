"""How the console's pages look up end offsets (ListOffsets latest) of partitions.

``LATEST`` is ListOffsets' timestamp -1 (the high watermark). ``OFFSETS_TIMEOUT_MS`` bounds
one page's lookups: a console must answer while a partition's leader moves, so it shows what
it has rather than waiting out the client's minute.

Used by the cluster, topic, group and share-group pages (cluster_view.py, topics_view.py,
group_lag.py, share_group_view.py) and the message browser; it imports none of them.
"""

from __future__ import annotations

LATEST = -1
OFFSETS_TIMEOUT_MS = 5_000


async def known_or_latest(admin, wanted, known: dict | None = None) -> dict:
    """``{TopicPartition: end offset}`` for ``wanted``: taken from ``known`` where it has the
    partition, else asked (one ListOffsets round); a partition whose lookup failed is left
    out."""
    known = known or {}
    missing = {tp: LATEST for tp in wanted if tp not in known}
    found = await admin.list_offsets(missing, timeout_ms=OFFSETS_TIMEOUT_MS) if missing else {}
    merged = {tp: known[tp] for tp in wanted if tp in known}
    merged.update({tp: o.offset for tp, o in found.items() if o is not None})
    return merged
