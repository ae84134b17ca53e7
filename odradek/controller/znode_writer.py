"""`ZnodeWriter`: the controller's znode writes (`commands.ZnodeWrite`), applied in order, with
consecutive writes grouped into guarded ``multi`` requests for speed.

A run of consecutive creates, sets and deletes with the same guard becomes a few multis, each
a `CheckOp` on ``/controller_epoch`` at the version the controller was elected at, then at most
`MAX_OPS_PER_MULTI` plain ops (and about `MAX_BYTES_PER_MULTI` of paths and data, far below
ZooKeeper's 1 MiB request, ``jute.maxbuffer``):

* `SetZnode` -> `SetOp`; `CreateZnode` -> `CreateOp`, left out when ``exists_ok`` and the znode
  exists (found by reading the children of every such parent at once, `children_many`);
* `DeleteZnode` -> a `DeleteOp` per znode of its subtree, children before parents (the
  subtrees of all the run's deletes read level by level with `children_many`, so deleting
  100 topics of 100 partitions costs four pipelined reads, not 20,000 round trips; a delete
  that names its subtree, ``DeleteZnode.subtree``, costs only the read of its root's
  existence); a delete of a znode already gone is left out. One topic's subtree may span
  several multis: the deletion is not atomic, but each multi is, and the znodes go children
  first, so what a cut leaves is a smaller tree that deleting again finishes (as Kafka's
  ``deleteRecursive``).

A write that names a path created, set or deleted earlier in the same run (a create under a
deleted path, a delete of a created one) starts a new run, planned once the earlier run
landed: plans are read from the store before any of the run is written. Other writes
(`SetExistingZnode`), and a lone create or set, are applied by themselves (`ZnodeWrite.apply`).

A run of sets only (partition states: a failover's 10,000 are ten multis), or of deletes only
(a deletion of 100 topics of 100 partitions: 20,300 znodes, 21 multis), sends its multis
together (`MetadataStore.multi_many`) instead of waiting for each answer before the next.

When a multi fails on a version, an existence or a non-empty parent, nothing of it happened:
the writes with ops in it are replayed one by one (`ZnodeWrite.apply`; a delete cut by an
earlier multi of the run is finished there, a delete re-reads its subtree) to find the culprit,
and the writes after them are planned again. The first write that fails so is returned; the
writes before it happened, it and those after did not (a delete partly done excepted, which
the caller's next attempt finishes).

While the store is unreachable (`StoreUnavailableError`) a write is repeated, up to the
session timeout: a connection blip. One that did land before the answer was lost then fails on
its version, which the caller treats as any conflict (re-reading what the store holds).

A write the embedded store's disk refused (an ``OSError``, a full disk: the store then holds
nothing of it) is repeated until it lands or the controller stops, as Kafka's ZooKeeper client
repeats a request until it is connected: the controller's picture of the cluster already
counts the write done, so giving it up would leave partitions without a state (a new topic
never led) or a deleted topic's znodes for ever. The event thread waits meanwhile.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

from odradek.controller.commands import CreateZnode, DeleteZnode, SetZnode, ZnodeWrite
from odradek.metadata import layout
from odradek.metadata.errors import (
    BadVersionError,
    NodeExistsError,
    NoNodeError,
    NotEmptyError,
    StoreUnavailableError,
)
from odradek.metadata.store import (
    CheckOp,
    CreateOp,
    DeleteOp,
    MetadataStore,
    SetOp,
    join_path,
    parent_path,
)

log = logging.getLogger(__name__)

MAX_OPS_PER_MULTI = 1000
MAX_BYTES_PER_MULTI = 512 * 1024
"""Paths and data of one multi: half of ZooKeeper's default 1 MiB ``jute.maxbuffer``, so the
request's framing and per-op headers (`OP_OVERHEAD_BYTES`) never bring it near the limit.
1,000 partition states (about 150 bytes each) take a third of it."""
OP_OVERHEAD_BYTES = 32
"""An op's header, version and ACL in a multi request, rounded up."""
STORE_RETRY_BACKOFF_S = 0.5
WRITE_CONFLICTS = (BadVersionError, NodeExistsError, NoNodeError)
"""What a write meets when the store is not as the controller thought."""
MULTI_FAILURES = WRITE_CONFLICTS + (NotEmptyError,)
"""A multi failing so is replayed write by write: a child created under a deleted znode
after its subtree was read is found there by the delete's own re-read."""
GROUPED = (CreateZnode, SetZnode, DeleteZnode)
"""The writes a run may hold (`SetExistingZnode` tolerates a missing znode: applied alone)."""


