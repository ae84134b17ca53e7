"""The in-memory znode tree behind the embedded store: ZooKeeper's rules, atomic batches.

`ZnodeTree.apply` runs a batch of ops (`CreateOp`, `SetOp`, `DeleteOp`, `CheckOp`) all or
nothing and reports three things about a committed batch:

* ``results``: one per op, as `MetadataStore.multi` returns them;
* ``events``: the watch events it caused, ``("data", path)`` and ``("children", path)``,
  each once, in order;
* ``journal``: the changes to persistent znodes as plain dicts, which the journal writes and
  `replay` re-applies at startup. Ephemeral znodes are never journaled: they belong to the
  session and must not outlive it. A create records its parent's sequence counter after the
  change (``pcv``), so sequence numbers keep growing across restarts even though the
  ephemeral creations that also bumped the counter are forgotten.

Journal entries (znode data is carried as a latin-1 string, a lossless byte-to-char map that
keeps JSON payloads readable in the files)::

    {"op": "create", "path": "/a/b", "data": "...", "pcv": 3}
    {"op": "set",    "path": "/a/b", "data": "...", "version": 4}
    {"op": "delete", "path": "/a/b"}

The undo record of a batch maps each touched path to a copy of its znode before the batch (or
None if it did not exist); `rollback` puts those back, so a batch that fails half-way, or whose
journal write fails, leaves the tree exactly as it was.
"""

from __future__ import annotations

import time

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

from odradek.metadata.errors import (
    BadVersionError,
    CorruptStoreError,
    InvalidPathError,
    NoChildrenForEphemeralsError,
    NodeExistsError,
    NoNodeError,
    NotEmptyError,
)
from odradek.metadata.store import (
    CheckOp,
    CreateOp,
    DeleteOp,
    Op,
    SetOp,
    check_data,
    parent_path,
    sequence_name,
    validate_path,
)

Event = tuple[str, str]


class Znode:
    """One znode; ``cversion`` counts the children ever created under it (its sequence counter);
    ``czxid`` tells creations apart (ZooKeeper's creation zxid; 0 for znodes loaded from disk)."""

    __slots__ = ("data", "version", "cversion", "ephemeral", "children", "czxid")

    def __init__(self, data: bytes, version: int = 0, cversion: int = 0, ephemeral: bool = False,
                 czxid: int = 0):
        self.data = data
        self.version = version
        self.cversion = cversion
        self.ephemeral = ephemeral
        self.czxid = czxid
        self.children: set[str] = set()

    def copy(self) -> Znode:
        clone = Znode(self.data, self.version, self.cversion, self.ephemeral, self.czxid)
        clone.children = set(self.children)
        return clone


@dataclass
class Change:
    """What a committed batch did; see the module docstring."""

    results: list[str | int | None] = field(default_factory=list)
    events: list[Event] = field(default_factory=list)
    journal: list[dict] = field(default_factory=list)
    undo: dict[str, Znode | None] = field(default_factory=dict)




def _check_version(path: str, node: Znode, version: int) -> None:
    if version != -1 and version != node.version:
        raise BadVersionError(f"{path}: expected version {version}, found {node.version}")


