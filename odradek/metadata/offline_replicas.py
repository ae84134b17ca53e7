"""`OfflineReplicas`: which replicas the controller last said are offline, per partition.

A replica is offline when its broker is down or, with its broker up, when it sits in a log
directory that failed there (``log.dirs``: the broker's ``LogDirFailureChannel`` reports it,
the controller learns which replicas through ``/log_dir_event_notification`` and the
broker's KAFKA_STORAGE_ERROR answers). ZooKeeper holds the first (``/brokers/ids``) but not
the second: only the controller knows it, and tells every broker in UpdateMetadata's
``offline_replicas`` (v4+). Kafka's ``MetadataCache`` keeps that list with each partition
state and answers it in Metadata's ``offline_replicas`` (v5+); this is odradek's copy of it,
beside the watch-driven `MetadataImage`, which has no place for it.

Contract: `update` takes the partition states of one UpdateMetadata that the broker accepted
(controller and broker epochs checked); each named partition's list replaces the one held,
an empty list clears it, and a partition shown being deleted (leader -2, Kafka's
``LeaderDuringDelete``) is forgotten, as Kafka's cache removes it. Partitions not named keep
their lists. `of` answers ``()`` for a partition never named. A controller sends every
partition to a broker that (re)starts and to all brokers when it takes over, so the lists
never outlive a broker's view for long.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

LEADER_DURING_DELETE = -2


@dataclass(frozen=True, slots=True)
class ReportedPartition:
    """One partition state of an UpdateMetadata, as far as offline replicas go."""

    topic: str
    partition: int
    leader: int
    offline_replicas: tuple[int, ...]


class OfflineReplicas:
    """The controller's offline replicas per ``(topic, partition)``; see the module docstring.

    Updated and read on the broker's event loop; `update` swaps in a new dict, so a reader
    on another thread sees either the old lists or the new ones."""

    def __init__(self) -> None:
        self._by_partition: dict[tuple[str, int], tuple[int, ...]] = {}

    def update(self, states: Iterable[ReportedPartition]) -> None:
        held = dict(self._by_partition)
        for s in states:
            key = (s.topic, s.partition)
            if s.leader == LEADER_DURING_DELETE or not s.offline_replicas:
                held.pop(key, None)
            else:
                held[key] = tuple(s.offline_replicas)
        if held != self._by_partition:  # (unchanged: the same snapshot, see `snapshot`)
            self._by_partition = held

    @property
    def snapshot(self) -> Mapping[tuple[str, int], tuple[int, ...]]:
        """The offline replicas now: a mapping replaced by `update` when they change, never
        changed in place, so a caller may tell by identity whether they changed since."""
        return self._by_partition

    def of(self, topic: str, partition: int) -> tuple[int, ...]:
        return self._by_partition.get((topic, partition), ())
