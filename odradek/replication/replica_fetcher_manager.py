"""``ReplicaFetcherManager``: which fetcher copies which followed partition (Kafka's
``ReplicaFetcherManager`` / ``AbstractFetcherManager``).

A partition this broker follows is fetched by the fetcher ``(leader id, fetcher index)``, where
the index spreads a leader's partitions over ``num.replica.fetchers`` fetchers (each one
connection and one request in flight). Fetchers are made when a partition needs one and
stopped once they have no partition left (Kafka's ``shutdownIdleFetcherThreads``).

Callers (the LeaderAndIsr handling): ``add_partitions`` for the partitions this broker just
became a follower of (a partition moving to another leader leaves its old fetcher),
``remove_partitions`` for those it became leader of or stopped hosting; both on the event
loop, and once ``remove_partitions`` returned no fetcher touches those partitions again.
``await shutdown()`` stops every fetcher (the broker stopping).
"""

from __future__ import annotations

import asyncio
import zlib
from collections.abc import Iterable, Mapping

from odradek.replication.replica_fetcher import InitialFetchState, ReplicaFetcher

TopicPartition = tuple[str, int]


class ReplicaFetcherManager:
    def __init__(self, broker) -> None:
        self.broker = broker
        self.num_fetchers = max(1, broker.config["num.replica.fetchers"])
        self.fetchers: dict[tuple[int, int], ReplicaFetcher] = {}
        self._fetcher_of: dict[TopicPartition, tuple[int, int]] = {}
        self._stopping: set[asyncio.Task] = set()

    def fetcher_index(self, key: TopicPartition) -> int:
        """Which of a leader's fetchers takes ``key`` (stable across restarts: a CRC, not
        Python's salted ``hash``)."""
        return (31 * zlib.crc32(key[0].encode()) + key[1]) % self.num_fetchers

    def add_partitions(self, states: Mapping[TopicPartition, InitialFetchState]) -> None:
        """Fetch each partition from its leader, truncating first (see ``ReplicaFetcher``)."""
        for key, initial in states.items():
            fetcher_id = (initial.leader_id, self.fetcher_index(key))
            old = self._fetcher_of.get(key)
            if old is not None and old != fetcher_id:
                self.fetchers[old].remove_partition(key)
            fetcher = self.fetchers.get(fetcher_id)
            if fetcher is None:
                fetcher = self.fetchers[fetcher_id] = ReplicaFetcher(self.broker, *fetcher_id)
                fetcher.start()
            fetcher.add_partition(key, initial)
            self._fetcher_of[key] = fetcher_id
        self._stop_idle()

    def remove_partitions(self, keys: Iterable[TopicPartition]) -> None:
        """Stop fetching ``keys`` (no effect for those not fetched)."""
        for key in keys:
            fetcher_id = self._fetcher_of.pop(key, None)
            if fetcher_id is not None:
                self.fetchers[fetcher_id].remove_partition(key)
        self._stop_idle()

    def fetched(self) -> dict[TopicPartition, int]:
        """The followed partitions and the leader each is fetched from."""
        return {key: fetcher_id[0] for key, fetcher_id in self._fetcher_of.items()}

    def _stop_idle(self) -> None:
        for fetcher_id, fetcher in list(self.fetchers.items()):
            if not fetcher.partitions:
                del self.fetchers[fetcher_id]
                task = asyncio.ensure_future(fetcher.shutdown())
                self._stopping.add(task)
                task.add_done_callback(self._stopping.discard)

    async def shutdown(self) -> None:
        """Stop every fetcher and wait for them (and those stopping already)."""
        fetchers = list(self.fetchers.values())
        self.fetchers.clear()
        self._fetcher_of.clear()
        await asyncio.gather(*(f.shutdown() for f in fetchers), *self._stopping, return_exceptions=True)
