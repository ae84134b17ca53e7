"""Persistent watches for ``ZooKeeperStore``, built from ZooKeeper's one-shot watches (kazoo
2.11 has no ``addWatch``).

When a watch fires it is set again *before* the callback runs, and the callback re-reads, so
no change is missed, only coalesced (a data watch's ``exists`` is sent, not awaited: requests
of one session are served in order, so it is set before the callback's read is answered). A
children watch on a path that does not exist waits for the path to appear with an ``exists``
watch. A watch dropped with its session (an event of type NONE) is set again by the store on
reconnection (``ZooKeeperStore._on_reconnected``).
"""

from __future__ import annotations

import logging

from kazoo import exceptions as kz
from kazoo.protocol.states import EventType, WatchedEvent

from odradek.metadata.store import WatchCallback, WatchHandle

log = logging.getLogger("odradek.metadata.zookeeper_store")  # the store's: one logger for its messages


class Rewatch:
    """A persistent watch of ``store`` (a ``ZooKeeperStore``) made of one-shot watches."""

    def __init__(self, store, kind: str, path: str, callback: WatchCallback):
        self.store, self.kind, self.path, self.callback = store, kind, path, callback
        self.handle = WatchHandle(lambda: store._forget(self))

    def arm(self) -> None:
        client = self.store._client
        if self.kind == "data":
            client.exists(self.path, watch=self.fired)
            return
        try:
            client.get_children(self.path, watch=self.fired)
        except kz.NoNodeError:
            if client.exists(self.path, watch=self.fired) is not None:
                client.get_children(self.path, watch=self.fired)  # created meanwhile

    def arm_async(self):
        """Set a data watch without waiting: the kazoo async result of its ``exists``."""
        return self.store._client.exists_async(self.path, watch=self.fired)

    def fired(self, event: WatchedEvent) -> None:
        if self.handle.cancelled or event.type == EventType.NONE:
            return  # NONE: kazoo dropped the watch with its session; _on_new_session re-arms
        try:
            if self.kind == "data":
                # not waited for: ZooKeeper answers one session's requests in order, so the
                # watch is set before the callback's read is served, and the callback thread
                # is not held a round trip per change (10,000 state changes, 10,000 waits)
                self.arm_async().rawlink(self._armed)
            else:
                self.arm()
        except Exception as exc:  # the connection is gone: re-armed on reconnection
            log.debug("could not re-arm the watch on %s: %r", self.path, exc)
        if self.kind == "children" and event.type == EventType.CHANGED:
            return  # the existence watch saw a data change, which children watches ignore
        self.run()

    def _armed(self, result) -> None:
        if result.exception is not None:  # the connection is gone: re-armed on reconnection
            log.debug("could not re-arm the watch on %s: %r", self.path, result.exception)

    def run(self) -> None:
        if self.handle.cancelled:
            return
        try:
            self.callback(self.path)
        except Exception:
            log.exception("metadata watch callback for %s failed", self.path)
