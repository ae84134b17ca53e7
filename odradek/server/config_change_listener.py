"""Dynamic config changes reaching every broker: Kafka's ``/config/changes`` notifications.

A broker that stores a topic's or a broker's dynamic configs (AlterConfigs) then creates a
sequential znode ``/config/changes/config_change_<n>`` holding
``{"version":2,"entity_path":"topics/<t>"}`` (or ``brokers/<id>``, ``brokers/<default>``, and
for client quotas ``users/<u>``, ``users/<u>/clients/<c>``, ``clients/<c>``, for a group's
configs ``groups/<g>``, ``server/group_configs.py``),
as Kafka's ``AdminZkClient.changeConfigs`` does. Every broker watches the children of
``/config/changes`` and, for each notification newer than the last it processed, re-reads the
entity's configs from the store and applies them (``ConfigChangeListener``): a topic's to its
partitions' logs, a broker's (its own id or ``<default>``) to the broker's effective config.
So a change made through any broker applies on all of them, as in Kafka. Applying is
idempotent: the broker that made the change applies it at once and again on its own
notification.

Threads. A pass reads the store on the listener's own worker thread (Kafka's notification
thread), never on the event loop: with ZooKeeper each read is a round trip, retried for
seconds while the connection is lost, and the loop must keep serving clients meanwhile. The
pass then applies what it read on the loop, in the notifications' order, where the state that
handlers read lives (``ReplicaManager.update_config``, ``QuotaCache.update``,
``Broker.apply_dynamic_broker_config``). The one exception is a topic's config, which
``MetadataCache.refresh_topic_config`` re-reads and publishes from the worker: the cache is
built to be refreshed from any thread (its watches do so from the store's). One pass runs at
a time; a watch firing during a pass makes exactly one more pass after it (coalesced). A read
that a change of this broker's own overtakes (applied at once on the loop) is corrected by the
notification of that change, which follows.

Failures. One entity that cannot be read or applied is logged and skipped; the others still
apply. A store that cannot be reached (``StoreUnavailableError``) ends the pass where it was:
the notifications from there on are read again by the next pass, which ZooKeeper's
reconnection starts (the store re-runs its watches then).

Notifications older than the newest `KEEP_NOTIFICATIONS` are deleted by the broker that
writes a new one (Kafka deletes them by age, 15 minutes; the store keeps no creation time).
At start a broker applies once each entity that the notifications already there name (it
has just read every config, but a change may have been written meanwhile), then follows.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

from odradek.metadata import layout
from odradek.metadata.errors import MetadataError, NoNodeError, StoreClosedError, StoreUnavailableError
from odradek.server import client_quota_configs

log = logging.getLogger("odradek.config")

KEEP_NOTIFICATIONS = 100
_NAME = layout.CONFIG_CHANGE_PREFIX.rsplit("/", 1)[1]

Entity = tuple[str, str]  # ("topics", "t"), ("brokers", "<default>"), ("users", "u/clients/c")
Change = Callable[[], None]  # applies, on the loop, what the worker read for one entity


def sequence_of(name: str) -> int | None:
    """The sequence number of a notification's znode name, or None for another name."""
    if not name.startswith(_NAME) or not name[len(_NAME):].isdigit():
        return None
    return int(name[len(_NAME):])


def entity_of(data: bytes) -> Entity | None:
    """``(kind, name)`` of a notification (``("topics", "t")``, ``("brokers", "1")``), or None
    for a malformed one."""
    try:
        path = json.loads(data)["entity_path"]
        kind, _, name = path.partition("/")
    except (ValueError, KeyError, TypeError, AttributeError):
        return None
    return (kind, name) if kind in ("topics", "brokers", "users", "clients", "groups") and name else None


