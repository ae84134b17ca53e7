"""``LogDirs``: the log manager's log directories, live and failed (a mixin of
``LogManager``, kept apart because it is one concept: which directories hold the logs, which
one a new log goes to, and what a failed one takes with it). It uses the manager's
``all_log_dirs``, ``failure_channel``, lock and log tables; see ``log_manager`` for the rules.
"""

from __future__ import annotations

import logging

from odradek.storage.checkpoint import TopicPartition

logger = logging.getLogger("odradek.storage.log_manager")


class LogDirs:
    """Live and failed log directories of ``LogManager``."""

    @property
    def log_dirs(self) -> list[str]:
        """The live log directories, in configured order."""
        channel = self.failure_channel
        return [d for d in self.all_log_dirs if not channel.has_offline_log_dir(d)]

    def is_log_dir_online(self, directory: str) -> bool:
        return directory in self.all_log_dirs and not self.failure_channel.has_offline_log_dir(directory)

    def log_dir_of(self, topic: str, partition: int) -> str | None:
        return self._dir_of.get((topic, partition))

    def handle_log_dir_failure(self, directory: str) -> list[TopicPartition]:
        """Drop the logs of a failed directory (Kafka's ``LogManager.handleLogDirFailure``):
        they leave service at once, their descriptors are released; return their partitions.
        The caller stops serving them, and stops the broker when no directory is left."""
        with self._lock:
            gone = sorted(tp for tp, d in self._dir_of.items() if d == directory)
            logs = [self._logs.pop(tp) for tp in gone]
            for tp in gone:
                del self._dir_of[tp]
                self._topic_ids.pop(tp, None)
                self._cleaner_offsets.pop(tp, None)
        for log in logs:
            log.abandon()
        logger.error("log directory %s is offline: %d partition(s) with it", directory, len(gone))
        return gone

    def _io_error_handler(self, directory: str):
        return lambda what, error: self.failure_channel.report(directory, what, error)

    def _next_log_dirs(self) -> list[str]:
        """Kafka's ``nextLogDirs``: the live directories, fewest partitions first (ties in
        configured order)."""
        live = self.log_dirs
        if len(live) <= 1:
            return live  # the common case, without counting every log
        counts = dict.fromkeys(live, 0)
        for d in self._dir_of.values():
            if d in counts:
                counts[d] += 1
        return sorted(live, key=lambda d: counts[d])


    def logs_by_dir(self) -> dict[str, dict[TopicPartition, object]]:
        """Every live directory's logs (DescribeLogDirs), empty directories included."""
        with self._lock:
            out: dict[str, dict[TopicPartition, object]] = {d: {} for d in self.log_dirs}
            for tp, d in self._dir_of.items():
                if d in out:
                    out[d][tp] = self._logs[tp]
        return out