class ZnodeWriter:
    """Applies write lists to ``store()``; ``retry_for`` seconds of unreachable store are
    waited out unless ``stopped()``."""

    def __init__(
        self,
        store: Callable[[], MetadataStore],
        retry_for: float,
        stopped: Callable[[], bool] = lambda: False,
    ) -> None:
        self._store = store
        self.retry_for = retry_for
        self._stopped = stopped

    def apply(self, writes: list[ZnodeWrite]) -> ZnodeWrite | None:
        """Apply ``writes`` in order; the first that failed on a version or existence (the
        writes before it happened, it did not, nor did those after, but for the other multis
        of a run of sets: see `_apply_sets`), or None."""
        store = self._store()
        i = 0
        while i < len(writes):
            end = _run_end(writes, i)
            run = writes[i:end]
            if len(run) == 1 and not isinstance(run[0], DeleteZnode):
                try:
                    self._retrying(lambda: run[0].apply(store))  # noqa: B023 - run at once
                except WRITE_CONFLICTS:
                    return run[0]
                i = end
                continue
            done, failed = self._apply_run(store, run)
            if failed is not None:
                return failed
            i += done
        return None

    def _apply_run(self, store: MetadataStore, run: list[ZnodeWrite]) -> tuple[int, ZnodeWrite | None]:
        """Apply ``run`` as planned multis; ``(writes done, culprit)``. After a failed multi
        the writes in it are replayed alone and only those are counted done: the caller
        plans the rest again."""
        plans = self._plan(store, run)
        if len(plans) > 1 and (all(type(w) is SetZnode for w in run)
                               or all(type(w) is DeleteZnode for w in run)):
            return self._apply_sets(store, run, plans)
        for ops, first, last in plans:
            try:
                self._retrying(lambda: store.multi(ops))  # noqa: B023 - run at once
                continue
            except MULTI_FAILURES:
                pass  # nothing of this multi happened: find the culprit one by one
            for write in run[first:last + 1]:
                try:
                    self._retrying(lambda: write.apply(store))  # noqa: B023 - run at once
                except WRITE_CONFLICTS:
                    return last + 1, write
            return last + 1, None
        return len(run), None

    def _apply_sets(
        self, store: MetadataStore, run: list[ZnodeWrite], plans: list[tuple[list, int, int]]
    ) -> tuple[int, ZnodeWrite | None]:
        """A run of sets only (the state writes of a failover, of a batch of AlterPartition)
        or of deletes only (a topic deletion's znodes): its multis sent together
        (`MetadataStore.multi_many`), each still atomic. A multi cut by the store being
        unreachable is repeated alone; a multi that failed is replayed write by write as in
        `_apply_run`. ZooKeeper applies them in order; the multis after a failed one were
        applied or not on their own, and the caller reads back every state its list writes
        after a conflict, so a write of theirs that landed is adopted (as a write of an
        earlier multi is). A delete cut so (its children in a failed multi, its parents in
        later ones that then failed NotEmpty) is finished by its replay, which reads what is
        left of its subtree and tolerates what is gone."""
        outcomes = self._retrying(lambda: store.multi_many([ops for ops, _, _ in plans]))
        for (ops, first, last), outcome in zip(plans, outcomes):
            if isinstance(outcome, (StoreUnavailableError, OSError)):
                try:
                    self._retrying(lambda: store.multi(ops))  # noqa: B023 - run at once
                    continue
                except MULTI_FAILURES as e:
                    outcome = e
            if not isinstance(outcome, Exception):
                continue
            if not isinstance(outcome, MULTI_FAILURES):
                raise outcome
            for write in run[first:last + 1]:
                try:
                    self._retrying(lambda: write.apply(store))  # noqa: B023 - run at once
                except WRITE_CONFLICTS:
                    return last + 1, write
        return len(run), None

    def _retrying(self, write: Callable[[], object]) -> object:
        deadline = time.monotonic() + self.retry_for
        refused = False
        while True:
            try:
                result = write()
            except StoreUnavailableError:
                if self._stopped() or time.monotonic() >= deadline:
                    raise
            except OSError as e:  # the embedded store's disk (see the module docstring)
                if self._stopped():
                    raise
                if not refused:
                    log.error("the metadata store refused a controller write (%s); repeating it "
                              "until it lands", e)
                    refused = True
            else:
                if refused:
                    log.info("the metadata store took the controller's write again")
                return result
            time.sleep(STORE_RETRY_BACKOFF_S)

    def _plan(self, store: MetadataStore, run: list[ZnodeWrite]) -> list[tuple[list, int, int]]:
        """The guarded multis of ``run``: ``(ops, first, last)``, the indices of the first and
        last write with ops in it. Reads what the plan needs (parents' children, subtrees)."""
        existing = self._existing_children(store, run)
        subtrees = _subtrees(store, [w for w in run if isinstance(w, DeleteZnode)])
        guard = CheckOp(layout.CONTROLLER_EPOCH, run[0].epoch_zk_version)
        multis: list[tuple[list, int, int]] = []
        ops: list = [guard]
        created: set[str] = set()
        size = first = last = 0
        for index, write in enumerate(run):
            for op in _ops_of(write, existing, created, subtrees):
                cost = len(op.path) + len(getattr(op, "data", b"")) + OP_OVERHEAD_BYTES
                full = len(ops) > MAX_OPS_PER_MULTI or size + cost > MAX_BYTES_PER_MULTI
                if full and len(ops) > 1:
                    multis.append((ops, first, last))
                    ops, size, first = [guard], 0, index
                ops.append(op)
                size += cost
                last = index
        if len(ops) > 1:
            multis.append((ops, first, last))
        return multis

    def _existing_children(self, store: MetadataStore, run: list[ZnodeWrite]) -> dict[str, set[str]]:
        """The children of every parent of an ``exists_ok`` create of ``run``, read at once."""
        parents = sorted({parent_path(w.path) for w in run
                          if isinstance(w, CreateZnode) and w.exists_ok})
        return {p: set(c or ()) for p, c in zip(parents, store.children_many(parents))}


