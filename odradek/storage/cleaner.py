"""``LogCleaner``: compaction of logs whose ``cleanup.policy`` includes ``compact``.

A pass over one log:

1. The cleanable range is the run of inactive segments from the start of the log up to the
   first segment holding a record younger than ``min.compaction.lag.ms`` or reaching the
   log's ``cleanable_limit`` (its partition's last stable offset: an undecided transaction
   is never cleaned, as in Kafka); the pass runs when
   the range has a dirty part (segments at or past the cleaner checkpoint) and either that
   part is more than ``min.cleanable.dirty.ratio`` of it, or the log *must* be cleaned
   because a dirty record is older than ``max.compaction.lag.ms`` (``compaction_delay``), or
   the pass is forced. Kafka's ``LogCleanerManager.grabFilthiestCompactedLog`` uses the same
   test: ``(needCompactionNow && cleanableBytes > 0) || cleanableRatio > minCleanableRatio``.
2. An offset map ``key -> last offset`` is built over the range (control batches and
   aborted transactional data aside: ``cleaner_transactions``);
   at most ``max_map_keys`` keys: a range that would need more is cut after the segment
   that crossed the limit, as Kafka's dedupe buffer does. The same scan notes each producer
   id's last data batch (markers hold no sequence) and its last transaction marker.
3. Consecutive segments are grouped (at most ``segment.bytes`` together) and each group is
   rewritten into one ``.cleaned`` segment named after the group's first base offset. Per
   batch (Kafka's documentation, 'Record Batch', on compaction):

   - a record survives if it is the latest for its key; a keyless record does not (brokers
     refuse them on compacted topics, and Kafka's cleaner drops them);
   - a surviving tombstone (null value) is kept until its batch's delete horizon, then
     dropped. The horizon (KIP-534) is set the first time a pass keeps a tombstone:
     attributes bit 6 is set and ``base_timestamp`` becomes ``now + delete.retention.ms``
     (record timestamp deltas are re-encoded relative to it, so timestamps are unchanged);
   - a batch whose records all survive and that needs no horizon is copied verbatim;
     otherwise it is re-encoded with the same base offset, last offset delta, producer
     id/epoch, base sequence, partition leader epoch, codec and flags, so offsets, batch
     boundaries and producer state survive (``firstTimestamp`` is not kept, as Kafka's
     documentation notes);
   - a batch left with no records is dropped, unless it is its producer's last batch in the
     range: then an empty batch (no records, same base/last offset and sequence numbers)
     keeps the producer's last sequence for when the log is reloaded;
   - the records of aborted transactions (``.txnindex``, ``cleaner_transactions``) are
     removed, as in Kafka;
   - a transaction marker (COMMIT/ABORT control batch) goes as in Kafka
     (``clean_marker``): only once it is *removable* (no batch of its transaction remains
     before it: ``cleaner_transactions``) and ``delete.retention.ms`` passed since. The
     delay uses the delete horizon, as tombstones do (KIP-534, not the older
     segment-last-modified horizon): the first pass that finds the marker removable
     re-encodes it with attributes bit 6 set and ``base_timestamp = now +
     delete.retention.ms`` (its record's timestamp unchanged); a later pass at or past that
     horizon drops it. So a consumer that read the transaction's data before it went
     still meets its marker if it reads on within ``delete.retention.ms``. A producer's
     last marker in the range is always kept (it holds the producer's newest epoch and
     coordinator epoch, e.g. after an abort that bumped the epoch, for a reload of the
     producer state; Kafka keeps it while the producer is active). Control batches that
     hold no transaction marker are kept verbatim. The cleaned segment's ``.txnindex``
     keeps the entry of an aborted transaction while data of it was met
     (``CleanedTransactions.take_index_entries``): one whose data is gone needs none.

4. The cleaned segment is fsynced and swapped in through ``Log.replace_segments`` (a
   copy-on-write replacement; a crash-safe rename protocol). If the log changed under the
   cleaner (retention, truncation), the cleaned files are thrown away instead.

The cleaner reads sealed segments only and takes the log's lock only for the swap, so it never
blocks appends or reads; run it in its own thread.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from itertools import pairwise

from odradek.records import compression as codecs
from odradek.records.batch import (
    BATCH_HEADER_SIZE,
    COMPRESSION_MASK,
    DELETE_HORIZON_BIT,
    LOG_OVERHEAD,
    NO_PRODUCER_ID,
    BatchHeader,
    read_header,
    update_crc,
    write_header,
)
from odradek.records.builder import LOG_APPEND_TIME
from odradek.records.control import decode_end_txn_marker
from odradek.records.errors import CorruptRecordError
from odradek.records.reader import RecordBatch
from odradek.records.record import Record, encode_record
from odradek.storage.append_info import LogAppendInfo
from odradek.storage.cleaner_transactions import CleanedTransactions
from odradek.storage.config import LONG_MAX, LogConfig
from odradek.storage.errors import CorruptSegmentError
from odradek.storage.log import Log, settings_of
from odradek.storage.segment import CLEANED_SUFFIX, LogSegment
from odradek.storage.transaction_index import collect_aborted

logger = logging.getLogger(__name__)

INT32_MAX = 2**31 - 1


@dataclass(frozen=True, slots=True)
class CleanerStats:
    """What one pass did; ``end_offset`` is where the next pass's dirty part starts."""

    segments_cleaned: int
    bytes_read: int
    bytes_written: int
    records_removed: int
    end_offset: int