class ZnodeTree:
    """A dict from path to `Znode`; the root ``/`` always exists."""

    def __init__(self) -> None:
        self.nodes: dict[str, Znode] = {"/": Znode(b"")}
        # Creation ids grow within a process and, starting from the clock in microseconds,
        # across restarts too: a broker registered again gets a larger epoch than before.
        self.last_zxid = time.time_ns() // 1000

    def node(self, path: str) -> Znode:
        """The znode at a valid ``path``, or NoNodeError."""
        node = self.nodes.get(validate_path(path))
        if node is None:
            raise NoNodeError(path)
        return node

    def apply(self, ops: Sequence[Op]) -> Change:
        """Apply ``ops`` atomically; on any error roll back and re-raise it."""
        change = Change()
        try:
            for op in ops:
                change.results.append(self._apply_one(op, change))
        except BaseException:
            self.rollback(change.undo)
            raise
        change.events = list(dict.fromkeys(change.events))
        return change

    def rollback(self, undo: dict[str, Znode | None]) -> None:
        """Restore every znode recorded in ``undo`` to its state before the batch."""
        for path, before in undo.items():
            if before is None:
                self.nodes.pop(path, None)
            else:
                self.nodes[path] = before

    def _touch(self, change: Change, path: str) -> None:
        if path not in change.undo:
            node = self.nodes.get(path)
            change.undo[path] = None if node is None else node.copy()

    def _apply_one(self, op: Op, change: Change) -> str | int | None:
        if isinstance(op, CreateOp):
            return self._create(op, change)
        if isinstance(op, SetOp):
            return self._set(op, change)
        if isinstance(op, DeleteOp):
            return self._delete(op, change)
        if isinstance(op, CheckOp):
            _check_version(op.path, self.node(op.path), op.version)
            return None
        raise TypeError(f"not a store operation: {op!r}")

    def _create(self, op: CreateOp, change: Change) -> str:
        # A sequential name may end in "/" or be empty before its suffix: validate with one.
        validate_path(op.path + "0" if op.sequential else op.path)
        data = check_data(op.data)
        if op.path == "/":
            raise NodeExistsError("/")
        parent = parent_path(op.path)
        pnode = self.nodes.get(parent)
        if pnode is None:
            raise NoNodeError(f"parent of {op.path} does not exist")
        if pnode.ephemeral:
            raise NoChildrenForEphemeralsError(f"{parent} is ephemeral")
        path = sequence_name(op.path, pnode.cversion) if op.sequential else op.path
        if path in self.nodes:
            raise NodeExistsError(path)
        self._touch(change, parent)
        self._touch(change, path)
        self.last_zxid += 1
        self.nodes[path] = Znode(data, ephemeral=op.ephemeral, czxid=self.last_zxid)
        pnode.children.add(path.rsplit("/", 1)[1])
        pnode.cversion += 1
        change.events += [("data", path), ("children", path), ("children", parent)]
        if not op.ephemeral:
            change.journal.append(
                {
                    "op": "create",
                    "path": path,
                    "data": data.decode("latin-1"),
                    "pcv": pnode.cversion,
                }
            )
        return path

    def _set(self, op: SetOp, change: Change) -> int:
        data = check_data(op.data)
        node = self.node(op.path)
        _check_version(op.path, node, op.version)
        self._touch(change, op.path)
        node.data = data
        node.version += 1
        change.events.append(("data", op.path))
        if not node.ephemeral:
            change.journal.append(
                {
                    "op": "set",
                    "path": op.path,
                    "data": data.decode("latin-1"),
                    "version": node.version,
                }
            )
        return node.version

    def _delete(self, op: DeleteOp, change: Change) -> None:
        if validate_path(op.path) == "/":
            raise InvalidPathError("the root znode cannot be deleted")
        node = self.node(op.path)
        _check_version(op.path, node, op.version)
        if node.children:
            raise NotEmptyError(op.path)
        parent = parent_path(op.path)
        pnode = self.nodes[parent]
        self._touch(change, op.path)
        self._touch(change, parent)
        del self.nodes[op.path]
        pnode.children.discard(op.path.rsplit("/", 1)[1])
        change.events += [("data", op.path), ("children", op.path), ("children", parent)]
        if not node.ephemeral:
            change.journal.append({"op": "delete", "path": op.path})
        return None

    def subtree_post_order(self, path: str) -> list[str]:
        """Paths of ``path``'s subtree, every child before its parent, ``path`` last."""
        out: list[str] = []
        stack = [(path, False)]
        while stack:
            current, expanded = stack.pop()
            if expanded:
                out.append(current)
                continue
            stack.append((current, True))
            prefix = current if current == "/" else current + "/"
            for name in self.nodes[current].children:
                stack.append((prefix + name, False))
        return out

    def persistent_nodes(self) -> Iterator[tuple[str, bytes, int, int]]:
        """``(path, data, version, cversion)`` of every persistent znode, parents first."""
        for path in sorted(self.nodes, key=lambda p: (p.count("/"), p)):
            node = self.nodes[path]
            if not node.ephemeral:
                yield path, node.data, node.version, node.cversion

    def load(self, path: str, data: bytes, version: int, cversion: int) -> None:
        """Insert a znode from a snapshot; its parent must have been loaded before it."""
        if path == "/":
            root = self.nodes["/"]
            root.data, root.version, root.cversion = data, version, cversion
            return
        self._insert(path, Znode(data, version, cversion))

    def replay(self, entry: dict) -> None:
        """Re-apply one journal entry (see the module docstring) at startup."""
        try:
            kind, path = entry["op"], entry["path"]
            if kind == "create":
                self._insert(path, Znode(entry["data"].encode("latin-1")))
                self.nodes[parent_path(path)].cversion = int(entry["pcv"])
            elif kind == "set":
                node = self.nodes[path]
                node.data = entry["data"].encode("latin-1")
                node.version = int(entry["version"])
            elif kind == "delete":
                parent = parent_path(path)
                del self.nodes[path]
                self.nodes[parent].children.discard(path.rsplit("/", 1)[1])
            else:
                raise CorruptStoreError(f"unknown journal op {kind!r}")
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise CorruptStoreError(f"journal entry does not apply: {entry!r}") from exc

    def _insert(self, path: str, node: Znode) -> None:
        validate_path(path)
        parent = self.nodes.get(parent_path(path))
        if parent is None or path in self.nodes:
            raise CorruptStoreError(f"cannot load {path}: parent missing or node duplicated")
        self.nodes[path] = node
        parent.children.add(path.rsplit("/", 1)[1])