def _run_end(writes: list[ZnodeWrite], start: int) -> int:
    """The end of the run of groupable writes from ``start``: creates, sets and deletes under
    one guard, none of which touches a path that a write before it in the run touched in
    another way (see the module docstring). At least one write."""
    guard = writes[start].epoch_zk_version
    written: set[str] = set()  # created or set paths, and all their ancestors
    deleted: set[str] = set()  # roots of the deletes
    end = start
    while end < len(writes):
        write = writes[end]
        if type(write) not in GROUPED or write.epoch_zk_version != guard:
            break
        if isinstance(write, DeleteZnode):
            if write.path in written:
                break
            deleted.add(write.path)
        else:
            lineage = _lineage(write.path)
            if not deleted.isdisjoint(lineage):
                break
            written.update(lineage)
        end += 1
    return max(end, start + 1)


def _lineage(path: str) -> list[str]:
    """``path`` and its ancestors but ``/``: ``/a/b`` -> ``['/a/b', '/a']``."""
    out = []
    while path != "/":
        out.append(path)
        path = parent_path(path)
    return out


def _ops_of(write: ZnodeWrite, existing: dict[str, set[str]], created: set[str],
            subtrees: dict[str, list[str]]) -> list:
    """The plain ops of one write of a run (none for a create of a znode that exists, or a
    delete of one that is gone)."""
    if isinstance(write, SetZnode):
        return [SetOp(write.path, write.data, write.expected_version)]
    if isinstance(write, CreateZnode):
        if write.path in created:
            return []
        parent = parent_path(write.path)
        if write.exists_ok and parent not in created:
            if write.path.rsplit("/", 1)[1] in existing.get(parent, ()):
                return []
        created.add(write.path)
        return [CreateOp(write.path, write.data)]
    doomed = subtrees.get(write.path, [])
    subtrees[write.path] = []  # a second delete of the same path in the run finds it gone
    return [DeleteOp(p) for p in doomed]


def _subtrees(store: MetadataStore, deletes: list[DeleteZnode]) -> dict[str, list[str]]:
    """Per path deleted: the znodes to delete, children before parents (just the path for a
    delete that is not recursive); no entry for a path already gone. Each level of all the
    subtrees is read with one `children_many`."""
    if not deletes:
        return {}
    roots = sorted({d.path for d in deletes})
    recursive = {d.path for d in deletes if d.recursive}
    named = {d.path: d.subtree for d in deletes if d.recursive and d.subtree}
    found = store.children_many(roots)
    out: dict[str, list[str]] = {}
    level: list[tuple[str, str]] = []  # (root, path) whose children are still to be read
    below: dict[str, list[str]] = {}  # root -> its descendants in breadth-first order
    for root, children in zip(roots, found):
        if children is None:
            continue
        out[root] = [root]
        if root in named:  # known to the caller: a multi meeting another znode fails whole
            out[root] = list(named[root]) + [root]
        elif root in recursive:
            below[root] = []
            level += [(root, join_path(root, c)) for c in children]
    while level:
        found = store.children_many([p for _, p in level])
        deeper = []
        for (root, path), children in zip(level, found):
            if children is None:
                continue  # gone meanwhile
            below[root].append(path)
            deeper += [(root, join_path(path, c)) for c in children]
        level = deeper
    for root, descendants in below.items():
        out[root] = descendants[::-1] + [root]  # deepest first: children before parents
    return out

