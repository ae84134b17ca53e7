"""The `MetadataStore` of a cluster: a ZooKeeper ensemble, through kazoo.

`ZooKeeperStore(hosts, chroot)` speaks to ZooKeeper with a kazoo client and translates kazoo's
exceptions into `odradek.metadata.errors` at this boundary (`zookeeper_errors.py`), so callers
see the same errors as on the embedded store; a ``multi`` is built by
`zookeeper_transaction.py`; reads of many znodes at once are `zookeeper_bulk_reads.py`'s. ``chroot`` (e.g. ``/odradek``) roots every path of this store under
that znode, created if missing, as Kafka's ``zookeeper.connect=host:2181/chroot`` does.

Persistent watches are built from ZooKeeper's one-shot watches (``zookeeper_watch.Rewatch``).
Callbacks run on kazoo's callback thread. kazoo's connection thread waits on its socket with
one ``poll(2)`` per turn (`zookeeper_handler.PollHandler`), not a new selector each time.

Session: the store's ephemeral znodes live as long as the ZooKeeper session. When the session
expires kazoo opens a new one; the store then sets every watch again, runs every watch
callback once (changes made meanwhile were not reported) and calls the session listeners,
whose job is to re-create their ephemeral znodes (a broker re-registers itself, as Kafka does).
After a lost connection kazoo tries again with a backoff capped at one second
(`_CONNECTION_RETRY`), so the store is connected again within about a second of ZooKeeper's
return, however long it was away; `connected` says whether it is connected now.

Reads, and setting a watch, are retried across a connection loss or a session expiry; a watch
that still cannot be set is kept and set on reconnection, so asking for one never fails for
want of ZooKeeper (a broker starting while its session is replaced goes on). Plain writes are
not (a retried sequential create could create twice): they raise `StoreUnavailableError` and
the caller decides. The two writes that are safe to repeat, `ensure_path` and
`create_checked_ephemeral`, are retried as Kafka's ``ZooKeeperClient`` retries requests: after
each failure for want of a connection the store waits for kazoo to connect again (with the
same session or a new one) and tries again; it gives up, with `StoreUnavailableError`, when no
connection comes within the session timeout or after `_WRITE_ATTEMPTS` attempts. The session
timeout is counted in slices of waiting, not by the clock, so a process paused (SIGSTOP) longer
than the timeout still retries once it runs again.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable, Sequence
from typing import TypeVar

from kazoo import exceptions as kz
from kazoo.client import KazooClient, KazooState
from kazoo.retry import KazooRetry

from odradek.metadata import errors
from odradek.metadata.zookeeper_errors import translated
from odradek.metadata.zookeeper_bulk_reads import BULK_READ_WINDOW, BulkReads
from odradek.metadata.zookeeper_handler import PollHandler
from odradek.metadata.zookeeper_transaction import add_op, commit_many, op_results
from odradek.metadata.zookeeper_watch import Rewatch
from odradek.metadata.store import (
    DeleteOp,
    MetadataStore,
    Op,
    WatchCallback,
    WatchHandle,
    check_data,
    validate_path,
)

log = logging.getLogger(__name__)

_RECURSIVE_DELETE_BATCH = 1000  # deletes per multi: ~60 KB, far below ZooKeeper's 1 MiB packet
_WRITE_ATTEMPTS = 20  # with the backoff below: ~15 s of pauses besides the waits to reconnect
_WRITE_BACKOFF_FIRST_S, _WRITE_BACKOFF_MAX_S = 0.05, 1.0
_CONNECT_WAIT_SLICE_S = 0.25
# Reconnection: kazoo's default backoff doubles up to an hour, so a broker found ZooKeeper back
# 13 s after a 20 s outage (36 s after 60 s), its partitions offline meanwhile. Capped at 1 s
# (at most 1.4 s with kazoo's 40% jitter), never giving up: a broker waits for ZooKeeper as
# long as it takes, and one refused connection a second costs ZooKeeper nothing.
_CONNECTION_RETRY = dict(max_tries=-1, delay=0.1, backoff=2, max_delay=1.0, ignore_expire=True)
# Reads (kazoo's command retry, ``KazooClient.retry``): five tries, ~1.5 s of pauses, so a read
# rides out a connection that comes back within a backoff step and fails soon otherwise.
_COMMAND_RETRY = dict(max_tries=5, delay=0.1, backoff=2, max_delay=2.0, ignore_expire=True)

T = TypeVar("T")


class _Inconclusive(Exception):
    """A checked create's attempt proved nothing (the znode went away before it was read, or
    the session changed during the attempt): try again."""


# Failures for want of a connection (the write may or may not have been applied), and the above.
_TRANSIENT = (kz.ConnectionLoss, kz.SessionExpiredError, kz.OperationTimeoutError, _Inconclusive)


class ZooKeeperStore(BulkReads, MetadataStore):
    """A `MetadataStore` on a ZooKeeper ensemble (``hosts`` as ``"h1:2181,h2:2181"``)."""

    def __init__(
        self,
        hosts: str,
        chroot: str | None = None,
        *,
        connect_timeout: float = 15.0,
        session_timeout: float = 18.0,
    ) -> None:
        self._client = KazooClient(hosts=hosts, timeout=session_timeout, handler=PollHandler(),
                                   connection_retry=KazooRetry(**_CONNECTION_RETRY),
                                   command_retry=KazooRetry(**_COMMAND_RETRY))
        self._session_timeout = session_timeout
        self._connected = threading.Event()  # kazoo's state, as its listener last reported it
        self._session: int | None = None  # the id of the session kazoo last reported connected
        self._past_sessions: set[int] = set()  # ids of this store's sessions that have ended
        # a dict used as an ordered set: a cancel is O(1) (a list's remove made dropping 100
        # deleted topics of 100 partitions, 10,000 cancels, quadratic in the watches held)
        self._watches: dict[Rewatch, None] = {}
        self._session_listeners: list[Callable[[], None]] = []
        self._session_lost_listeners: list[Callable[[], None]] = []
        self._lock = threading.Lock()
        self._multi_read = True  # until the server refuses it (`get_many`)
        self._closed = False
        self._lost = False
        with translated():
            self._client.start(timeout=connect_timeout)
            if chroot not in (None, "", "/"):  # kazoo's ensure_path tolerates NodeExists
                self._client.retry(self._client.ensure_path, validate_path(chroot))
                self._client.chroot = chroot
        self._client.add_listener(self._on_state)
        if self._client.connected:
            self._note_session()
            self._connected.set()

    # -- reads -------------------------------------------------------------------------------

    def _read(self, func: Callable, *args: object) -> object:
        self._check_open()
        with translated():
            return self._client.retry(func, *args)  # kazoo copies the policy per call

    def get(self, path: str) -> tuple[bytes, int]:
        data, stat = self._read(self._client.get, validate_path(path))
        return data or b"", stat.version

    def exists(self, path: str) -> int | None:
        stat = self._read(self._client.exists, validate_path(path))
        return None if stat is None else stat.version

    def creation_id(self, path: str) -> int:
        stat = self._read(self._client.exists, validate_path(path))
        if stat is None:
            raise errors.NoNodeError(path)
        return stat.czxid

    def children(self, path: str) -> list[str]:
        return sorted(self._read(self._client.get_children, validate_path(path)))

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
        self._check_open()
        validate_path(path + "0" if sequential else path)
        if path == "/":
            raise errors.NodeExistsError("/")
        with translated():
            return self._client.create(
                path,
                check_data(data),
                ephemeral=ephemeral,
                sequence=sequential,
                makepath=make_parents,
            )

    def ensure_path(self, path: str, data: bytes = b"") -> None:
        self._check_open()
        if validate_path(path) == "/":
            return
        data = check_data(data)

        def attempt() -> None:
            try:
                self._client.create(path, data, makepath=True)
            except kz.NodeExistsError:
                pass  # there already: another's, or an earlier attempt of ours

        self._retried_write(attempt)

    def create_checked_ephemeral(self, path: str, data: bytes = b"") -> int:
        self._check_open()
        if validate_path(path) == "/":
            raise errors.NodeExistsError("/")
        data = check_data(data)
        return self._retried_write(lambda: self._checked_ephemeral(path, data))

    def _checked_ephemeral(self, path: str, data: bytes) -> int:
        """One attempt of `create_checked_ephemeral`: create, then read the znode's owner.

        The owner is read even after a create that succeeded, so the creation id returned is
        that of a znode this session holds now (a create answered in a session that expired
        since finds the znode gone, and the next attempt makes it again). The session is the
        same before and after the attempt, so the read was answered in it (a lost session
        never comes back).
        """
        session = self._session_id()
        try:
            self._client.create(path, data, ephemeral=True)
        except kz.NodeExistsError:
            pass  # ours (an attempt applied but unanswered) or another session's: look
        stat = self._client.exists(path)
        if stat is None or self._session_id() != session:
            raise _Inconclusive(path)
        if stat.ephemeralOwner != session and stat.ephemeralOwner in self._past_sessions:
            # Held by a session of this store's that has ended: ZooKeeper left it behind
            # (ZOOKEEPER-2985; Kafka's KAFKA-7165 workaround): delete it, then create it again.
            log.info("%s is still held by this store's ended ZooKeeper session 0x%x: re-creating it",
                     path, stat.ephemeralOwner)
            with contextlib.suppress(kz.NoNodeError):
                self._client.delete(path)
            raise _Inconclusive(path)
        if stat.ephemeralOwner != session:
            raise errors.NodeExistsError(
                f"{path} is held by ZooKeeper session 0x{stat.ephemeralOwner:x}, "
                f"not by this one (0x{session:x})"
            )
        return stat.czxid

    def _session_id(self) -> int:
        current = self._client.client_id  # None while kazoo has no live session
        if current is None:
            raise kz.ConnectionLoss("no ZooKeeper session")
        return current[0]

    def _retried_write(self, attempt: Callable[[], T]) -> T:
        """Run ``attempt`` until it is answered; see the module docstring for the bounds.

        Only for writes that a repetition cannot apply twice.
        """
        delay = _WRITE_BACKOFF_FIRST_S
        with translated():
            for tries in range(1, _WRITE_ATTEMPTS + 1):
                self._check_open()
                try:
                    return attempt()
                except _TRANSIENT as exc:
                    failure = exc
                if tries == _WRITE_ATTEMPTS:
                    break
                log.info("a ZooKeeper write got no answer (%r); retrying once connected", failure)
                time.sleep(delay)  # also lets the state listener see the connection go
                delay = min(delay * 2, _WRITE_BACKOFF_MAX_S)
                if not self._wait_connected():
                    break
            raise errors.StoreUnavailableError(
                f"ZooKeeper did not answer a write: {failure!r}"
            ) from failure

    def _wait_connected(self) -> bool:
        """Wait up to the session timeout for a connection, in slices (see the module
        docstring: a pause of the process uses up at most one slice)."""
        slices = max(1, round(self._session_timeout / _CONNECT_WAIT_SLICE_S))
        for _ in range(slices):
            if self._closed:
                return False
            if self._connected.wait(_CONNECT_WAIT_SLICE_S):
                return True
        return False

    def set(self, path: str, data: bytes, version: int = -1) -> int:
        self._check_open()
        with translated():
            return self._client.set(validate_path(path), check_data(data), version).version

    def delete(self, path: str, version: int = -1, recursive: bool = False) -> None:
        self._check_open()
        if validate_path(path) == "/":
            raise errors.InvalidPathError("the root znode cannot be deleted")
        if not recursive:
            with translated():
                self._client.delete(path, version)
            return
        current = self.exists(path)
        if current is None:
            raise errors.NoNodeError(path)
        if version not in (-1, current):
            raise errors.BadVersionError(f"{path}: expected version {version}, found {current}")
        doomed = self._subtree_post_order(path)
        ops: list[Op] = [DeleteOp(p) for p in doomed[:-1]] + [DeleteOp(path, version)]
        for start in range(0, len(ops), _RECURSIVE_DELETE_BATCH):
            self.multi(ops[start : start + _RECURSIVE_DELETE_BATCH])

    def _subtree_post_order(self, path: str) -> list[str]:
        out: list[str] = []
        stack = [(path, False)]
        while stack:
            current, expanded = stack.pop()
            if expanded:
                out.append(current)
                continue
            stack.append((current, True))
            try:
                names = self.children(current)
            except errors.NoNodeError:
                stack.pop()  # vanished meanwhile: nothing left to delete there
                continue
            stack += [(f"{current}/{name}", False) for name in names]
        return out

    def multi(self, ops: Sequence[Op]) -> list[str | int | None]:
        self._check_open()
        ops = list(ops)
        if not ops:
            return []
        transaction = self._client.transaction()
        for op in ops:
            add_op(transaction, op)
        with translated():
            results = transaction.commit()
        return op_results(ops, results)

    def multi_many(self, multis: Sequence[Sequence[Op]]) -> list[list | Exception]:
        """Every multi sent before the first answer is awaited (`commit_many`): a
        controller's 10,000 state writes are ten multis, and one at a time each waited behind
        the watch events and re-reads the previous one set off on this session."""
        self._check_open()
        return commit_many(self._client, multis)

    # -- watches and sessions ----------------------------------------------------------------

    def watch_data(self, path: str, callback: WatchCallback) -> WatchHandle:
        return self._watch("data", path, callback)

    def watch_children(self, path: str, callback: WatchCallback) -> WatchHandle:
        return self._watch("children", path, callback)

    def _watch(self, kind: str, path: str, callback: WatchCallback) -> WatchHandle:
        self._check_open()
        watch = Rewatch(self, kind, validate_path(path), callback)
        with self._lock:
            self._watches[watch] = None
        try:
            self._read(watch.arm)  # a read: retried across a connection loss or a new session
        except errors.StoreUnavailableError as exc:
            # Kept: the reconnection sets every watch again and runs its callback, so a watch
            # asked for while the session is being replaced misses nothing.
            log.info("the watch on %s is set once ZooKeeper is back (%s)", path, exc)
        return watch.handle

    def watch_data_many(self, watches: Sequence[tuple[str, WatchCallback]]) -> list[WatchHandle]:
        """Each watch set with an ``exists_async``, `BULK_READ_WINDOW` in flight at a time;
        one that cannot be set now is kept and set on reconnection, as in `_watch`."""
        self._check_open()
        made = [Rewatch(self, "data", validate_path(path), callback) for path, callback in watches]
        with self._lock:
            self._watches.update(dict.fromkeys(made))
        for start in range(0, len(made), BULK_READ_WINDOW):
            window = made[start:start + BULK_READ_WINDOW]
            with translated():
                pending = [watch.arm_async() for watch in window]
            for watch, result in zip(window, pending):
                try:
                    result.get()
                except Exception:  # noqa: BLE001 - a lost connection: the retried arm decides
                    try:
                        self._read(watch.arm)
                    except errors.StoreUnavailableError as exc:
                        log.info("the watch on %s is set once ZooKeeper is back (%s)",
                                 watch.path, exc)
        return [watch.handle for watch in made]

    def _forget(self, watch: Rewatch) -> None:
        with self._lock:
            self._watches.pop(watch, None)

    def add_session_listener(self, callback: Callable[[], None]) -> None:
        with self._lock:
            self._session_listeners.append(callback)

    @property
    def connected(self) -> bool:
        """Whether kazoo's state is CONNECTED, as its listener last reported it: False while
        SUSPENDED (connection lost, the session may live on) or LOST (session expired), and
        once the store is closed."""
        return self._connected.is_set() and not self._closed

    def add_session_lost_listener(self, callback: Callable[[], None]) -> None:
        with self._lock:
            self._session_lost_listeners.append(callback)

    def _on_state(self, state: str) -> None:
        # Runs on kazoo's connection thread, which must not block: hand the work over.
        if state != KazooState.CONNECTED:
            self._connected.clear()
            if state == KazooState.LOST and not self._closed:
                # before the new session's watches fire: a controller must resign first
                with self._lock:
                    lost_listeners = list(self._session_lost_listeners)
                for listener in lost_listeners:
                    try:
                        listener()
                    except Exception:
                        log.exception("metadata session-lost listener failed")
            self._lost = self._lost or state == KazooState.LOST
            return
        self._note_session()
        self._connected.set()
        if not self._closed:
            new_session, self._lost = self._lost, False
            self._client.handler.spawn(self._on_reconnected, new_session)

    def _note_session(self) -> None:
        """Remember the session this store had before, once kazoo reports another one."""
        current = self._client.client_id
        if current is None:
            return
        if self._session is not None and self._session != current[0]:
            self._past_sessions.add(self._session)
        self._session = current[0]

    def _on_reconnected(self, new_session: bool) -> None:
        with self._lock:
            watches = list(self._watches)
            listeners = list(self._session_listeners) if new_session else []
        for watch in watches:
            try:
                watch.arm()
            except Exception as exc:
                log.warning("could not re-arm the watch on %s: %r", watch.path, exc)
            watch.run()
        for listener in listeners:
            try:
                listener()
            except Exception:
                log.exception("metadata session listener failed")

    # -- lifecycle ---------------------------------------------------------------------------

    def _check_open(self) -> None:
        if self._closed:
            raise errors.StoreClosedError("the metadata store is closed")

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        with self._lock:
            for watch in self._watches:
                watch.handle.cancelled = True
            self._watches.clear()
        self._client.remove_listener(self._on_state)
        try:
            self._client.stop()
        finally:
            self._client.close()
