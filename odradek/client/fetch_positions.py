"""Where a consumer starts reading a partition that has no position yet (Kafka's
``KafkaConsumer.updateFetchPositions``: ``refreshCommittedOffsetsIfNeeded``, then
``resetPositionsIfNeeded``), for client/consumer.py.

In order, for the assigned partitions without a position:

1. a partition the cluster's metadata says does not exist (its topic is unknown, or has fewer
   partitions) is left without one: ``absent`` holds it, one warning names it (once), the
   metadata is asked again (coalesced), and it is looked at anew on the next call;
2. with a group, the group's committed offset, asked once per partition
   (``committed_checked``; a ``seek`` or a reset request marks a partition checked, so the
   committed offset does not override what the application chose);
3. else the partition's reset policy (``seek_to_beginning`` / ``seek_to_end``) or
   ``auto_offset_reset``: a ListOffsets lookup of earliest or latest; "none" raises
   ``NoOffsetForPartitionError``.
"""

from __future__ import annotations

import logging

from odradek.client.errors import KafkaError, NoOffsetForPartitionError
from odradek.client.offset_fetcher import EARLIEST, LATEST
from odradek.client.subscription_state import NONE
from odradek.client.topic_partition import TopicPartition
from odradek.protocol.generated.error_codes import ErrorCode

_log = logging.getLogger("odradek.client.consumer")  # the consumer's warnings, as before the split

_SPECS = {"earliest": EARLIEST, "latest": LATEST}


class FetchPositions:
    """The position lookups of one consumer: its ``ClusterClient``, ``SubscriptionState``,
    ``OffsetFetcher``, ``GroupCoordinatorClient`` (or None) and API timeout (seconds)."""

    def __init__(self, cluster, subs, offsets, coordinator, api_timeout: float) -> None:
        self._cluster = cluster
        self._subs = subs
        self._offsets = offsets
        self._coordinator = coordinator
        self._api_timeout = api_timeout
        self.committed_checked: set[TopicPartition] = set()
        self.absent: set[TopicPartition] = set()  # assigned, not in the metadata (warned once)

    async def update(self) -> None:
        """Give every assigned partition that has none a position (see the module's
        docstring)."""
        missing = await self._existing(self._subs.positions_missing())
        if not missing:
            return
        if self._coordinator is not None:
            unchecked = [tp for tp in missing if tp not in self.committed_checked]
            if unchecked:
                committed = await self._coordinator.fetch_offsets(unchecked)
                for tp in unchecked:
                    self.committed_checked.add(tp)
                    if tp in committed:
                        self._subs.seek(tp, committed[tp].offset)
                missing = self._subs.positions_missing()
        specs = {}
        no_policy = []
        for tp in missing:
            how = self._subs.assignment[tp].reset or self._subs.default_reset
            if how == NONE:
                no_policy.append(tp)
            else:
                specs[tp] = _SPECS[how]
        if no_policy:
            raise NoOffsetForPartitionError(no_policy)
        found = await self._offsets.list_offsets(specs, self._api_timeout)
        for tp, answer in found.items():
            state = self._subs.assignment.get(tp)
            if state is not None and state.position is None and answer is not None:
                self._subs.seek(tp, answer.offset)

    async def _existing(self, partitions: list[TopicPartition]) -> list[TopicPartition]:
        """Of ``partitions``, all but those the metadata says do not exist (see the module's
        docstring); one refresh first when it knows nothing yet of a topic."""
        if not partitions:
            return partitions
        cluster = self._cluster
        topics = {tp.topic for tp in partitions}
        cluster.add_topics(topics)
        meta = cluster.metadata
        if any(t not in meta.topics and t not in meta.errors for t in topics):
            try:
                meta = await cluster.refresh(cluster.topics)
            except KafkaError as e:
                if not e.retriable:
                    raise
                return partitions  # the lookup's own retries take over
        absent = [tp for tp in partitions if meta.partition(tp.topic, tp.partition) is None and (
            tp.topic in meta.topics or meta.errors.get(tp.topic) == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)]
        self.absent &= set(self._subs.assignment)
        self.absent -= set(partitions) - set(absent)
        if absent:
            cluster.request_update()  # coalesced, at most one per retry_backoff
            new = sorted(set(absent) - self.absent)
            if new:
                _log.warning("assigned partitions %s do not exist (%s): no records for them until they are created",
                             ", ".join(map(str, new)), "; ".join(_partition_count(meta, t)
                                                                for t in sorted({tp.topic for tp in new})))
                self.absent.update(new)
        return [tp for tp in partitions if tp not in set(absent)]


def _partition_count(meta, topic: str) -> str:
    count = meta.partition_count(topic)
    return f"topic {topic!r} does not exist" if count is None else f"topic {topic!r} has {count} partitions"