@dataclass
class _Plan:
    segments: tuple[LogSegment, ...]
    end_offset: int
    offset_map: dict[bytes, int]
    last_batch_of_producer: dict[int, int]  # producer id -> base offset of its last data batch
    last_marker_of_producer: dict[int, int]  # producer id -> base offset of its last marker
    aborted: list  # AbortedTxn overlapping the range


class LogCleaner:
    """Compacts logs, one pass per ``clean`` call."""

    def __init__(self, max_map_keys: int = 4_000_000) -> None:
        self.max_map_keys = max_map_keys

    def cleanable_segments(self, log: Log, now_ms: int) -> tuple[tuple[LogSegment, ...], int]:
        """The inactive segments old enough to clean and wholly below the log's
        ``cleanable_limit`` (its LSO), and the offset where they end."""
        segments = log.segments
        lag = log.config.min_compaction_lag_ms
        limit_of = getattr(log, "cleanable_limit", None)
        limit = limit_of() if limit_of is not None else None
        count = len(segments) - 1
        for i, segment in enumerate(segments[:-1]):
            if (lag > 0 and segment.max_timestamp[0] > now_ms - lag) or (
                    limit is not None and segments[i + 1].base_offset > limit):
                count = i
                break
        return segments[:count], segments[count].base_offset

    def dirty_ratio(self, log: Log, now_ms: int, first_dirty_offset: int) -> float:
        """Bytes of the cleanable range at or past ``first_dirty_offset`` over its total."""
        segments, end = self.cleanable_segments(log, now_ms)
        total = sum(s.size for s in segments)
        if not total:
            return 0.0
        nexts = [s.base_offset for s in segments[1:]] + [end]
        dirty = sum(s.size for s, nxt in zip(segments, nexts) if nxt > first_dirty_offset)
        return dirty / total

    def compaction_delay(self, log: Log, now_ms: int, first_dirty_offset: int) -> int:
        """How long ago the log became due for cleaning by ``max.compaction.lag.ms``; 0 when
        it is not due (Kafka's ``LogCleanerManager.maxCompactionDelay``).

        The earliest dirty record's time is estimated as the smallest first-batch timestamp
        (``LogSegment.first_batch_timestamp``: the first batch's max timestamp) over the
        inactive segments holding offsets at or past ``first_dirty_offset``; as in Kafka,
        timestamps at or below 0 (none, -1) are left out, so a segment without timestamps
        never makes a log due (its creation time is not used). The active segment is not
        looked at: ``Log`` rolls it by ``max_segment_ms`` on the next append instead.
        """
        lag = log.config.max_compaction_lag_ms
        if lag == LONG_MAX:
            return 0  # now - lag is below every positive timestamp: skip the header reads
        segments = log.segments
        earliest = LONG_MAX
        for segment, nxt in pairwise(segments):
            if nxt.base_offset <= first_dirty_offset:
                continue  # wholly clean
            try:
                ts = segment.first_batch_timestamp()
            except (OSError, EOFError):
                continue  # removed or truncated under us: the next pass sees the new list
            if ts is not None and 0 < ts < earliest:
                earliest = ts
        clean_until = now_ms - lag
        return clean_until - earliest if earliest < clean_until else 0

    def clean(
        self, log: Log, now_ms: int, first_dirty_offset: int = 0, force: bool = False
    ) -> CleanerStats | None:
        """One compaction pass over ``log``; None when nothing was (or could be) done.

        Unless forced, the pass needs cleanable dirty bytes and either a dirty ratio above
        ``min.cleanable.dirty.ratio`` (strictly, as Kafka compares) or a positive
        ``compaction_delay``."""
        if not log.config.compact_enabled:
            return None
        if not force:
            ratio = self.dirty_ratio(log, now_ms, first_dirty_offset)
            if ratio <= 0 or (
                ratio <= log.config.min_cleanable_dirty_ratio
                and self.compaction_delay(log, now_ms, first_dirty_offset) == 0
            ):
                return None
        try:
            plan = self._plan(log, now_ms)
            if plan is None:
                return None
            return self._clean_groups(log, plan, now_ms)
        except (FileNotFoundError, CorruptSegmentError, CorruptRecordError) as exc:
            # A segment vanished (retention) or holds bad data: skip this pass.
            logger.warning("cleaning %s-%s skipped: %s", log.topic, log.partition, exc)
            return None

    # -- planning ---------------------------------------------------------------------------

    def _plan(self, log: Log, now_ms: int) -> _Plan | None:
        segments, end = self.cleanable_segments(log, now_ms)
        offset_map: dict[bytes, int] = {}
        last_batch: dict[int, int] = {}
        last_marker: dict[int, int] = {}
        if not segments:
            return None
        aborted = collect_aborted(log.segments, segments[0].base_offset, end)
        txns = CleanedTransactions(aborted)
        for i, segment in enumerate(segments):
            for position, header in segment.iter_batches():
                if header.is_control:
                    if _holds_marker(_read_batch(segment, position, header).records()):
                        last_marker[header.producer_id] = header.base_offset
                        txns.on_marker(header)
                    continue
                if header.has_producer_id:  # (markers hold no sequence)
                    last_batch[header.producer_id] = header.base_offset
                if txns.is_aborted(header) or header.records_count == 0:
                    continue
                batch = _read_batch(segment, position, header)
                for record in batch.records():
                    if record.key is not None:
                        offset_map[record.key] = record.offset
            if len(offset_map) > self.max_map_keys and i + 1 < len(segments):
                segments, end = segments[: i + 1], segments[i + 1].base_offset
                break
        return _Plan(segments, end, offset_map, last_batch, last_marker, aborted)

    def _groups(self, log: Log, plan: _Plan) -> list[tuple[LogSegment, ...]]:
        """Consecutive segments whose total size fits one segment and whose offsets fit
        int32 deltas from the group's base offset."""
        limit = log.config.segment_bytes
        segments = plan.segments
        nexts = [s.base_offset for s in segments[1:]] + [plan.end_offset]
        groups: list[tuple[LogSegment, ...]] = []
        group: list[LogSegment] = []
        size = 0
        for segment, nxt in zip(segments, nexts):
            if group and (
                size + segment.size > limit or nxt - 1 - group[0].base_offset > INT32_MAX
            ):
                groups.append(tuple(group))
                group, size = [], 0
            group.append(segment)
            size += segment.size
        if group:
            groups.append(tuple(group))
        return groups

    # -- rewriting --------------------------------------------------------------------------

    def _clean_groups(self, log: Log, plan: _Plan, now_ms: int) -> CleanerStats:
        read = written = removed = cleaned = 0
        txns = CleanedTransactions(plan.aborted)  # one walk over the groups, in order
        for group in self._groups(log, plan):
            sizes = tuple(s.size for s in group)
            try:
                new, group_removed = self._rewrite(log, group, plan, now_ms, txns)
            except (OSError, EOFError, CorruptSegmentError, CorruptRecordError) as exc:
                # Truncation or retention changed the segments under us; the swap would be
                # refused anyway. Stop here; the next pass starts over.
                logger.info("cleaning %s-%s stopped: %s", log.topic, log.partition, exc)
                break
            if log.replace_segments(group, sizes, new):
                cleaned += len(group)
                read += sum(sizes)
                written += new.size
                removed += group_removed
            else:
                new.delete_files()
        return CleanerStats(cleaned, read, written, removed, plan.end_offset)

    def _rewrite(
        self, log: Log, group: tuple[LogSegment, ...], plan: _Plan, now_ms: int,
        txns: CleanedTransactions,
    ) -> tuple[LogSegment, int]:
        """``group`` cleaned into one new sealed, flushed ``.cleaned`` segment, and how many
        records went. Its ``.txnindex`` holds the entries ``txns`` keeps for the group's
        markers (in marker order), not the old files' entries."""
        config = log.config
        new = LogSegment.create(
            log.directory,
            group[0].base_offset,
            log.file_cache,
            settings_of(config),
            now_ms,
            suffix=CLEANED_SUFFIX,
        )
        removed = 0
        try:
            for segment in group:
                for position, header in segment.iter_batches():
                    data = segment.handle().read_exact(position, header.size)
                    if header.is_control:
                        out, dropped = self.clean_marker(data, header, plan, now_ms, config, txns)
                    else:
                        aborted = txns.is_aborted(header)
                        out, dropped = self._clean_batch(data, header, plan, now_ms, config, aborted)
                    removed += dropped
                    if out is not None:
                        new.append(out, _append_info(out, header))
            for txn in txns.take_index_entries():
                new.txn_index.append(txn)
            new.seal()
            new.flush()
        except BaseException:
            new.delete_files()
            raise
        return new, removed

    def clean_marker(
        self, data: bytes, header: BatchHeader, plan: _Plan, now_ms: int, config: LogConfig,
        txns: CleanedTransactions,
    ) -> tuple[bytes | None, int]:
        """The control batch to write for ``data`` (None: drop it) and how many records went.

        Kept verbatim: a control batch without a transaction marker; a marker that is not
        removable (``txns.on_marker``: a batch of its transaction remains before it); its
        producer's last marker in the range; a removable marker before its delete horizon.
        A removable marker without a horizon gets one (``now + delete.retention.ms``); one
        at or past its horizon is dropped, whole: never left as an empty control batch,
        which a reload of the producer state would take for a COMMIT."""
        batch = RecordBatch(data)
        records = batch.records()
        if not _holds_marker(records):
            return data, 0
        removable = txns.on_marker(header)
        if not removable or plan.last_marker_of_producer.get(header.producer_id) == header.base_offset:
            return data, 0
        if header.attributes & DELETE_HORIZON_BIT:
            return (None, len(records)) if now_ms >= header.base_timestamp else (data, 0)
        return encode_compacted_batch(header, records, now_ms + config.delete_retention_ms), 0

    def _clean_batch(
        self, data: bytes, header: BatchHeader, plan: _Plan, now_ms: int, config: LogConfig,
        aborted: bool = False,
    ) -> tuple[bytes | None, int]:
        """The data batch to write for ``data`` (None: drop it) and how many records went;
        ``aborted``: the batch is aborted transactional data (no record survives)."""
        records = RecordBatch(data).records() if header.records_count else []
        has_horizon = bool(header.attributes & DELETE_HORIZON_BIT)
        horizon = header.base_timestamp if has_horizon else None
        kept = []
        for r in ([] if aborted else records):
            if r.key is None or plan.offset_map.get(r.key, -1) > r.offset:
                continue
            if r.value is None and horizon is not None and now_ms >= horizon:
                continue
            kept.append(r)
        dropped = len(records) - len(kept)
        if not kept:
            if header.producer_id != NO_PRODUCER_ID and (
                plan.last_batch_of_producer.get(header.producer_id) == header.base_offset
            ):
                return (data if not records else encode_empty_batch(header)), dropped
            return None, dropped
        tombstones = any(r.value is None for r in kept)
        if tombstones and horizon is None:
            horizon = now_ms + config.delete_retention_ms
        if not tombstones:
            horizon = None
        if not dropped and has_horizon == (horizon is not None):
            return data, 0
        return encode_compacted_batch(header, kept, horizon), dropped


