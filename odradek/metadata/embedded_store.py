"""The embedded metadata store: ZooKeeper's semantics in-process, durable in one directory.

A single broker needs no ZooKeeper: `EmbeddedStore(directory)` keeps the znode tree in memory
(`ZnodeTree`) and makes every committed change durable before returning, by appending it to
the journal of ``directory`` (see `journal` for the files and why a journal). ``directory=None``
gives a purely in-memory store, for tests and throw-away brokers.

The store object is the session: its ephemeral znodes are never written to disk, so they are
gone when it is closed or the process dies, as a ZooKeeper session's would be once it expires.
One process at a time may open a directory (an flock on ``directory/lock``).

Thread safety: one re-entrant lock guards the tree and the files. Watch callbacks run in the
thread that made the change, synchronously, after the change is durable and after the lock is
released, so a callback may read or write the store.
"""

from __future__ import annotations

import logging
import os
import threading
from collections import defaultdict
from collections.abc import Sequence

from odradek.metadata.errors import NodeExistsError, StoreClosedError
from odradek.metadata.journal import Journal
from odradek.metadata.store import (
    CreateOp,
    DeleteOp,
    MetadataStore,
    Op,
    SetOp,
    WatchCallback,
    WatchHandle,
    parent_path,
    validate_path,
)
from odradek.metadata.znode_tree import Change, ZnodeTree

log = logging.getLogger(__name__)

_Watchers = dict[str, list[tuple[WatchHandle, WatchCallback]]]
_Pending = tuple[WatchHandle, WatchCallback, str]


