"""Which segments retention deletes (Kafka's documentation, 'Log', on deletes: time and
size, either one triggering).

Data is deleted a whole segment at a time, oldest first, never the active segment:

- a segment wholly below the log start offset goes under any cleanup.policy (after
  DeleteRecords, or segments compaction left behind);
- with ``delete`` in cleanup.policy, a segment whose largest timestamp is more than
  ``retention.ms`` before now goes (the largest record timestamp decides, whatever the
  order of records; see ``LogSegment.retention_timestamp``);
- with ``delete``, while the log exceeds ``retention.bytes`` by at least the oldest
  segment's size, that segment goes.

Each rule removes a prefix of the list, applied in that order, as Kafka does.

The time and size rules stop at the high watermark (Kafka's ``deletableSegments``): a
segment goes only when its successor's base offset is at or below the partition's high
watermark, so retention never deletes records that are not yet replicated to the ISR (a
leader could otherwise lose them, and the log start offset could pass the high watermark).
The size counted for ``retention.bytes`` is still the whole log's, above the high watermark
too, as in Kafka. The log start offset rule is not bounded: records below the log start
offset are already gone to every reader.
"""

from __future__ import annotations

from odradek.storage.config import LogConfig
from odradek.storage.segment_list import SegmentList


def deletable_prefix(
    view: SegmentList, log_start_offset: int, config: LogConfig, now_ms: int,
    high_watermark: int | None = None,
) -> int:
    """How many leading segments of ``view`` retention deletes now. ``high_watermark``
    bounds the time and size rules (None: no bound, for a log outside replication)."""
    segments = view.segments
    count = view.wholly_below(log_start_offset)
    # Segments below this index end at or below the high watermark (never the active one).
    limit = len(segments) - 1 if high_watermark is None else view.wholly_below(high_watermark)
    if config.delete_enabled and config.retention_ms >= 0:
        while (
            count < limit
            and now_ms - segments[count].retention_timestamp() > config.retention_ms
        ):
            count += 1
    if config.delete_enabled and config.retention_bytes >= 0:
        excess = sum(s.size for s in segments[count:]) - config.retention_bytes
        while count < limit and excess - segments[count].size >= 0:
            excess -= segments[count].size
            count += 1
    return count