def _read_batch(segment: LogSegment, position: int, header: BatchHeader) -> RecordBatch:
    return RecordBatch(segment.handle().read_exact(position, header.size))


def _holds_marker(records: list[Record]) -> bool:
    """Whether a control batch's ``records`` hold an end-transaction (COMMIT/ABORT) marker."""
    try:
        return bool(records) and decode_end_txn_marker(records[0]) is not None
    except CorruptRecordError:
        return False


def _append_info(data: bytes, original: BatchHeader) -> LogAppendInfo:
    max_ts = read_header(data).max_timestamp
    return LogAppendInfo(original.base_offset, original.last_offset, max_ts, original.last_offset)


def encode_compacted_batch(
    header: BatchHeader, records: list[Record], delete_horizon: int | None
) -> bytes:
    """Re-encode ``header``'s batch holding only ``records`` (a non-empty, ordered subset).

    Keeps base offset, last offset delta, leader epoch, codec, timestamp type, flags and
    producer fields. ``base_timestamp`` is the first record's timestamp, or the delete
    horizon (with attributes bit 6 set) when one is given.
    """
    base_ts = delete_horizon if delete_horizon is not None else records[0].timestamp
    body = bytearray()
    for r in records:
        body += encode_record(
            r.offset - header.base_offset, r.timestamp - base_ts, r.key, r.value, r.headers
        )
    if header.timestamp_type == LOG_APPEND_TIME:
        max_ts = header.max_timestamp
    else:
        max_ts = max(r.timestamp for r in records)
    attributes = header.attributes & ~DELETE_HORIZON_BIT
    if delete_horizon is not None:
        attributes |= DELETE_HORIZON_BIT
    payload = codecs.compress(header.compression, body)
    return _assemble(header, attributes, base_ts, max_ts, len(records), payload)


def encode_empty_batch(header: BatchHeader) -> bytes:
    """A batch with no records that keeps ``header``'s offsets and producer fields (Kafka's
    documentation, 'Record Batch': a batch kept only to preserve the producer's last
    sequence)."""
    attributes = header.attributes & ~(COMPRESSION_MASK | DELETE_HORIZON_BIT)
    ts = header.max_timestamp
    return _assemble(header, attributes, ts, ts, 0, b"")


def _assemble(
    header: BatchHeader, attributes: int, base_ts: int, max_ts: int, count: int, payload
) -> bytes:
    out = bytearray(BATCH_HEADER_SIZE)
    out += payload
    new_header = BatchHeader(
        base_offset=header.base_offset,
        batch_length=len(out) - LOG_OVERHEAD,
        partition_leader_epoch=header.partition_leader_epoch,
        magic=2,
        crc=0,
        attributes=attributes,
        last_offset_delta=header.last_offset_delta,
        base_timestamp=base_ts,
        max_timestamp=max_ts,
        producer_id=header.producer_id,
        producer_epoch=header.producer_epoch,
        base_sequence=header.base_sequence,
        records_count=count,
    )
    write_header(out, 0, new_header)
    update_crc(out, 0, len(out))
    return bytes(out)
