"""`ZnodeWriter`: the controller's znode writes (`commands.ZnodeWrite`), applied in order, with
consecutive writes grouped into one ``multi`` for speed.

A group is one guarded ``multi``: a `CheckOp` on ``/controller_epoch`` at the version the
controller was elected at, then the writes as plain ops (`SetZnode` -> `SetOp`, `CreateZnode` ->
`CreateOp`; a create with ``exists_ok`` is left out when the znode exists, found by reading
each parent's children once per group). Groups hold at most `MAX_OPS_PER_MULTI` ops, far below
ZooKeeper's 1 MiB request (a partition's writes are about 150 bytes). A delete, or a lone
write, is applied by itself (`ZnodeWrite.apply`, whose deletes read subtrees). When a group
fails on a version or existence it is replayed write by write: a ``multi`` is all or nothing,
so this finds the culprit without repeating anything.

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

from odradek.controller.commands import CreateZnode, SetZnode, ZnodeWrite
from odradek.metadata import layout
from odradek.metadata.errors import (
    BadVersionError,
    NodeExistsError,
    NoNodeError,
    StoreUnavailableError,
)
from odradek.metadata.store import CheckOp, CreateOp, MetadataStore, SetOp, parent_path

log = logging.getLogger(__name__)

MAX_OPS_PER_MULTI = 1000
STORE_RETRY_BACKOFF_S = 0.5
WRITE_CONFLICTS = (BadVersionError, NodeExistsError, NoNodeError)
"""What a write meets when the store is not as the controller thought."""


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
        self._children: dict[str, set[str]] = {}

    def apply(self, writes: list[ZnodeWrite]) -> ZnodeWrite | None:
        """Apply ``writes`` in order; the first that failed on a version or existence (the
        writes before it happened, it and those after did not), or None."""
        store = self._store()
        for start in range(0, len(writes), MAX_OPS_PER_MULTI):
            chunk = writes[start:start + MAX_OPS_PER_MULTI]
            self._children = {}
            ops = self._grouped_ops(store, chunk)
            if ops is not None:
                try:
                    self._retrying(lambda: store.multi(ops))  # noqa: B023 - run at once
                    continue
                except WRITE_CONFLICTS:
                    pass  # nothing of the multi happened: find the culprit one by one
            for write in chunk:
                try:
                    self._retrying(lambda: write.apply(store))  # noqa: B023 - run at once
                except WRITE_CONFLICTS:
                    return write
        return None

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

    def _grouped_ops(self, store: MetadataStore, chunk: list[ZnodeWrite]) -> list | None:
        """One guarded multi for ``chunk``, or None when it cannot be grouped."""
        if len(chunk) < 2:
            return None
        ops: list = [CheckOp(layout.CONTROLLER_EPOCH, chunk[0].epoch_zk_version)]
        created: set[str] = set()
        for write in chunk:
            if write.epoch_zk_version != chunk[0].epoch_zk_version:
                return None
            if isinstance(write, SetZnode):
                ops.append(SetOp(write.path, write.data, write.expected_version))
            elif isinstance(write, CreateZnode):
                if write.path in created:
                    continue
                if write.exists_ok and self._exists(store, write.path, created):
                    continue
                created.add(write.path)
                ops.append(CreateOp(write.path, write.data))
            else:
                return None
        return ops

    def _exists(self, store: MetadataStore, path: str, created: set[str]) -> bool:
        """Whether ``path`` exists; a parent created in this group has no children yet."""
        parent = parent_path(path)
        if parent in created:
            return False
        children = self._children.get(parent)
        if children is None:
            try:
                children = set(store.children(parent))
            except NoNodeError:
                children = set()
            self._children[parent] = children
        return path.rsplit("/", 1)[1] in children
