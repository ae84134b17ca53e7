"""A partition this broker hosts: its log, its role, its high watermark, its producers (the
role, the ISR and the high watermark are moved by ``partition_replication``, mixed in).

The produce path (``append_records_as_leader``) works per batch in Python; the one per-record
step, the walk of each batch's records, is a C loop (``records/_log_validator.c``); the checks that need no partition state are
in ``replication/produce_validation.py``:

1. split the request's records into batches by their length fields; the bytes must be whole
   batches (else CORRUPT_MESSAGE);
2. legacy message sets (magic 0/1) are converted to v2 batches first (the one place where
   records are re-encoded, for clients that old);
3. validate each batch: CRC-32C, magic, ``last_offset_delta + 1 == records_count``, size
   within ``max.message.bytes``, no control batches from clients; its records as Kafka's
   ``LogValidator`` does (``records/log_validator.py``: codec, decompression within a bound,
   every record's framing, keys on compacted topics), which also yields the largest record
   timestamp; and on CreateTime topics timestamps within ``message.timestamp.before.max.ms``
   / ``after.max.ms`` of the broker's clock (``produce_validation.settings_for``);
4. check idempotent producers' sequence numbers (duplicates are acknowledged with the offsets
   they were first written at, and not appended again);
5. only when the topic's ``compression.type`` is not ``producer``: rewrite each batch of
   another codec into the topic's (``records/recompression.py``; the rewritten batch must
   fit ``max.message.bytes`` too); with ``producer`` this costs one comparison per request;
6. assign offsets by patching each batch's base offset and partition leader epoch in place
   (and its max timestamp and CRC: for LogAppendTime topics the append time, else its
   records' largest timestamp where the header says otherwise);
7. append the bytes to the log as they are, update producer state, advance the high
   watermark (the lowest log end offset in the ISR) and wake waiting fetches.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass, field

from odradek.coordinator.producer_state import ProducerStateManager
from odradek.protocol.generated.error_codes import ErrorCode
from odradek.records import batch as rb
from odradek.records._log_validator import validate_and_assign
from odradek.records.errors import (
    CorruptRecordError,
    DecompressionLimitError,
    InvalidRecordError,
    UnsupportedCompressionTypeError,
)
from odradek.records.log_validator import RecordsSummary, check_batch_records, max_decompressed
from odradek.replication.produce_validation import (
    NO_SETTINGS,
    ProduceError,
    ProduceSettings,
    check_timestamps,
    recompress,
    set_max_timestamps,
    settings_for,
    split_or_refuse,
    validate_client_batch,
)
from odradek.replication.follower_append import append_as_follower
from odradek.replication.follower_state import FollowerState
from odradek.replication.isr import IsrChange, maximal_isr
from odradek.replication.partition_replication import PartitionReplication
from odradek.replication import transactions
from odradek.storage._fast_append import append_to_active_segment
from odradek.storage.append_info import LogAppendInfo
from odradek.storage.config import LOG_APPEND_TIME
from odradek.storage.errors import RecordBatchTooLargeError

_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1


class CheckOffLoop(Exception):
    """A batch's records decompress to more than may be checked on the event loop
    (``INLINE_DECOMPRESSED``): nothing was changed; check them with ``check_records_off_loop``
    on a worker thread, then append with its result."""


@dataclass(frozen=True, slots=True)
class ProduceResult:
    base_offset: int
    last_offset: int
    log_append_time: int  # -1 unless the topic uses LogAppendTime
    log_start_offset: int


@dataclass
class Partition(PartitionReplication):
    topic: str
    index: int
    topic_id: uuid.UUID
    log: object  # odradek.storage.log.Log
    leader_id: int = -1
    leader_epoch: int = 0
    replicas: tuple[int, ...] = ()
    isr: tuple[int, ...] = ()
    high_watermark: int = 0
    producer_state: ProducerStateManager = field(default_factory=ProducerStateManager)
    # As leader: what each follower's fetches told (``replication/follower_state.py``), by
    # broker id; an ISR change proposed and not yet durable (``replication/isr.py``); the
    # log end offset when the current leader epoch began; ``replica.lag.time.max.ms``.
    followers: dict[int, FollowerState] = field(default_factory=dict)
    pending_isr: IsrChange | None = None
    leader_epoch_start_offset: int = -1
    replica_lag_time_max_ms: int = 30_000
    # The version of the partition's state znode (``.../partitions/<p>/state``) that the
    # controller's LeaderAndIsr named (its ``partition_epoch``): an ISR change is a write
    # conditional on it (AlterPartition's ``partition_epoch``); -1 before any LeaderAndIsr.
    zk_version: int = -1
    clock: object = None  # reads the time for the high watermark when a follower lags
    # Recomputed only when a config change replaced the log's config, so a produce pays an
    # identity test, not property calls.
    produce_settings: ProduceSettings = field(default=NO_SETTINGS, repr=False, compare=False)

    @property
    def key(self) -> tuple[str, int]:
        return (self.topic, self.index)

    @property
    def log_end_offset(self) -> int:
        return self.log.log_end_offset

    @property
    def log_start_offset(self) -> int:
        return self.log.log_start_offset

    def is_leader(self, broker_id: int) -> bool:
        return self.leader_id == broker_id

    # --- produce ----------------------------------------------------------------------------
    def append_records_as_leader(self, records, now_ms: int,
                                 checked: list[RecordsSummary] | None = None) -> ProduceResult:
        """Validate, assign offsets to and append the batches in ``records`` (writable).

        ``checked``: the batches' records as ``check_records_off_loop`` found them, which are
        then not walked again. Raises ProduceError with the Kafka error code when nothing was
        appended, CheckOffLoop (nothing changed) when records must be checked off the loop.
        """
        config = self.log.config
        buf, batches = split_or_refuse(records)
        settings = self._settings(config)
        summaries, idempotent = self._check_batches(buf, batches, config, settings, now_ms, checked)
        if idempotent:
            duplicate = self._check_producers(batches)
            if duplicate is not None:
                return ProduceResult(duplicate.first_offset, duplicate.last_offset, -1, self.log_start_offset)
        append_time = now_ms if config.message_timestamp_type == LOG_APPEND_TIME else -1
        if append_time < 0:
            batches = set_max_timestamps(buf, batches, summaries)
        if settings.recompress_to is not None:  # compression.type is not "producer"
            buf, batches = recompress(buf, batches, settings.recompress_to, config.max_message_bytes)
        info = self._assign_offsets(buf, batches, append_time, summaries)
        refusal = self._log_refusal(len(buf), info.first_offset, info.last_offset)
        if refusal is not None:
            raise refusal
        self._append_to_log(buf, info)
        self._update_producers(batches, info.first_offset, append_time)
        self.maybe_advance_high_watermark()
        return ProduceResult(info.first_offset, info.last_offset, append_time, self.log_start_offset)

    def check_records_off_loop(self, records) -> list[RecordsSummary]:
        """The records of every batch in ``records`` checked with the full decompression
        bound (``max_decompressed``), for ``append_records_as_leader(checked=...)``. Reads
        only ``records`` and the config, so it may run on a worker thread (the decompressors
        and the walk release the GIL). Raises ProduceError as the append would."""
        buf, batches = split_or_refuse(records)
        config = self.log.config
        limit = max_decompressed(config.max_message_bytes)
        compacted = config.compact_enabled
        return [self._check_records(buf, pos, size, header, compacted, limit) for pos, size, header in batches]

    def _check_batches(self, buf, batches, config, settings: ProduceSettings, now_ms: int,
                       checked: list[RecordsSummary] | None) -> tuple[list[RecordsSummary], bool]:
        """Every batch's header, records and timestamps checked, in batch order (the first
        failing batch decides the error): the records' summaries and whether any batch is
        idempotent."""
        max_message_bytes = config.max_message_bytes
        low, high = now_ms - settings.before_ms, now_ms + settings.after_ms
        compacted = settings.compacted
        summaries = []
        idempotent = False
        for i, (pos, size, header) in enumerate(batches):
            validate_client_batch(header, size, max_message_bytes)
            summary = (checked[i] if checked is not None
                       else self._check_records(buf, pos, size, header, compacted, settings.inline_limit))
            summaries.append(summary)
            # Two comparisons per batch; only a batch past a bound pays for a call.
            if header.base_timestamp < low or summary.max_timestamp > high:
                check_timestamps(header._replace(max_timestamp=summary.max_timestamp), low, high)
            idempotent = idempotent or header.producer_id >= 0
        return summaries, idempotent

    def _check_records(self, buf, pos: int, size: int, header: rb.BatchHeader, compacted: bool,
                       limit: int) -> RecordsSummary:
        """One batch's records checked (``records/log_validator.py``), errors as ProduceError;
        CheckOffLoop when they need more than ``limit`` bytes and more is allowed."""
        full = max_decompressed(self.log.config.max_message_bytes)
        try:
            return check_batch_records(buf, pos, size, header, f"{self.topic}-{self.index}", compacted, limit,
                                       limit < full)
        except DecompressionLimitError as e:
            if limit < full:
                raise CheckOffLoop() from None
            raise ProduceError(ErrorCode.INVALID_RECORD, f"{e} (the bound for this topic's max.message.bytes)") from None
        except CorruptRecordError as e:
            raise ProduceError(ErrorCode.CORRUPT_MESSAGE, str(e)) from None
        except UnsupportedCompressionTypeError as e:
            raise ProduceError(ErrorCode.UNSUPPORTED_COMPRESSION_TYPE, str(e)) from None
        except InvalidRecordError as e:
            raise ProduceError(ErrorCode.INVALID_RECORD, str(e), e.record_errors) from None

    def prepare_plain_append(self, records, clock) -> tuple[int, int, int, int] | None:
        """Phase one of the produce fast path (``server/produce_fast_path.py``): validate
        ``records`` and assign their offsets from the log end offset, in one C call
        (``records/_log_validator.c``) that changes nothing but the batches' base offsets and
        leader epochs, which every append assigns anyway.

        The records are walked there too (the generic path's checks, same walker); a batch
        whose header's max timestamp is not its records' gets theirs (and its CRC).
        Returns the fields of the ``LogAppendInfo`` to append with, or None when the batches
        need more than that: a refusal, idempotent or legacy batches, records that decompress
        to more than ``INLINE_DECOMPRESSED``, a topic whose config rewrites batches, stamps
        LogAppendTime or flushes by message count, or a leader epoch the log's leader epoch
        cache has not begun (``become_leader`` begins it). The caller then
        runs ``append_records_as_leader``, which checks and assigns everything again.
        """
        config = self.log.config
        settings = self._settings(config)
        if not settings.plain or self.log.leader_epoch_cache.latest_epoch != self.leader_epoch:
            return None  # (an epoch not begun yet: Log.append records it)
        if settings.bounded:
            now_ms = clock.milliseconds()
            low = max(now_ms - settings.before_ms, _INT64_MIN)
            high = min(now_ms + settings.after_ms, _INT64_MAX)
        else:
            low, high = _INT64_MIN, _INT64_MAX
        info = validate_and_assign(records, self.log.log_end_offset, self.leader_epoch,
                                   config.max_message_bytes, low, high, settings.decompress,
                                   settings.compacted)
        if info is None or self.log.append_refusal(len(records), info[0], info[1]) is not None:
            return None
        return info

    def append_plain(self, records, info: tuple[int, int, int, int]) -> None:
        """Phase two: append what ``prepare_plain_append`` returned ``info`` for, with nothing
        appended to this log in between. The batches have no producer id, so the producer
        state only moves its end offset. The append is ``Log.append``'s, in one C call when
        it neither rolls nor reserves (``storage/_fast_append.c``). A disk error raises
        ProduceError(KAFKA_STORAGE_ERROR) as in ``_append_to_log``."""
        try:
            if not append_to_active_segment(self.log, records, info):
                self.log.append(records, LogAppendInfo(*info))
        except OSError as e:
            raise _storage_error(self, e) from None
        self.producer_state.advance(info[1] + 1)
        self.maybe_advance_high_watermark()

    def append_as_coordinator(self, batch, now_ms: int) -> ProduceResult:
        """Append one v2 batch that a coordinator of this broker built (group metadata,
        offsets, transaction markers): offsets and leader epoch are assigned here as for a
        client's batch; of the client checks only ``max.message.bytes`` applies, and for a
        batch with a producer id the producer state's fencing (no sequence checks:
        ``transactions.check_coordinator_batch``), whose bookkeeping then follows the append
        (a transactional batch opens the producer's transaction, a marker ends it). Raises
        ProduceError when too large or fenced.

        The topic's ``compression.type`` does not rewrite these batches (the coordinator
        picks their codec). Kafka runs coordinator appends through ``LogValidator`` too, so a
        ``__consumer_offsets`` with a ``compression.type`` other than ``producer`` would
        recompress them there; its default is ``producer``, where both behave the same.
        """
        config = self.log.config
        buf = memoryview(bytearray(batch))
        if len(buf) > config.max_message_bytes:
            raise ProduceError(ErrorCode.MESSAGE_TOO_LARGE,
                               f"batch of {len(buf)} bytes exceeds max.message.bytes {config.max_message_bytes}")
        append_time = now_ms if config.message_timestamp_type == LOG_APPEND_TIME else -1
        header = rb.read_header(buf, 0)
        transactions.check_coordinator_batch(self, header)
        info = self._assign_offsets(buf, [(0, len(buf), header)], append_time)
        self._append_to_log(buf, info)
        transactions.after_coordinator_append(self, buf, header, info.first_offset, append_time)
        self.maybe_advance_high_watermark()
        return ProduceResult(info.first_offset, info.last_offset, append_time, self.log_start_offset)

    def _append_to_log(self, buf, info: LogAppendInfo) -> None:
        """``Log.append``, a disk error (ENOSPC, EIO) becoming this partition's
        ProduceError(KAFKA_STORAGE_ERROR). The log is then as it was (``Log.append``'s
        contract), so the producer state and the high watermark stay put, the request's other
        partitions go on, reads go on, and the next produce simply tries again: writes resume
        by themselves once the disk has room (Kafka instead takes the whole log directory
        offline until a restart)."""
        try:
            self.log.append(buf, info)
        except OSError as e:
            raise _storage_error(self, e) from None

    def _log_refusal(self, size: int, first_offset: int, last_offset: int) -> ProduceError | None:
        """``Log.append_refusal`` as this partition's error, checked before appending: a
        request's earlier partitions may be appended already, and an exception from the log
        would leave the request half done. More bytes than ``segment.bytes``:
        RECORD_LIST_TOO_LARGE, as Kafka answers; offsets beyond 2**31 - 1 apart: INVALID_RECORD."""
        refused = self.log.append_refusal(size, first_offset, last_offset)
        if refused is None:
            return None
        code = (ErrorCode.RECORD_LIST_TOO_LARGE if isinstance(refused, RecordBatchTooLargeError)
                else ErrorCode.INVALID_RECORD)
        return ProduceError(code, str(refused))

    def _settings(self, config) -> ProduceSettings:
        """``produce_settings``, worked out again only when ``config`` replaced the log's."""
        settings = self.produce_settings
        if settings.config is not config:
            settings = self.produce_settings = settings_for(config)
        return settings

    def _check_producers(self, batches):
        duplicate = None
        for _, _, header in batches:
            if header.producer_id < 0:
                continue
            verdict = self.producer_state.check(header)
            if verdict.is_duplicate:
                duplicate = verdict.duplicate
            elif not verdict.ok:
                raise ProduceError(verdict.error, verdict.message or verdict.error.name)
        if duplicate is not None and len(batches) > 1:
            raise ProduceError(ErrorCode.INVALID_RECORD, "duplicate batch among several")
        return duplicate

    def _update_producers(self, batches, first_offset: int, append_time: int) -> None:
        """Record the appended batches in the producer state from the headers read before
        offsets were assigned (the batches got consecutive offsets from ``first_offset``),
        so no header is decoded twice."""
        update = self.producer_state.update
        timestamp = append_time if append_time >= 0 else None
        base = first_offset
        for _, _, header in batches:
            update(header, base, timestamp=timestamp)
            base += header.last_offset_delta + 1

    def _assign_offsets(self, buf, batches, append_time: int,
                        summaries: list[RecordsSummary] | None = None) -> LogAppendInfo:
        """Patch base offsets and leader epochs (LogAppendTime: max timestamps) and sum up.

        The offset of the largest timestamp is that of the first record holding it (Kafka's
        ``offsetOfMaxTimestamp``) where ``summaries`` say which record it is, else the last
        offset of its batch; with no timestamp at all, the last offset."""
        next_offset = self.log_end_offset
        first = next_offset
        max_ts, max_ts_offset = rb.NO_TIMESTAMP, -1
        for i, (pos, size, header) in enumerate(batches):
            rb.set_base_offset(buf, pos, next_offset)
            rb.set_partition_leader_epoch(buf, pos, self.leader_epoch)
            if append_time >= 0:
                rb.set_log_append_time(buf, pos, size, append_time)
            last = next_offset + header.last_offset_delta
            ts = append_time if append_time >= 0 else header.max_timestamp
            if ts > max_ts:
                at = summaries[i].index_of_max if summaries is not None and append_time < 0 else -1
                max_ts, max_ts_offset = ts, (next_offset + at if at >= 0 else last)
            next_offset = last + 1
        return LogAppendInfo(first, next_offset - 1, max_ts, max_ts_offset if max_ts_offset >= 0 else next_offset - 1)

    # --- acks=all -----------------------------------------------------------------------------
    def check_enough_replicas_reach_offset(self, broker_id: int, last_offset: int,
                                           min_insync_replicas: Callable[[str], int]) -> ErrorCode | None:
        """How an acks=all wait for ``last_offset`` ends, asked each time it may have (Kafka's
        ``Partition.checkEnoughReplicasReachOffset``, which ``DelayedProduce`` asks):

        - NOT_LEADER_OR_FOLLOWER once ``broker_id`` no longer leads the partition (the new
          leader may truncate the records: the producer retries there);
        - None while the high watermark has not passed ``last_offset``: still waiting;
        - NOT_ENOUGH_REPLICAS_AFTER_APPEND when it has, but the ISR has fewer members than
          the topic's ``min.insync.replicas`` (``min_insync_replicas(topic)``, read only then):
          the ISR shrank while the records waited, so the high watermark passed them with
          fewer copies than acks=all promises (the records stay in the log; the error is
          retriable, and the retry is refused NOT_ENOUGH_REPLICAS until the ISR grows back);
        - NONE otherwise.

        The ISR counted is the maximal one (``isr.maximal_isr``: the committed ISR plus a
        replica a pending change adds), as Kafka counts it: the high watermark waits for that
        replica too, so it holds the records; a pending shrink removes nobody yet."""
        if self.leader_id != broker_id:
            return ErrorCode.NOT_LEADER_OR_FOLLOWER
        if self.high_watermark <= last_offset:
            return None
        if len(maximal_isr(self.isr, self.pending_isr)) < min_insync_replicas(self.topic):
            return ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND
        return ErrorCode.NONE

    # --- follower ---------------------------------------------------------------------------
    def append_records_as_follower(self, records) -> LogAppendInfo | None:
        """Append the leader's batches verbatim (``replication/follower_append.py``); the
        summary of what was appended, None when ``records`` held no whole batch. Raises
        CorruptRecordError, InvalidAppendOffsetError, or ProduceError(KAFKA_STORAGE_ERROR)
        for a disk error (the log is then unchanged)."""
        try:
            return append_as_follower(self, records)
        except OSError as e:
            raise _storage_error(self, e) from None

    def update_follower_high_watermark(self, leader_high_watermark: int) -> int:
        """A follower's high watermark: the leader's, but never past its own log end offset
        (nor below its log start offset); it follows the leader's, down too (a new leader's
        may be lower). Returns it."""
        hw = max(min(leader_high_watermark, self.log_end_offset), self.log_start_offset)
        self.high_watermark = hw
        self.producer_state.on_high_watermark(hw)
        return hw

    # --- transactions ---------------------------------------------------------------------
    def last_stable_offset(self) -> int:
        """min(first unstable offset, high watermark) (``replication/transactions.py``)."""
        return transactions.last_stable_offset(self)


def _storage_error(part: Partition, error: OSError) -> ProduceError:
    """The partition's KAFKA_STORAGE_ERROR for a write the disk refused; the log manager is
    told first (``Log.io_failed``): an error that means the log directory failed takes the
    directory offline (``storage/log_dir_failure_channel.py``)."""
    part.log.io_failed(f"appending to {part.topic}-{part.index}", error)
    return ProduceError(ErrorCode.KAFKA_STORAGE_ERROR,
                        f"write to {part.topic}-{part.index} failed: {error.strerror or error}")
