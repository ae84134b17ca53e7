"""``LogManager``: every partition log of a broker, spread over the ``log.dirs``.

Each log directory holds one sub-directory per partition, ``<topic>-<partition>``, and
these files of its own::

    recovery-point-offset-checkpoint   where recovery of each log starts after a crash
    log-start-offset-checkpoint        each log's start offset (retention, DeleteRecords)
    cleaner-offset-checkpoint          where each compacted log's dirty part starts
    .kafka_cleanshutdown               present only between a clean shutdown and startup

Lifecycle: ``startup`` loads every log (recovering those of a directory without the
clean-shutdown marker, each from its checkpointed recovery point), then removes the marker;
``shutdown`` flushes and closes every log, writes the checkpoints, then the marker. In
between, the broker calls the periodic passes with the current time: ``run_retention``,
``flush_due`` (which says what to flush, so the broker can fsync off its event loop),
``checkpoint`` and ``remove_deleted``. A directory's checkpoints are written by one thread at
a time, in the order of the snapshots they were taken from (``checkpoint_dir``). Deleting a
partition renames its directory ``<topic>-<partition>.<uuid>-delete`` at once and erases it
``file.delete.delay.ms`` later; a deletion is never left half done by a disk error
(``delete_logs``), and what a crash leaves is removed at the next start-up
(``delete_stray_logs``; both in ``log_deletion``).
Each partition directory records the id of the topic it belongs to (``partition_metadata``),
so a topic created again under a deleted one's name never gets the old data.

New partitions go to the live directory holding the fewest partitions (Kafka's
``nextLogDirs``; ties to the first listed), the next one tried when a directory fails
creating it. All open descriptors go through one shared FileHandleCache.

A log directory fails (Kafka's ``LogDirFailureChannel``, ``failure_channel``) when an I/O
error of an append, a flush, a checkpoint or a new log's creation says so
(``log_dir_failure_channel.is_log_dir_failure``), or when it cannot be loaded at start-up.
``log_dirs`` then lists only the live ones (``all_log_dirs`` every configured one);
``handle_log_dir_failure`` drops its logs (the broker takes their partitions offline), and
it is neither checkpointed nor marked cleanly shut down again. Start-up fails only when no
directory can be loaded. While any directory is offline, a log not found in the live ones
is created only for a replica the controller says is new (``get_or_create_log``'s
``is_new``), as Kafka does: after a restart nothing says which partitions the failed
directory held, so any other may be one of them.
"""

from __future__ import annotations

import logging
import os
import re
import threading
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from odradek.storage.checkpoint import (
    CLEANER_OFFSET_CHECKPOINT,
    LOG_START_OFFSET_CHECKPOINT,
    RECOVERY_POINT_CHECKPOINT,
    OffsetCheckpointFile,
    TopicPartition,
)
from odradek.storage.cleaner import CleanerStats, LogCleaner
from odradek.storage.clock import Clock
from odradek.storage.config import LogConfig
from odradek.storage.errors import CheckpointError, LogClosedError, OfflineLogDirsError, StorageError
from odradek.storage.file_handle_cache import FileHandleCache
from odradek.storage.file_ops import fsync_directory
from odradek.storage.log import Log
from odradek.storage.log_creation_batch import LogCreationBatching
from odradek.storage.log_deletion import DELETE_DIR_SUFFIX, LogDeletion, erase_dirs
from odradek.storage.log_dir_failure_channel import LogDirFailureChannel
from odradek.storage.log_dirs import LogDirs
from odradek.storage.partition_metadata import read_topic_id, topic_id_text, write_topic_id

logger = logging.getLogger(__name__)

CLEAN_SHUTDOWN_FILE = ".kafka_cleanshutdown"
# Kafka's legal topic names: 1-249 of these characters ("." and ".." excluded).
_TOPIC = re.compile(r"^[a-zA-Z0-9._-]{1,249}$")
_PARTITION_DIR = re.compile(r"^([a-zA-Z0-9._-]{1,249})-(\d+)$")


@dataclass(frozen=True, slots=True)
class FlushTask:
    """A flush the broker should run (in a thread): ``log.flush(up_to_offset)``."""

    log: Log
    up_to_offset: int

    def run(self) -> None:
        self.log.flush(self.up_to_offset)


