"""``load_log``: open a partition directory and bring it to a consistent state.

Steps, in order (Kafka's ``LogLoader``):

1. Remove what an interrupted operation left: ``*.deleted`` files (segments already out of
   the log), ``*.cleaned`` files (a compaction that never committed), index files of swap
   segments, index files without a ``.log``.
2. Complete interrupted compactions: a ``<base>.log.swap`` file is a cleaned segment whose
   commit point was passed (the rename from ``.cleaned``); the segments it covers (base
   offsets from ``base`` to its last offset) are dropped and it takes its final name.
3. Open every ``<20 digits>.log`` as a sealed segment. One whose index files are missing is
   recovered (validated and re-indexed), as Kafka does.
4. After an unclean stop (no clean-shutdown marker), recover every segment from the one
   holding the recovery point onward: validate each batch (its size within the file, its
   CRC-32C, increasing offsets), truncate at the first invalid byte, which handles both a
   torn tail and garbage appended after valid data (the two kinds of corruption of Kafka's
   documentation, 'Log', on guarantees), and delete all later
   segments, since nothing after the first invalid byte may be served. Indexes of the
   scanned segments are rebuilt rather than trusted.
5. The last segment becomes the active one; the log end offset is the offset after its last
   batch (its base offset when empty). An empty directory gets one empty segment at the
   checkpointed log start offset.

The log start offset is the checkpointed one, raised to the first segment's base offset and
capped at the log end offset; the recovery point is capped at the log end offset.
"""

from __future__ import annotations

import logging
import os
import re
from bisect import bisect_right
from dataclasses import dataclass

from odradek.storage.errors import CorruptSegmentError
from odradek.storage.file_handle_cache import FileHandleCache
from odradek.storage.segment import (
    CLEANED_SUFFIX,
    DELETED_SUFFIX,
    INDEX_EXT,
    LOG_EXT,
    SWAP_SUFFIX,
    TIME_INDEX_EXT,
    LogSegment,
)
from odradek.storage.segment_index import SegmentSettings

logger = logging.getLogger(__name__)

_SEGMENT_FILE = re.compile(r"^(\d{20})(\.log|\.index|\.timeindex|\.txnindex)(\.swap)?$")


@dataclass(frozen=True, slots=True)
class LoadedLog:
    """What ``load_log`` found: segments in offset order (the last one active)."""

    segments: tuple[LogSegment, ...]
    log_start_offset: int
    log_end_offset: int
    recovery_point: int
    truncated_bytes: int


def load_log(
    directory: str,
    settings: SegmentSettings,
    cache: FileHandleCache,
    now_ms: int,
    *,
    recovery_point: int = 0,
    log_start_offset: int = 0,
    clean_shutdown: bool = False,
) -> LoadedLog:
    """Open the segments of ``directory``, recovering as the module docstring describes."""
    names = os.listdir(directory)
    _remove_leftovers(directory, names)
    found = _open_segments(directory, names, settings, cache, now_ms)
    _complete_swaps(directory, names, found, settings, cache, now_ms)
    segments = [found[base] for base in sorted(found)]
    truncated = 0
    for seg in segments:
        if not (os.path.exists(seg.index_path) and os.path.exists(seg.time_index_path)):
            truncated += seg.recover()
    if not clean_shutdown:
        segments, cut = _recover_from(segments, recovery_point)
        truncated += cut
    if not segments:
        segments = [LogSegment.create(directory, log_start_offset, cache, settings, now_ms)]
    active = segments[-1]
    try:
        log_end = active.read_next_offset()
    except CorruptSegmentError:
        truncated += active.recover()
        log_end = active.read_next_offset()
    active.unseal()
    active.txn_index.truncate_to(log_end)  # entries of markers recovery cut off
    if truncated:
        logger.warning("%s: recovery removed %d invalid bytes", directory, truncated)
    start = min(max(log_start_offset, segments[0].base_offset), log_end)
    point = log_end if clean_shutdown else min(recovery_point, log_end)
    return LoadedLog(tuple(segments), start, log_end, point, truncated)


def _remove_leftovers(directory: str, names: list[str]) -> None:
    have_logs = {n[: -len(LOG_EXT)] for n in names if n.endswith(LOG_EXT)}
    for name in names:
        stale = name.endswith((DELETED_SUFFIX, CLEANED_SUFFIX))
        stale |= name.endswith((INDEX_EXT + SWAP_SUFFIX, TIME_INDEX_EXT + SWAP_SUFFIX))
        m = _SEGMENT_FILE.match(name)
        if m and m.group(2) != LOG_EXT and not m.group(3) and m.group(1) not in have_logs:
            stale = True  # an index whose segment is gone
        if stale:
            try:
                os.unlink(os.path.join(directory, name))
            except FileNotFoundError:
                pass


def _open_segments(
    directory: str,
    names: list[str],
    settings: SegmentSettings,
    cache: FileHandleCache,
    now_ms: int,
) -> dict[int, LogSegment]:
    found: dict[int, LogSegment] = {}
    for name in names:
        m = _SEGMENT_FILE.match(name)
        if m and m.group(2) == LOG_EXT and not m.group(3):
            base = int(m.group(1))
            found[base] = LogSegment.open(directory, base, cache, settings, now_ms)
    return found


def _complete_swaps(
    directory: str,
    names: list[str],
    found: dict[int, LogSegment],
    settings: SegmentSettings,
    cache: FileHandleCache,
    now_ms: int,
) -> None:
    swaps = sorted(
        int(m.group(1))
        for m in map(_SEGMENT_FILE.match, names)
        if m and m.group(2) == LOG_EXT and m.group(3)
    )
    for base in swaps:
        swap = LogSegment.open(directory, base, cache, settings, now_ms, suffix=SWAP_SUFFIX)
        swap.recover()
        last = swap.read_next_offset() - 1
        for old in [b for b in found if base <= b <= max(base, last)]:
            found.pop(old).delete_files()
        swap.change_suffix("")
        found[base] = swap
        logger.info("%s: completed an interrupted compaction swap at %d", directory, base)


def _recover_from(
    segments: list[LogSegment], recovery_point: int
) -> tuple[list[LogSegment], int]:
    """Recover segments from the one holding ``recovery_point``; drop all after a cut."""
    bases = [s.base_offset for s in segments]
    first = max(bisect_right(bases, recovery_point) - 1, 0)
    truncated = 0
    for i in range(first, len(segments)):
        cut = segments[i].recover()
        if cut:
            truncated += cut
            for later in segments[i + 1 :]:
                truncated += later.size
                later.delete_files()
            return segments[: i + 1], truncated
    return segments, truncated
