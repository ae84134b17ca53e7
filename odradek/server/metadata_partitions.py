"""``MetadataPartitionsCache``: the ``partitions`` of each topic's Metadata answer, built once and
reused while what they are built from stays the same.

Building them is Python work per partition (~5-10 us: its replicas, leader, ISR and offline
replicas as response objects): ~50-100 ms for a Metadata request naming 10,000 partitions,
which 300 consumers joining a group send a few times each. The inputs are:

- the topic's ``TopicAssignment`` and its partition states in the image (``MetadataImage``
  is copy-on-write: an image change replaces the mappings of the topics it changed and shares
  the others, so each is the same object until its topic changes);
- the live brokers, as a frozenset of ids (compared by value);
- the controller's offline replicas (``OfflineReplicas.snapshot``: a mapping replaced, never
  changed, when an UpdateMetadata changes it).

An entry is reused only when all of them are the very objects it was built from (``is``; the
live set by ``==``), so an answer never lags the image it is given. Entries of topics gone
from the image are dropped by ``prune``. The lists handed out are shared by every response
that uses them: callers must only encode them, never change them (the topic objects that
hold them are made per response, since authorized operations are filled in per principal).

Used on the event loop only (the Metadata handler): no lock.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping


class MetadataPartitionsCache:
    def __init__(self) -> None:
        # topic name -> ((assignment, states, live ids, offline snapshot), partitions)
        self._by_topic: dict[str, tuple[tuple, list]] = {}

    def __len__(self) -> int:
        return len(self._by_topic)

    def partitions(self, assignment, states: Mapping | None, live: frozenset, offline: Mapping,
                   build: Callable[[], list]) -> list:
        """The partitions answered for ``assignment``'s topic: those built last time for the
        same inputs, else ``build()``'s (kept for next time)."""
        entry = self._by_topic.get(assignment.name)
        if entry is not None:
            (a, s, l, o), built = entry
            if a is assignment and s is states and o is offline and l == live:
                return built
        built = build()
        self._by_topic[assignment.name] = ((assignment, states, live, offline), built)
        return built

    def prune(self, topics: Collection[str]) -> None:
        """Drop the entries of topics not in ``topics`` (the image's: deleted ones)."""
        for name in [n for n in self._by_topic if n not in topics]:
            del self._by_topic[name]
