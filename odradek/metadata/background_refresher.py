"""`BackgroundRefresher`: the `MetadataCache`'s store reads that must not run on the caller's
thread, queued and run on one daemon thread of its own (started on first use).

Two kinds of work are queued, each coalesced until the thread takes it:

* partition states whose watches fired (topic -> partitions), which the store reported on its
  callback thread: one blocking read per change there kept a broker's image tens of seconds
  behind in a failover of 10,000 partitions; the thread reads all the queued ones at once;
* names of topics a controller request spoke of before the cache had read their assignments
  (`MetadataCache.take_controller_states`, called on the event loop): as a Kafka broker learns
  of a topic from the controller's UpdateMetadata, the thread reads the topic list and those
  assignments then, instead of waiting for the topic list's watch, which may come later.

A read failing with `StoreError` is queued again and tried after `REFRESH_RETRY_S` (a watch
that only a successful read sets again would otherwise be lost); any other error is logged,
and the thread lives on.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

from odradek.metadata.errors import StoreError

log = logging.getLogger(__name__)

REFRESH_RETRY_S = 1.0  # after a failed read


class BackgroundRefresher:
    """Runs ``refresh_states(fired)`` and ``learn_topics(names)`` on its own thread."""

    def __init__(
        self,
        refresh_states: Callable[[dict[str, set[int]]], None],
        learn_topics: Callable[[set[str]], None],
    ) -> None:
        self._refresh_states = refresh_states
        self._learn_topics = learn_topics
        self._fired: dict[str, set[int]] = {}
        self._topics: set[str] = set()
        self._lock = threading.Lock()  # never held while the callbacks run
        self._event = threading.Event()
        self._thread: threading.Thread | None = None
        self._closed = False

    def state_fired(self, topic: str, partition: int) -> None:
        with self._lock:
            self._fired.setdefault(topic, set()).add(partition)
        self._wake()

    def topics_named(self, names: set[str]) -> None:
        with self._lock:
            self._topics |= names
        self._wake()

    def close(self) -> None:
        """The thread ends when it next wakes; queued work is dropped."""
        self._closed = True
        self._event.set()

    def _wake(self) -> None:
        with self._lock:
            if self._thread is None and not self._closed:
                self._thread = threading.Thread(
                    target=self._run, name="metadata-refresher", daemon=True)
                self._thread.start()
        self._event.set()

    def _run(self) -> None:
        while True:
            self._event.wait()
            with self._lock:
                self._event.clear()
                fired, self._fired = self._fired, {}
                topics, self._topics = self._topics, set()
            if self._closed:
                return
            try:
                if topics:
                    self._learn_topics(topics)
                if fired:
                    self._refresh_states(fired)
            except StoreError as e:
                log.warning("reading metadata failed (%s); trying again in %.1f s", e, REFRESH_RETRY_S)
                time.sleep(REFRESH_RETRY_S)
                self._requeue(fired, topics)
            except Exception:  # noqa: BLE001 - the thread lives on; a reconnection re-runs
                log.exception("reading metadata failed (%d topics' states, %d topics)",
                              len(fired), len(topics))

    def _requeue(self, fired: dict[str, set[int]], topics: set[str]) -> None:
        with self._lock:
            for topic, partitions in fired.items():
                self._fired.setdefault(topic, set()).update(partitions)
            self._topics |= topics
        self._event.set()
