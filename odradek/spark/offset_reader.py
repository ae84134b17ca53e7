"""Driver side: which topic-partitions a source reads, and offsets looked up in odradek.

One ``OffsetReader`` per reader object on the driver, holding a synchronous ``AdminClient``
opened on first use with the source's ``kafka.*`` settings (never pickled: ``__getstate__``
drops it, as the reader travels to executors). Partitions come from Metadata (``subscribe``:
those topics that exist; ``subscribePattern``: every non-internal topic whose whole name
matches; ``assign``: as given, each of which must exist, or the query fails at once naming
those that do not); offsets from ListOffsets at each partition's leader, all leaders at once.

With ``kafka.isolation.level=read_committed`` offsets are looked up at that isolation level
(ListOffsets ``isolation_level`` 1, through the process's pooled client): "latest" is then
the last stable offset, below any transaction still open, so a micro-batch never plans to
read records whose fate is not known yet.

Each lookup is bounded by ``kafka.default.api.timeout.ms``; after a retriable failure it is
tried again ``fetchOffset.numRetries`` times, ``fetchOffset.retryIntervalMs`` apart (Spark's
Kafka source's options). Before the first, the admin client waits up to
``kafka.default.api.timeout.ms`` for a bootstrap server to accept a connection, and fails
with ``BrokersUnreachable`` (one line, not retried: the whole timeout went to waiting)
when none did (``reachability``).
"""

from __future__ import annotations

import logging
import re
import time

from odradek.client import AdminClient, KafkaError
from odradek.client.offset_fetcher import OffsetFetcher
from odradek.client.topic_partition import TopicPartition
from odradek.spark import client_pool
from odradek.spark.offsets import EARLIEST, LATEST, OffsetSpec
from odradek.spark.options import SourceOptions
from odradek.spark.reachability import wait_reachable

__all__ = ["OffsetReader"]

_log = logging.getLogger("odradek.spark")
_API_TIMEOUT = "kafka.default.api.timeout.ms"


