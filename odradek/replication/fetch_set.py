"""``FetchSet``: which of a replica fetcher's partitions go into its next request, kept up to
date from what changed rather than recomputed from all of them (Kafka's
``AbstractFetcherThread`` scans its ``partitionStates`` at each round; a follower of thousands
of quiet partitions then spends its time finding that nothing changed).

The fetcher (``replica_fetcher.py``) owns the partition states (``PartitionFetchState``); it
``touch``es a key whenever its state may have changed: added, removed, truncated, delayed,
fenced, answered. The ``ReplicaManager`` does the same through ``partition_changed`` for
every ``notify`` of a followed partition (its log truncated or its log start offset moved by
retention, which the next request must tell the leader). ``refresh(now)`` then files each
touched key, and each delayed key now due, under one of:

- ``truncating``: in the truncating state and not delayed;
- ``fetchable``: in the fetching state and not delayed (the partitions of the Fetch);
- ``delayed``: key -> ``delayed_until`` (loop time), either state;
- nowhere: fenced, or gone.

The KIP-227 session view (``sent``: key -> the state and request fields last sent to the
leader) turns the touched keys into an incremental request (``incremental``): the fetchable
partitions whose fields differ from those sent, and the sent ones no longer fetchable as
forgotten. A full request (``full``: the session is new or was reset) sends every fetchable
partition. So a round costs O(keys touched + keys delayed), whatever the number followed.

Event-loop only, like the fetcher.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable

from odradek.protocol.generated.fetch_request import ForgottenTopic

TopicPartition = tuple[str, int]


class FetchSet:
    """``partitions``: the fetcher's key -> ``PartitionFetchState`` (shared, not copied);
    ``truncating_state``/``fetching_state``: the state names (``replica_fetcher``)."""

    def __init__(self, partitions: dict, truncating_state: str, fetching_state: str) -> None:
        self.partitions = partitions
        self._truncating_state = truncating_state
        self._fetching_state = fetching_state
        self.truncating: dict[TopicPartition, object] = {}
        self.fetchable: dict[TopicPartition, object] = {}
        self.delayed: dict[TopicPartition, float] = {}
        self._touched: dict[TopicPartition, None] = {}
        self._unsent: dict[TopicPartition, None] = {}  # touched since the last request was built
        # The session view: key -> (state, fields) as last sent to the leader.
        self.sent: dict[TopicPartition, tuple] = {}

    def touch(self, key: TopicPartition) -> None:
        self._touched[key] = None

    def partition_changed(self, key: TopicPartition) -> None:
        """``ReplicaManager.notify`` of a followed partition (``ReplicaManager.watch``)."""
        self._touched[key] = None

    def refresh(self, now: float) -> None:
        """File the touched keys and the delayed ones due by ``now``."""
        for key, until in list(self.delayed.items()):
            if until <= now:
                self._touched[key] = None
        if not self._touched:
            return
        for key in self._touched:
            self.truncating.pop(key, None)
            self.fetchable.pop(key, None)
            self.delayed.pop(key, None)
            self._unsent[key] = None
            state = self.partitions.get(key)
            if state is None:
                continue
            if state.delayed_until > now and state.state in (self._truncating_state, self._fetching_state):
                self.delayed[key] = state.delayed_until
            elif state.state == self._truncating_state:
                self.truncating[key] = state
            elif state.state == self._fetching_state:
                self.fetchable[key] = state
        self._touched.clear()

    def next_due(self) -> float | None:
        """The loop time the first delayed key is due, None when none is delayed."""
        return min(self.delayed.values()) if self.delayed else None

    # --- the session view -----------------------------------------------------------------------
    def full(self, fields: Callable[[TopicPartition, object], tuple]) -> dict:
        """Every fetchable partition, for a full request: key -> (state, fields); the session
        view becomes exactly that."""
        self._unsent.clear()
        self.sent = {key: (state, fields(key, state)) for key, state in self.fetchable.items()}
        return self.sent

    def incremental(self, fields: Callable[[TopicPartition, object], tuple]) -> tuple[dict, list]:
        """What an incremental request carries: ``(changed, forgotten)``, ``changed`` key ->
        (state, fields) for the fetchable partitions new to the session or whose state or
        fields differ from those sent, ``forgotten`` the (key, state as sent) of those sent that
        are no longer fetchable. The session view is updated to match."""
        changed, forgotten = {}, []
        for key in self._unsent:
            state = self.fetchable.get(key)
            previous = self.sent.get(key)
            if state is None:
                if previous is not None:
                    forgotten.append((key, previous[0]))
                    del self.sent[key]
                continue
            now_sent = (state, fields(key, state))
            if previous is None or previous[0] is not state or previous[1] != now_sent[1]:
                changed[key] = self.sent[key] = now_sent
        self._unsent.clear()
        return changed, forgotten


def forgotten_topics(entries: list) -> list[ForgottenTopic]:
    """``entries`` ((key, state as sent)) as ForgottenTopicsData, by name and topic id (the
    leader's session is keyed by topic id from Fetch v13)."""
    topics: dict[tuple, ForgottenTopic] = {}
    for (topic, index), state in entries:
        topic_id = state.topic_id or uuid.UUID(int=0)
        ft = topics.get((topic, topic_id))
        if ft is None:
            ft = topics[(topic, topic_id)] = ForgottenTopic(topic=topic, topic_id=topic_id, partitions=[])
        ft.partitions.append(index)
    return list(topics.values())
