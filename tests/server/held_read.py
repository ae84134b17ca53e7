"""``HeldRead``: a metadata store's read held, as a ZooKeeper read waits through a lost
connection, for tests that show who waits for it (the event loop must not)."""

from __future__ import annotations

import threading


class HeldRead:
    """Holds the first read of ``path`` made once ``armed`` (at once unless ``armed=False``)
    until ``release()``; ``held`` is set while that read waits."""

    def __init__(self, store, path: str, *, armed: bool = True) -> None:
        self.held, self._released, self.armed = threading.Event(), threading.Event(), threading.Event()
        if armed:
            self.armed.set()
        self._path, self._get = path, store.get
        store.get = self._held_get

    def _held_get(self, path, *args, **kwargs):
        if path == self._path and self.armed.is_set() and not self.held.is_set():
            self.held.set()
            self._released.wait(20)
        return self._get(path, *args, **kwargs)

    def release(self) -> None:
        self._released.set()