class OffsetReader:
    def __init__(self, options: SourceOptions) -> None:
        self.options = options
        self._admin: AdminClient | None = None
        self._reported: set[str] = set()  # subscribed topics found missing, warned of once

    def __getstate__(self) -> dict:
        return {"options": self.options, "_admin": None, "_reported": set()}

    @property
    def admin(self) -> AdminClient:
        if self._admin is None:
            o = self.options
            config = {"client_id": "odradek-spark-driver", **dict(o.cluster_config)}
            wait_reachable(o.bootstrap, o.api_timeout_ms, _API_TIMEOUT)
            self._admin = AdminClient(o.bootstrap, default_api_timeout_ms=o.api_timeout_ms, **config)
        return self._admin

    def _list_offsets_committed(self, specs: dict) -> dict:
        """ListOffsets at read_committed, with the pooled client of this process."""
        o = self.options
        cluster = client_pool.cluster(o.bootstrap, o.cluster_config, (o.api_timeout_ms, _API_TIMEOUT))
        fetcher = OffsetFetcher(cluster, o.isolation_level)
        return client_pool.loop_thread().run(fetcher.list_offsets(specs, o.api_timeout_ms / 1000))

    def _call(self, method: str, *args):
        """``admin.<method>(*args)``, tried again after retriable failures (see above)."""
        attempt = 0
        if method == "list_offsets" and self.options.isolation_level:
            call = self._list_offsets_committed
        else:
            def call(*a):
                return getattr(self.admin, method)(*a)
        while True:
            try:
                return call(*args)
            except KafkaError as e:
                if not e.retriable or attempt >= self.options.offset_retries:
                    raise
                attempt += 1
                _log.warning("%s failed (%s); attempt %d of %d in %d ms", method, e, attempt + 1,
                             self.options.offset_retries + 1, self.options.offset_retry_interval_ms)
                time.sleep(self.options.offset_retry_interval_ms / 1000)

    def close(self) -> None:
        if self._admin is not None:
            self._admin.close()
            self._admin = None

    # --- partitions ----------------------------------------------------------------------
    def partitions(self) -> list[TopicPartition]:
        """The topic-partitions to read now, sorted."""
        o = self.options
        topics = self._call("describe_topics", None)
        if o.assign:
            return self._assigned(topics)
        if o.subscribe:
            names = [t for t in o.subscribe if t in topics]
            self._report_missing([t for t in o.subscribe if t not in topics])
        else:
            pattern = re.compile(o.pattern)
            names = [t for t, d in topics.items() if not d.is_internal and pattern.fullmatch(t)]
        return sorted(TopicPartition(t, p.partition) for t in names for p in topics[t].partitions)

    def _assigned(self, topics: dict) -> list[TopicPartition]:
        missing = [tp for tp in self.options.assign
                   if tp.topic not in topics or tp.partition >= len(topics[tp.topic].partitions)]
        if missing:
            counts = "; ".join(f"topic {t!r} does not exist" if t not in topics
                               else f"topic {t!r} has {len(topics[t].partitions)} partitions"
                               for t in sorted({tp.topic for tp in missing}))
            raise ValueError(f"assign: partitions {[str(tp) for tp in missing]} do not exist ({counts})")
        return sorted(self.options.assign)

    def _report_missing(self, missing: list[str]) -> None:
        """A subscribed topic that does not exist gives no rows, as it would if empty; say so
        once (a streaming query reads it from its start once it is created)."""
        new = sorted(set(missing) - self._reported)
        if new:
            _log.warning("subscribed topics %s do not exist: nothing to read from them", new)
        self._reported = set(missing)

    # --- offsets -------------------------------------------------------------------------
    def earliest(self, partitions) -> dict[TopicPartition, int]:
        return self._lookup({tp: EARLIEST for tp in partitions})

    def latest(self, partitions) -> dict[TopicPartition, int]:
        return self._lookup({tp: LATEST for tp in partitions})

    def _lookup(self, specs: dict) -> dict[TopicPartition, int]:
        if not specs:
            return {}
        answers = self._call("list_offsets", specs)
        return {tp: answers[tp].offset for tp in specs}

    def resolve(self, spec: OffsetSpec, partitions, option: str, strategy: str = "error") -> dict[TopicPartition, int]:
        """The offsets ``spec`` names for ``partitions``. Explicit offsets must name every
        partition read (as Spark's Kafka source requires) and may not name others;
        ``strategy`` is for timestamps no record reaches (see ``by_timestamp``)."""
        partitions = sorted(partitions)
        if spec.kind == "earliest":
            return self.earliest(partitions)
        if spec.kind == "latest":
            return self.latest(partitions)
        if spec.kind == "timestamp":
            return self.by_timestamp({tp: spec.timestamp for tp in partitions}, option, strategy)
        values = dict(spec.values)
        missing = [str(tp) for tp in partitions if tp not in values]
        extra = [str(tp) for tp in values if tp not in set(partitions)]
        if missing or extra:
            raise ValueError(f"{option} must name exactly the partitions read: "
                             f"missing {missing or 'none'}, not read {extra or 'none'}")
        if spec.kind == "timestamps":
            return self.by_timestamp(values, option, strategy)
        specials = {tp: o for tp, o in values.items() if o in (EARLIEST, LATEST)}
        resolved = self._lookup(specials)
        return {tp: resolved.get(tp, o) for tp, o in values.items()}

    def by_timestamp(self, stamps: dict, option: str, strategy: str = "error") -> dict[TopicPartition, int]:
        """The first offset whose timestamp is at or after each partition's timestamp; where
        no record is that recent, the end of the log with ``strategy`` "latest", else an
        error (Spark's default)."""
        answers = self._call("list_offsets", dict(stamps)) if stamps else {}
        out, late = {}, []
        for tp in stamps:
            answer = answers.get(tp)
            if answer is None:
                late.append(tp)
            else:
                out[tp] = answer.offset
        if late:
            if strategy != "latest":
                raise ValueError(f"{option}: no record at or after the timestamp in {sorted(map(str, late))} "
                                 "(set startingOffsetsByTimestampStrategy=latest to start at the end instead)")
            out.update(self.latest(late))
        return out