class ConfigChangeListener:
    """Watches ``/config/changes`` for ``broker`` and applies what the notifications name.

    ``last_seen`` (the sequence number of the last notification processed) is read and set
    only between passes, on the loop; the worker gets it as an argument."""

    def __init__(self, broker) -> None:
        self.broker = broker
        self.store = broker.metadata.store
        self.last_seen = -1
        self._watch = None
        self._closed = False
        self._again = False  # a watch fired since the running pass listed the notifications
        self._task: asyncio.Task | None = None
        self._worker = ThreadPoolExecutor(1, thread_name_prefix="odradek-config-changes")

    async def start(self) -> None:
        """Follow new notifications, and apply the entities that those already there name
        once each, as Kafka's listener does at start: one written while this broker was
        reading its configs would otherwise be missed until its entity changes again.
        Returns once that first pass (and any a watch asked for meanwhile) is done."""
        loop = self.broker.loop
        watch = await loop.run_in_executor(self._worker, self.store.watch_children, layout.CONFIG_CHANGES,
                                           lambda _: self._wake(loop))
        if self._closed:  # closed while the watch was being set
            watch.cancel()
            return
        self._watch = watch
        self._schedule()
        if self._task is not None:  # None: the broker is stopping already
            await asyncio.wait([self._task])  # not cancelled with start(): close() ends it

    def close(self) -> None:
        """Stop: no pass starts after this, and one under way applies nothing more."""
        self._closed = True
        if self._watch is not None:
            self._watch.cancel()
        if self._task is not None:
            self._task.cancel()
        self._worker.shutdown(wait=False, cancel_futures=True)

    def notify(self, entity_path: str) -> None:
        """Announce a change of ``entity_path`` (``topics/<t>``, ``brokers/<id>``) to every
        broker, and delete old notifications. Runs off the event loop (a store write)."""
        self.store.create(layout.CONFIG_CHANGE_PREFIX, layout.encode_config_change(entity_path),
                          sequential=True, make_parents=True)
        names = self._pending_names()
        for _, name in names[:-KEEP_NOTIFICATIONS]:
            try:
                self.store.delete(f"{layout.CONFIG_CHANGES}/{name}")
            except (NoNodeError, MetadataError):
                pass

    def _pending_names(self, after: int = -1) -> list[tuple[int, str]]:
        """``(sequence, name)`` of the notifications newer than ``after``, oldest first."""
        try:
            children = self.store.children(layout.CONFIG_CHANGES)
        except NoNodeError:
            return []
        return sorted((seq, name) for name in children if (seq := sequence_of(name)) is not None and seq > after)

    # --- passes (scheduling on the loop) ---------------------------------------------------
    def _wake(self, loop: asyncio.AbstractEventLoop) -> None:
        """The watch's callback, on the store's thread: ask the loop for a pass."""
        try:
            loop.call_soon_threadsafe(self._schedule)
        except RuntimeError:  # the loop is closed: the broker has stopped
            pass

    def _stopped(self) -> bool:
        return self._closed or self.broker.stopping

    def _schedule(self) -> None:
        """Ask for a pass (on the loop): one starts now if none runs, else one more follows
        the running one, however many times this is called meanwhile."""
        if self._stopped():
            return
        self._again = True
        if self._task is None or self._task.done():
            self._task = self.broker.loop.create_task(self._run())

    async def _run(self) -> None:
        while self._again and not self._stopped():
            self._again = False
            try:
                await self._pass()
            except Exception:  # a bug here must not end the listener: the next watch retries
                log.exception("the config change notifications could not be processed")

    async def _pass(self) -> None:
        """Read on the worker, then apply on the loop: every notification newer than
        ``last_seen``, in order."""
        last_seen, changes = await self.broker.loop.run_in_executor(self._worker, self._read_pass, self.last_seen)
        if self._stopped():  # the broker stopped while the worker read: touch nothing of it
            return
        for entity, change in changes:
            try:
                change()
            except Exception:  # one bad config must not stop the changes after it
                log.exception("could not apply the config change of %s/%s", *entity)
        self.last_seen = last_seen

    # --- reading (on the worker) -----------------------------------------------------------
    def _read_pass(self, last_seen: int) -> tuple[int, list[tuple[Entity, Change]]]:
        """Read what the notifications newer than ``last_seen`` name, each entity once (the
        read is of its configs now, later than every notification of it in this pass).
        Returns the last notification read and the changes to apply, in order. An
        unreachable store stops the pass before the notification it could not read."""
        changes: list[tuple[Entity, Change]] = []
        named: set[Entity] = set()
        try:
            for seq, name in self._pending_names(last_seen):
                if self._stopped():
                    break
                entity = self._entity_at(name)
                if entity is not None and entity not in named:
                    named.add(entity)
                    change = self._read_entity(*entity)
                    if change is not None:
                        changes.append((entity, change))
                last_seen = seq
        except (StoreUnavailableError, StoreClosedError) as e:
            if not self._stopped():
                log.warning("config change notifications after %d wait for the store to come back: %s",
                            last_seen, e)
        return last_seen, changes

    def _entity_at(self, name: str) -> Entity | None:
        """The entity notification ``name`` names; None when it is gone (deleted meanwhile,
        too old to matter) or malformed."""
        try:
            data, _ = self.store.get(f"{layout.CONFIG_CHANGES}/{name}")
        except NoNodeError:
            return None
        entity = entity_of(data)
        if entity is None:
            log.warning("ignoring the malformed config change notification %s", name)
        return entity

    def _read_entity(self, kind: str, name: str) -> Change | None:
        """Read one entity's configs; the change that applies them, or None when there is
        nothing to apply here (or it could not be read: logged). Raises
        StoreUnavailableError and StoreClosedError, which end the pass."""
        try:
            if kind == "topics":
                return self._read_topic(name)
            if kind in ("users", "clients"):
                return self._read_quotas(f"{kind}/{name}")
            if kind == "groups":
                return self.broker.group_configs.read_change(name)
            if name == layout.broker_config_entity(None) or name == str(self.broker.broker_id):
                return self._read_broker(name)
        except (StoreUnavailableError, StoreClosedError):
            raise
        except Exception:  # one bad config must not stop the notifications after it
            log.exception("could not apply the config change of %s/%s", kind, name)
        return None

    def _read_topic(self, name: str) -> Change | None:
        broker = self.broker
        if broker.metadata_image().topic(name) is None:
            return None
        broker.metadata.cache.refresh_topic_config(name)  # thread-safe: see the module docstring

        def apply() -> None:
            if broker.metadata_image().topic(name) is not None:
                broker.replica_manager.update_config(name, broker.topics.topic_log_config(name))
                log.info("applied the dynamic configs of topic %s", name)
        return apply

    def _read_broker(self, name: str) -> Change:
        broker = self.broker
        dynamic = broker.dynamic_broker_config()

        def apply() -> None:
            broker.apply_dynamic_broker_config(dynamic)
            log.info("applied the dynamic broker configs of %s", name)
        return apply

    def _read_quotas(self, path: str) -> Change | None:
        """Re-read one client quota entity (``users/<u>``, ``users/<u>/clients/<c>``,
        ``clients/<c>``; server/client_quota_configs.py)."""
        entity = client_quota_configs.entity_of_path(path)
        if entity is None:
            log.warning("ignoring the config change of an unknown quota entity %s", path)
            return None
        quotas = client_quota_configs.quotas_of(client_quota_configs.read_config(self.store, path))

        def apply() -> None:
            self.broker.client_quotas.update(entity, quotas)
            log.info("applied the client quotas of %s", path)
        return apply
