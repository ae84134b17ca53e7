"""Streaming reads: ``spark.readStream.format("odradek")``.

Offsets are ``{topic: {partition: next_offset}}`` in canonical order (``offsets``). On the
driver, in one long-lived Python process:

- ``initialOffset``: where a new query starts (``startingOffsets``, default latest); cached,
  because Spark asks twice and "latest" may move in between. A query restarted from its
  checkpoint starts from the checkpointed offsets instead and never asks.
- ``latestOffset(start, limit)``: partitions are listed afresh each trigger, so new
  partitions and newly matching topics join, starting from their earliest offset (a new
  partition whose log no longer starts at 0 lost records: ``failOnDataLoss``). With
  ``maxOffsetsPerTrigger`` (Spark's ``ReadMaxRows``) the batch is bounded and shared by lag
  (``rate_limit``). With ``minOffsetsPerTrigger`` no micro-batch starts (``start`` comes
  back unchanged) until that many new records are there or ``maxTriggerDelay`` has passed
  since the last micro-batch (the first trigger never waits), as in Spark's Kafka source.
  Under ``Trigger.AvailableNow`` the latest offsets are frozen when the query starts
  (``prepareForTriggerAvailableNow``), so the query ends once it reaches them; it never
  waits for ``minOffsetsPerTrigger``.
- ``partitions(start, end)``: one ``OffsetRange`` per partition that moved. Spark calls it
  again with the same offsets to replay a batch after a restart, and a range reads the same
  records every time. Partitions that vanished or whose end fell below the start (a topic
  deleted or recreated) are data loss.
- ``commit`` and ``stop`` hold nothing to release: Spark's checkpoint is the source's state.

``read`` runs on executors from a pickled copy (the admin client is not pickled).
"""

from __future__ import annotations

import logging
import time

from pyspark.sql.datasource import DataSourceStreamReader
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadMaxRows, SupportsTriggerAvailableNow

from odradek.spark.offset_range import OffsetRange, split_ranges
from odradek.spark.offset_reader import OffsetReader
from odradek.spark.offsets import OffsetSpec, from_offset_dict, offset_dict
from odradek.spark.options import SourceOptions
from odradek.spark.range_reader import DataLossError, read_range
from odradek.spark.rate_limit import allot

__all__ = ["StreamReader"]

_log = logging.getLogger("odradek.spark")


class StreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    def __init__(self, options: SourceOptions) -> None:
        if options.ending.kind != "latest":
            raise ValueError("endingOffsets/endingTimestamp apply to batch reads only")
        self.options = options
        self.offsets = OffsetReader(options)
        self._initial: dict | None = None
        self._target: dict | None = None
        self._latest: dict | None = None
        self._clock = time.monotonic
        self._last_trigger: float | None = None  # when the last micro-batch was let through

    def initialOffset(self) -> dict:
        if self._initial is None:
            spec = self.options.starting or OffsetSpec("latest")
            partitions = self.offsets.partitions()
            self._initial = offset_dict(self.offsets.resolve(
                spec, partitions, "startingOffsets", self.options.timestamp_strategy))
        return self._initial

    def getDefaultReadLimit(self):
        n = self.options.max_offsets_per_trigger
        return ReadMaxRows(n) if n else ReadAllAvailable()

    def prepareForTriggerAvailableNow(self) -> None:
        self._target = self.offsets.latest(self.offsets.partitions())

    def latestOffset(self, start: dict, limit) -> dict:
        begin = from_offset_dict(start)
        if self._target is not None:
            latest = dict(self._target)
        else:
            latest = self.offsets.latest(self.offsets.partitions())
        self._latest = latest
        new = [tp for tp in latest if tp not in begin]
        if new:
            begin.update(self._new_partitions(new))
        vanished = [tp for tp in begin if tp not in latest]
        if vanished and self._target is None:
            self._data_loss(f"partitions {sorted(map(str, vanished))} are gone")
        reachable = {tp: latest[tp] for tp in latest}
        if self._should_wait(begin, latest):
            return start
        if isinstance(limit, ReadMaxRows):
            end = allot({tp: begin[tp] for tp in reachable}, reachable, limit.max_rows)
        else:
            end = {tp: latest[tp] if latest[tp] > begin[tp] else begin[tp] for tp in reachable}
        if self._target is not None:  # partitions outside the frozen target keep their place
            end.update({tp: o for tp, o in begin.items() if tp not in end})
        for tp, o in latest.items():
            if o < begin[tp]:
                self._data_loss(f"{tp} now ends at offset {o}, before {begin[tp]} (was it recreated?)")
                end[tp] = o
        return offset_dict(end)

    def _should_wait(self, begin: dict, latest: dict) -> bool:
        """``minOffsetsPerTrigger``: too few new records, and ``maxTriggerDelay`` not yet
        passed since the last micro-batch. A micro-batch let through starts the delay anew."""
        minimum = self.options.min_offsets_per_trigger
        if minimum is None or self._target is not None:
            return False
        now = self._clock()
        available = sum(max(0, o - begin[tp]) for tp, o in latest.items() if tp in begin)
        overdue = self._last_trigger is None or (now - self._last_trigger) * 1000 >= self.options.max_trigger_delay_ms
        if available < minimum and not overdue:
            return True
        self._last_trigger = now
        return False

    def _new_partitions(self, partitions) -> dict:
        earliest = self.offsets.earliest(partitions)
        for tp, o in earliest.items():
            if o != 0:
                self._data_loss(f"new partition {tp} starts at offset {o}, not 0: some records were missed")
        return earliest

    def reportLatestOffset(self) -> dict | None:
        return None if self._latest is None else offset_dict(self._latest)

    def partitions(self, start: dict, end: dict) -> list[OffsetRange]:
        begin, until = from_offset_dict(start), from_offset_dict(end)
        new = [tp for tp in until if tp not in begin]
        if new:
            begin.update(self.offsets.earliest(new))
        ranges = []
        for tp, stop in until.items():
            if stop < begin[tp]:
                self._data_loss(f"{tp}: offsets went back from {begin[tp]} to {stop}")
                continue
            ranges.append(OffsetRange(tp.topic, tp.partition, begin[tp], stop))
        return split_ranges(ranges, self.options.min_partitions, self.options.max_records_per_partition)

    def read(self, partition: OffsetRange):
        if not isinstance(partition, OffsetRange):  # Spark's placeholder for no partitions
            return iter(())
        return read_range(self.options.fetch_config(), partition)

    def commit(self, end: dict) -> None:
        """Nothing to do: progress lives in Spark's checkpoint."""

    def stop(self) -> None:
        self.offsets.close()

    def _data_loss(self, message: str) -> None:
        if self.options.fail_on_data_loss:
            raise DataLossError(message + ". Set failOnDataLoss=false to go on without them.")
        _log.warning("%s (failOnDataLoss=false: going on)", message)
