"""`BulkReads`: the many-znode reads of `ZooKeeperStore` (`get_many`, `children_many`), each
answer in the order asked, None for a missing znode.

`get_many` asks ZooKeeper for 1,000 znodes a request (multiRead, `zookeeper_multi_read`),
falling back to the others' way where the server refuses it or a request is lost: every read
its own request, `BULK_READ_WINDOW` in flight at once (pipelined on the one connection,
answered in order). A read that fails otherwise than for a missing znode is read again alone,
with the store's retried read, which decides. A mixin: it uses the store's client and state
(``_client``, ``_read``, ``_check_open``, ``_multi_read``).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence

from kazoo import exceptions as kz

from odradek.metadata import errors
from odradek.metadata import zookeeper_multi_read as multi_read
from odradek.metadata.store import validate_path
from odradek.metadata.zookeeper_errors import translated

log = logging.getLogger("odradek.metadata.zookeeper_store")

# Reads (and watches set) in flight at once in `_pipelined` and `watch_data_many`: each answer
# is a few hundred bytes, and 1,000 outstanding requests is ZooKeeper's own per-server throttle
# (globalOutstandingLimit), so more would only queue in its socket buffer.
BULK_READ_WINDOW = 1000


class BulkReads:
    """The bulk reads of `ZooKeeperStore`; see the module docstring."""

    def get_many(self, paths: Sequence[str]) -> list[tuple[bytes, int] | None]:
        """Read with multiRead (`zookeeper_multi_read`), or pipelined reads where it failed."""
        if self._multi_read and len(paths) > 1:
            self._check_open()
            paths = [validate_path(p) for p in paths]
            try:
                found = multi_read.read_many(self._client, paths)
                return [self._read_data(p) if isinstance(r, Exception) else r for p, r in zip(paths, found)]
            except multi_read.MultiReadUnsupported as e:
                log.info("ZooKeeper does not take multiRead (%s): reading znodes one request each", e)
                self._multi_read = False
            except Exception:  # noqa: BLE001 - a lost connection: the reads below retry
                pass
        found = self._pipelined(self._client.get_async, self._client.get, paths)
        return [None if r is None else (r[0] or b"", r[1].version) for r in found]

    def _read_data(self, path: str) -> tuple[bytes, int] | None:
        try:
            return self.get(path)
        except errors.NoNodeError:
            return None

    def children_many(self, paths: Sequence[str]) -> list[list[str] | None]:
        found = self._pipelined(self._client.get_children_async, self._client.get_children,
                                paths)
        return [None if r is None else sorted(r) for r in found]

    def _pipelined(self, send: Callable, blocking: Callable, paths: Sequence[str]) -> list:
        """``send(path)`` (a kazoo ``*_async`` read) for every path, `BULK_READ_WINDOW` in
        flight at a time, and each answer in order (None for a missing znode). A read that
        failed otherwise (a lost connection) is read again with ``blocking``, its kazoo
        twin, retried as `_read` retries: a blip costs a few slow reads, not the call."""
        self._check_open()
        paths = [validate_path(p) for p in paths]
        out: list = []
        for start in range(0, len(paths), BULK_READ_WINDOW):
            window = paths[start:start + BULK_READ_WINDOW]
            with translated():
                pending = [send(p) for p in window]
            for path, result in zip(window, pending):
                try:
                    out.append(result.get())
                except kz.NoNodeError:
                    out.append(None)
                except Exception:  # noqa: BLE001 - any other failure: the retried read decides
                    try:
                        out.append(self._read(blocking, path))
                    except errors.NoNodeError:
                        out.append(None)
        return out
