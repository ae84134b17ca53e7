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
"""

from __future__ import annotations

from odradek.storage.config import LogConfig
from odradek.storage.segment_list import SegmentList


def deletable_prefix(view: SegmentList, log_start_offset: int, config: LogConfig, now_ms: int) -> int:
    """How many leading segments of ``view`` retention deletes now."""
    segments = view.segments
    inactive = len(segments) - 1
    count = view.wholly_below(log_start_offset)
    if config.delete_enabled and config.retention_ms >= 0:
        while (
            count < inactive
            and now_ms - segments[count].retention_timestamp() > config.retention_ms
        ):
            count += 1
    if config.delete_enabled and config.retention_bytes >= 0:
        excess = sum(s.size for s in segments[count:]) - config.retention_bytes
        while count < inactive and excess - segments[count].size >= 0:
            excess -= segments[count].size
            count += 1
    return count