class EmbeddedStore(MetadataStore):
    """A `MetadataStore` in this process; durable when given a directory."""

    watches_in_writer_thread = True

    def __init__(self, directory: str | os.PathLike | None = None) -> None:
        self._lock = threading.RLock()
        self._tree = ZnodeTree()
        self._journal: Journal | None = None
        self._watchers: dict[str, _Watchers] = {
            "data": defaultdict(list),
            "children": defaultdict(list),
        }
        self._closed = False
        if directory is not None:
            journal = Journal(directory)
            try:
                self._load(journal)
            except BaseException:
                journal.close()
                raise
            self._journal = journal

    def _load(self, journal: Journal) -> None:
        nodes, batches = journal.load()
        for path, data, version, cversion in nodes:
            self._tree.load(path, data, version, cversion)
        for batch in batches:
            for entry in batch:
                self._tree.replay(entry)

    # -- reads -------------------------------------------------------------------------------

    def get(self, path: str) -> tuple[bytes, int]:
        with self._lock:
            self._check_open()
            node = self._tree.node(path)
            return node.data, node.version

    def exists(self, path: str) -> int | None:
        with self._lock:
            self._check_open()
            node = self._tree.nodes.get(validate_path(path))
            return None if node is None else node.version

    def creation_id(self, path: str) -> int:
        with self._lock:
            self._check_open()
            return self._tree.node(path).czxid

    def children(self, path: str) -> list[str]:
        with self._lock:
            self._check_open()
            return sorted(self._tree.node(path).children)

    # -- writes ------------------------------------------------------------------------------

    def create(
        self,
        path: str,
        data: bytes = b"",
        *,
        ephemeral: bool = False,
        sequential: bool = False,
        make_parents: bool = False,
    ) -> str:
        with self._lock:
            self._check_open()
            ops: list[Op] = []
            if make_parents:
                ops += [CreateOp(p) for p in self._missing_ancestors(path)]
            ops.append(CreateOp(path, data, ephemeral, sequential))
            results, callbacks = self._commit(ops)
        _run(callbacks)
        return results[-1]

    def ensure_path(self, path: str, data: bytes = b"") -> None:
        try:
            self.create(path, data, make_parents=True)
        except NodeExistsError:
            pass  # there already, whatever it holds

    def create_checked_ephemeral(self, path: str, data: bytes = b"") -> int:
        # One process, one session that never ends while the store is open: nothing to retry,
        # and every ephemeral in the tree is this session's.
        with self._lock:
            self._check_open()
            node = self._tree.nodes.get(validate_path(path))
            if node is not None:
                if not node.ephemeral:
                    raise NodeExistsError(f"{path} exists and is not an ephemeral of this session")
                return node.czxid
            _, callbacks = self._commit([CreateOp(path, data, ephemeral=True)])
            creation_id = self._tree.nodes[path].czxid
        _run(callbacks)
        return creation_id

    def _missing_ancestors(self, path: str) -> list[str]:
        missing: list[str] = []
        current = parent_path(validate_path(path + "0"))
        while current != "/" and current not in self._tree.nodes:
            missing.append(current)
            current = parent_path(current)
        return missing[::-1]

    def set(self, path: str, data: bytes, version: int = -1) -> int:
        return self.multi([SetOp(path, data, version)])[0]

    def delete(self, path: str, version: int = -1, recursive: bool = False) -> None:
        with self._lock:
            self._check_open()
            ops: list[Op] = [DeleteOp(path, version)]
            if recursive:
                self._tree.node(path)  # NoNodeError before anything else
                ops = [DeleteOp(p) for p in self._tree.subtree_post_order(path)[:-1]] + ops
            _, callbacks = self._commit(ops)
        _run(callbacks)

    def multi(self, ops: Sequence[Op]) -> list[str | int | None]:
        with self._lock:
            self._check_open()
            results, callbacks = self._commit(list(ops))
        _run(callbacks)
        return results

    def _commit(self, ops: list[Op]) -> tuple[list[str | int | None], list[_Pending]]:
        """Apply and make durable; return the results and the watch callbacks to run.

        The caller runs the callbacks after releasing the lock.
        """
        change = self._tree.apply(ops)
        if self._journal is not None and change.journal:
            try:
                self._journal.append(change.journal)
            except BaseException:
                self._tree.rollback(change.undo)
                raise
            if self._journal.needs_compaction():
                try:
                    self._journal.compact(self._tree.persistent_nodes())
                except OSError as e:
                    # The batch is durable in the journal, which stays in use: report, go on
                    # (one line: on a full disk every write until space returns gets here).
                    log.error("metadata snapshot failed; will retry at the next write: %s", e)
        return change.results, self._callbacks_for(change)

    def _callbacks_for(self, change: Change) -> list[_Pending]:
        found = []
        for kind, path in change.events:
            for handle, callback in self._watchers[kind].get(path, ()):
                found.append((handle, callback, path))
        return found

    # -- watches -----------------------------------------------------------------------------

    def watch_data(self, path: str, callback: WatchCallback) -> WatchHandle:
        return self._watch("data", path, callback)

    def watch_children(self, path: str, callback: WatchCallback) -> WatchHandle:
        return self._watch("children", path, callback)

    def _watch(self, kind: str, path: str, callback: WatchCallback) -> WatchHandle:
        validate_path(path)
        with self._lock:
            self._check_open()
            watchers = self._watchers[kind]

            def cancel() -> None:
                with self._lock:
                    entries = watchers.get(path, [])
                    entries[:] = [e for e in entries if e[0] is not handle]
                    if not entries:
                        watchers.pop(path, None)

            handle = WatchHandle(cancel)
            watchers[path].append((handle, callback))
            return handle

    # -- lifecycle ---------------------------------------------------------------------------

    def _check_open(self) -> None:
        if self._closed:
            raise StoreClosedError("the metadata store is closed")

    def close(self) -> None:
        with self._lock:
            if self._closed:
                return
            self._closed = True
            for watchers in self._watchers.values():
                watchers.clear()
            if self._journal is not None:
                self._journal.close()
                self._journal = None
            self._tree = ZnodeTree()


def _run(callbacks: list[_Pending]) -> None:
    for handle, callback, path in callbacks:
        if handle.cancelled:
            continue
        try:
            callback(path)
        except Exception:
            log.exception("metadata watch callback for %s failed", path)