def partition_dir_name(topic: str, partition: int) -> str:
    """``<topic>-<partition>``; ValueError for an illegal topic name or partition."""
    if not _TOPIC.match(topic) or topic in (".", ".."):
        raise ValueError(f"illegal topic name {topic!r}")
    if partition < 0:
        raise ValueError(f"illegal partition {partition}")
    return f"{topic}-{partition}"


def parse_partition_dir(name: str) -> TopicPartition | None:
    """(topic, partition) of a partition directory name, or None."""
    m = _PARTITION_DIR.match(name)
    return (m.group(1), int(m.group(2))) if m else None


class LogManager(LogCreationBatching, LogDeletion, LogDirs):
    """The set of partition logs over ``log_dirs``."""

    def __init__(
        self,
        log_dirs: list[str],
        default_config: LogConfig,
        clock: Clock,
        *,
        config_for_topic: Callable[[str], LogConfig] | None = None,
        max_open_files: int = 1024,
    ) -> None:
        if not log_dirs:
            raise ValueError("at least one log directory is needed")
        self.all_log_dirs = list(dict.fromkeys(os.path.abspath(d) for d in log_dirs))
        self.failure_channel = LogDirFailureChannel()
        self.default_config = default_config
        self.clock = clock
        self.cache = FileHandleCache(max_open_files)
        self._config_for_topic = config_for_topic
        self._logs: dict[TopicPartition, Log] = {}
        self._dir_of: dict[TopicPartition, str] = {}
        self._cleaner_offsets: dict[TopicPartition, int] = {}
        self._pending_dir_deletes: list[tuple[int, str]] = []
        # Deleted logs' directories whose rename failed, and log directories whose
        # checkpoint still names deleted logs (``delete_logs``).
        self._unrenamed: set[str] = set()
        self._owed_checkpoints: set[str] = set()
        self._topic_ids: dict[TopicPartition, uuid.UUID | None] = {}
        self._lock = threading.RLock()
        self._batch = threading.local()  # .current: the creating thread's LogCreationBatch
        self._checkpoint_locks: dict[str, threading.Lock] = {}  # per log directory: see checkpoint_dir
        self._running = False
        self.cleaner = LogCleaner()

    # -- lifecycle --------------------------------------------------------------------------

    def config_for(self, topic: str) -> LogConfig:
        if self._config_for_topic is not None:
            return self._config_for_topic(topic)
        return self.default_config

    def startup(self) -> None:
        """Load every log of every directory, then remove the clean-shutdown markers."""
        with self._lock:
            for directory in self.log_dirs:
                try:
                    os.makedirs(directory, exist_ok=True)
                    self._load_dir(directory)
                except OSError as e:  # Kafka starts without it; the controller learns of it
                    self.failure_channel.report(directory, "loading its logs", e)
                    if self.failure_channel.has_offline_log_dir(directory):
                        self.handle_log_dir_failure(directory)
                        continue
                    raise
            if not self.log_dirs:
                raise StorageError(f"none of the log directories {', '.join(self.all_log_dirs)} can be used")
            for directory in self.log_dirs:
                marker = os.path.join(directory, CLEAN_SHUTDOWN_FILE)
                if os.path.exists(marker):
                    os.unlink(marker)
                    fsync_directory(directory)
            self._running = True

    def _load_dir(self, directory: str) -> None:
        clean = os.path.exists(os.path.join(directory, CLEAN_SHUTDOWN_FILE))
        points = _read_checkpoint(directory, RECOVERY_POINT_CHECKPOINT)
        starts = _read_checkpoint(directory, LOG_START_OFFSET_CHECKPOINT)
        self._cleaner_offsets.update(_read_checkpoint(directory, CLEANER_OFFSET_CHECKPOINT))
        configs: dict[str, LogConfig] = {}  # one per topic: LogConfig is immutable
        deleted: list[str] = []  # a deletion's directories, never loaded: erased together
        for name in sorted(os.listdir(directory)):
            path = os.path.join(directory, name)
            if not os.path.isdir(path):
                continue
            if name.endswith(DELETE_DIR_SUFFIX):
                deleted.append(path)
                continue
            tp = parse_partition_dir(name)
            if tp is None:
                continue
            if tp in self._logs:
                raise StorageError(f"{tp[0]}-{tp[1]} found in {self._dir_of[tp]} and {directory}")
            config = configs.get(tp[0])
            if config is None:
                config = configs[tp[0]] = self.config_for(tp[0])
            self._logs[tp] = Log.open(
                path,
                tp[0],
                tp[1],
                config,
                self.clock,
                self.cache,
                recovery_point=points.get(tp, 0),
                log_start_offset=starts.get(tp, 0),
                clean_shutdown=clean,
            )
            self._logs[tp].io_error_handler = self._io_error_handler(directory)
            self._dir_of[tp] = directory
            self._topic_ids[tp] = read_topic_id(path)
        erase_dirs(deleted)
        if not clean and not any(d == directory for d in self._dir_of.values()):
            logger.info("no logs in %s yet", directory)  # a new directory: nothing to recover
        else:
            logger.info("loaded logs of %s (%s shutdown)", directory, "clean" if clean else "unclean")

    def shutdown(self) -> bool:
        """Flush and close every log, write the checkpoints, then the clean-shutdown
        markers (only after everything they vouch for is on disk); return whether they were
        written. A disk error (a full disk) does not stop the others: it is logged once,
        no marker is written, and the next start-up recovers the logs from the last
        checkpoints, as after a crash."""
        with self._lock:
            if not self._running:
                return True
            self._running = False
            failed: list[str] = []
            for log in self._logs.values():
                try:
                    log.close()
                except OSError as exc:
                    failed.append(f"{log.topic}-{log.partition} ({exc.strerror or exc})")
            try:
                self.checkpoint()
            except OSError as exc:
                failed.append(f"checkpoints ({exc.strerror or exc})")
            erase_dirs([path for _, path in self._pending_dir_deletes])
            self._pending_dir_deletes = []
            if not failed:
                try:
                    self._write_clean_shutdown_markers()
                    return True
                except OSError as exc:
                    failed.append(f"clean-shutdown markers ({exc.strerror or exc})")
            shown = ", ".join(failed[:5]) + (f" and {len(failed) - 5} more" if len(failed) > 5 else "")
            logger.error("shutdown could not write %s; the next start-up recovers the logs", shown)
            return False

    def _write_clean_shutdown_markers(self) -> None:
        for directory in self.log_dirs:
            marker = os.path.join(directory, CLEAN_SHUTDOWN_FILE)
            with open(marker, "wb") as f:
                os.fsync(f.fileno())
            fsync_directory(directory)

    # -- logs -------------------------------------------------------------------------------

    def get_log(self, topic: str, partition: int) -> Log | None:
        return self._logs.get((topic, partition))

    def all_logs(self) -> dict[TopicPartition, Log]:
        with self._lock:
            return dict(self._logs)

    def get_or_create_log(
        self, topic: str, partition: int, config: LogConfig | None = None,
        topic_id: uuid.UUID | None = None, is_new: bool = False,
    ) -> Log:
        """The partition's log, created (empty) in the least loaded directory if absent.

        An absent log is created only when no log directory is offline, or when ``is_new``
        (the controller's LeaderAndIsr ``is_new``: the replica never existed here). Else the
        log may live in the failed directory, and an empty one elsewhere would lose or fork
        its data: OfflineLogDirsError (Kafka's ``getOrCreateLog``).

        With ``topic_id``: a log recorded (``partition_metadata``) as another topic's of the
        same name, one deleted since, is removed first and a new one created; a log with no
        id recorded (kept from before ids were) takes this one."""
        name = partition_dir_name(topic, partition)
        with self._lock:
            tp = (topic, partition)
            log = self._logs.get(tp)
            if log is not None and topic_id is not None and self._topic_ids.get(tp) != topic_id:
                if self._topic_ids.get(tp) is None:
                    write_topic_id(log.directory, topic_id)
                    self._topic_ids[tp] = topic_id
                else:
                    logger.warning("%s-%d holds the log of a deleted topic of that name (topic id %s): "
                                   "removing it", topic, partition, topic_id_text(self._topic_ids[tp]))
                    self.delete_logs([tp])
                    log = None
            if log is not None:
                batch = getattr(self._batch, "current", None)
                if batch is not None:  # its leader epoch may be written in the batch
                    batch.touch(self._dir_of[tp], tp)
                return log
            offline = self.failure_channel.offline_log_dirs
            if offline and not is_new:
                raise OfflineLogDirsError(f"cannot create the log of {topic}-{partition}: log directories "
                                          f"{', '.join(offline)} are offline and may hold it")
            log = None
            for directory in self._next_log_dirs():
                try:
                    log = self._create_log(directory, name, topic, partition, config, topic_id)
                    break
                except OSError as e:  # a failed directory: try the next one, as Kafka does
                    self.failure_channel.report(directory, f"creating the log of {topic}-{partition}", e)
                    if not self.failure_channel.has_offline_log_dir(directory):
                        raise
            if log is None:
                raise StorageError(f"no log directory can hold {topic}-{partition}: "
                                   f"{', '.join(self.failure_channel.offline_log_dirs)} failed")
            self._logs[tp] = log
            self._dir_of[tp] = directory
            self._topic_ids[tp] = topic_id
            self._cleaner_offsets.pop(tp, None)  # a checkpointed one was a deleted log's
            return log

    def topic_id(self, topic: str, partition: int) -> uuid.UUID | None:
        """The topic id recorded for the partition's log (None: none recorded, or no log)."""
        return self._topic_ids.get((topic, partition))

    def _create_log(self, directory: str, name: str, topic: str, partition: int,
                    config: LogConfig | None, topic_id: uuid.UUID | None) -> Log:
        self._clear_leftovers(directory, os.path.join(directory, name))
        log = Log.open(os.path.join(directory, name), topic, partition, config or self.config_for(topic),
                       self.clock, self.cache, clean_shutdown=True)
        try:
            if topic_id is not None:
                write_topic_id(log.directory, topic_id)
            batch = getattr(self._batch, "current", None)
            if batch is None:
                fsync_directory(directory)
            else:  # fsynced once for the whole batch, before any of its logs is acknowledged
                batch.add(directory, (topic, partition))
        except OSError:
            log.abandon()  # the directory is moved away by the next attempt
            raise
        log.io_error_handler = self._io_error_handler(directory)
        return log

    def truncate_to(self, topic: str, partition: int, offset: int) -> bool:
        """Truncate a log and checkpoint its lowered recovery point at once, so recovery
        after a crash re-checks whatever is appended after the truncation."""
        log = self._require(topic, partition)
        changed = log.truncate_to(offset)
        if changed:
            self.checkpoint_dir(self._dir_of[(topic, partition)])
        return changed

    def truncate_fully(self, topic: str, partition: int, new_start_offset: int) -> None:
        log = self._require(topic, partition)
        log.truncate_fully(new_start_offset)
        self.checkpoint_dir(self._dir_of[(topic, partition)])

    def _require(self, topic: str, partition: int) -> Log:
        log = self._logs.get((topic, partition))
        if log is None:
            raise LogClosedError(f"no log for {topic}-{partition}")
        return log

    # -- periodic passes --------------------------------------------------------------------

    def run_retention(self, now_ms: int, high_watermarks: Mapping[TopicPartition, int] | None = None) -> int:
        """Delete segments past retention in every log; return how many were deleted.
        ``high_watermarks`` bounds time and size retention per partition (see
        ``retention``); a log missing from it (no hosted partition yet, so no known high
        watermark) is bounded by its log start offset. None: no bound at all."""
        deleted = 0
        for key, log in self.all_logs().items():
            bound = None if high_watermarks is None else high_watermarks.get(key, log.log_start_offset)
            deleted += log.delete_old_segments(now_ms, bound)
        return deleted

    def flush_due(self, now_ms: int) -> list[FlushTask]:
        """The flushes the policy asks for now; the broker runs each ``task.run()`` in a
        worker thread (a flush never blocks appends, to its log or any other)."""
        tasks = []
        for log in self.all_logs().values():
            up_to = log.flush_due(now_ms)
            if up_to is not None:
                tasks.append(FlushTask(log, up_to))
        return tasks

    def run_flush(self, now_ms: int) -> int:
        """Run the due flushes in the calling thread; return how many ran."""
        tasks = self.flush_due(now_ms)
        for task in tasks:
            task.run()
        return len(tasks)

    def remove_deleted(self, now_ms: int) -> int:
        """Erase retired segment files and deleted partition directories whose delay has
        passed; return how many were erased."""
        count = sum(log.remove_deleted_files(now_ms) for log in self.all_logs().values())
        return count + self.remove_deleted_dirs(now_ms)

    def run_cleaner(self, now_ms: int, force: bool = False) -> dict[TopicPartition, CleanerStats]:
        """One compaction pass over each compacted log whose dirty ratio or
        ``max.compaction.lag.ms`` calls for it (``LogCleaner.clean`` decides; all of them
        when ``force``); the broker runs this in the cleaner thread."""
        done = {}
        for tp, log in self.all_logs().items():
            if not log.config.compact_enabled:
                continue
            stats = self.cleaner.clean(log, now_ms, self.cleaner_offset(*tp), force)
            if stats is not None:
                self.set_cleaner_offset(tp[0], tp[1], stats.end_offset)
                done[tp] = stats
        return done

    # -- checkpoints ------------------------------------------------------------------------

    def checkpoint(self) -> None:
        """Write the recovery-point, log-start-offset and cleaner checkpoints of every
        directory."""
        with self._lock:
            for directory in self.log_dirs:
                self.checkpoint_dir(directory)

    def checkpoint_dir(self, directory: str) -> None:
        """Write the directory's three checkpoints from one snapshot of its logs.

        The periodic pass (``checkpoint``), a deletion (``delete_logs``) and a truncation
        call this from different threads; one at a time writes a directory's checkpoints.
        The snapshot is taken under the manager's lock, and the directory's checkpoint lock
        is taken before that one is let go, so checkpoints reach the disk in the order of
        their snapshots: a deletion's checkpoint, without the deleted logs, is never
        overwritten by an older one that names them. Whoever holds the checkpoint lock never
        waits for the manager's lock (the failure report comes after), so the two cannot
        deadlock."""
        with self._lock:
            tps = [tp for tp, d in self._dir_of.items() if d == directory]
            logs = {tp: self._logs[tp] for tp in tps}
            cleaner = {tp: o for tp, o in self._cleaner_offsets.items() if tp in logs}
            writing = self._checkpoint_locks.setdefault(directory, threading.Lock())
            writing.acquire()
        failure = None
        try:
            _write_checkpoints(directory, logs, cleaner)
        except OSError as e:
            failure = e
        finally:
            writing.release()
        if failure is not None:
            self.failure_channel.report(directory, "writing its checkpoints", failure)
            raise failure
        with self._lock:
            self._owed_checkpoints.discard(directory)

    def report_read_error(self, topic: str, partition: int, error: BaseException) -> bool:
        """An I/O ``error`` met reading ``topic-partition``'s log: its directory fails (Kafka's
        ``maybeHandleIOException`` around every read), so its partitions move to other
        replicas while those are still in the ISR, rather than staying led here and answering
        KAFKA_STORAGE_ERROR until the followers drop out. True when this report took the
        directory offline."""
        directory = self._dir_of.get((topic, partition))
        if directory is None:
            return False
        return self.failure_channel.report(directory, f"reading the log of {topic}-{partition}", error)

    def cleaner_offset(self, topic: str, partition: int) -> int:
        """Where the dirty (never cleaned) part of a compacted log starts."""
        return self._cleaner_offsets.get((topic, partition), 0)

    def set_cleaner_offset(self, topic: str, partition: int, offset: int) -> None:
        with self._lock:
            if (topic, partition) in self._logs:
                self._cleaner_offsets[(topic, partition)] = offset


def _write_checkpoints(directory: str, logs: Mapping[TopicPartition, Log],
                       cleaner: dict[TopicPartition, int]) -> None:
    path = os.path.join
    OffsetCheckpointFile(path(directory, RECOVERY_POINT_CHECKPOINT)).write(
        {tp: log.recovery_point for tp, log in logs.items()}
    )
    OffsetCheckpointFile(path(directory, LOG_START_OFFSET_CHECKPOINT)).write(
        {tp: log.log_start_offset for tp, log in logs.items()}
    )
    OffsetCheckpointFile(path(directory, CLEANER_OFFSET_CHECKPOINT)).write(cleaner)


def _read_checkpoint(directory: str, name: str) -> dict[TopicPartition, int]:
    path = os.path.join(directory, name)
    try:
        return OffsetCheckpointFile(path).read()
    except CheckpointError as exc:
        # Safe fallbacks: recover from offset 0, start at the first segment, clean all.
        logger.warning("ignoring malformed checkpoint: %s", exc)
        return {}
