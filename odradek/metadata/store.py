"""The metadata store interface: a tree of znodes with ZooKeeper's semantics.

Everything above this interface (cluster metadata, the controller) is written against it, so a
single broker runs on the embedded file-backed store and a cluster on ZooKeeper (via kazoo)
with the same code. The contract, tested by ``tests/metadata/store_contract.py`` on every
backend:

* Paths are absolute, ``/``-separated, without empty, ``.`` or ``..`` components and without a
  trailing slash; ``/`` always exists and cannot be deleted.
* Every znode has ``data`` (bytes, at most `MAX_DATA_BYTES`) and a ``version`` that is 0 at
  creation and grows by one on every `set`. Writes that name a version other than -1 fail with
  `BadVersionError` unless it is the current version (compare-and-set).
* A sequential create appends a 10-digit, zero-padded counter to the name: the number of
  children created under the parent before it (deletions do not count, as in ZooKeeper 3.8),
  so names sort by age and are never reused.
* Ephemeral znodes belong to the session (the store object): they vanish when it closes and
  cannot have children.
* Watches are persistent: a data watch fires after the znode at its path is created, changed
  or deleted; a children watch fires after a child of its path is created or deleted, and when
  the path itself is created or deleted. Watches may be set on paths that do not exist yet.
  The callback receives the watched path and must re-read what it needs: the store promises
  that a callback runs after every change it reports, not one callback per change (ZooKeeper
  coalesces), nor the data that changed.
* `multi` applies a list of operations atomically: all or none, watches fired once after.
* `get_many` and `children_many` read many znodes in one call (each read on its own, not one
  atomic view); absent znodes come back as None.
* A plain write is tried once: on ZooKeeper a connection loss leaves unknown whether it was
  applied, so retrying it is the caller's business. Two writes are safe to repeat and are
  retried by the store across a connection loss or a new session: `ensure_path` (a persistent
  znode that may already be there) and `create_checked_ephemeral` (Kafka's
  ``KafkaZkClient.checkedEphemeralCreate``: an ephemeral that this session may already hold).
"""

from __future__ import annotations

import abc
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from odradek.metadata.errors import DataTooLargeError, InvalidPathError, NoNodeError, StoreError

MAX_DATA_BYTES = 1024 * 1024 - 1024
"""ZooKeeper's default jute.maxbuffer is 1 MiB for a whole packet; keep 1 KiB for the header."""


def check_data(data: bytes) -> bytes:
    """``data`` as bytes; `TypeError` if it is not bytes-like, `DataTooLargeError` above
    `MAX_DATA_BYTES`. Every store checks a znode's data so, whatever it is stored on."""
    if not isinstance(data, (bytes, bytearray, memoryview)):
        raise TypeError(f"znode data must be bytes, not {type(data).__name__}")
    data = bytes(data)
    if len(data) > MAX_DATA_BYTES:
        raise DataTooLargeError(f"znode data of {len(data)} bytes exceeds {MAX_DATA_BYTES}")
    return data

WatchCallback = Callable[[str], None]


@dataclass(frozen=True, slots=True)
class CreateOp:
    """Create ``path`` (in `multi`); the result is the created path (with its sequence suffix)."""

    path: str
    data: bytes = b""
    ephemeral: bool = False
    sequential: bool = False


@dataclass(frozen=True, slots=True)
class SetOp:
    """Replace the data of ``path``; the result is the new version."""

    path: str
    data: bytes
    version: int = -1


@dataclass(frozen=True, slots=True)
class DeleteOp:
    """Delete the childless znode ``path``; the result is None."""

    path: str
    version: int = -1


@dataclass(frozen=True, slots=True)
class CheckOp:
    """Fail the whole `multi` with `BadVersionError` unless ``path`` is at ``version``."""

    path: str
    version: int


Op = CreateOp | SetOp | DeleteOp | CheckOp


class WatchHandle:
    """Returned by the watch methods; `cancel()` stops further callbacks (idempotent)."""

    __slots__ = ("_cancel", "cancelled")

    def __init__(self, cancel: Callable[[], None]) -> None:
        self._cancel = cancel
        self.cancelled = False

    def cancel(self) -> None:
        if not self.cancelled:
            self.cancelled = True
            self._cancel()


class MetadataStore(abc.ABC):
    """A synchronous znode store; see the module docstring for the contract."""

    watches_in_writer_thread = False
    """Whether watch callbacks run in the writer's thread before the write returns (the
    embedded store): a reader of what the callbacks build then sees every write at once."""

    @abc.abstractmethod
    def create(
        self,
        path: str,
        data: bytes = b"",
        *,
        ephemeral: bool = False,
        sequential: bool = False,
        make_parents: bool = False,
    ) -> str:
        """Create a znode and return its path (with the sequence suffix, if sequential).

        Raises NodeExistsError, NoNodeError (parent missing and not ``make_parents``),
        NoChildrenForEphemeralsError. Parents made by ``make_parents`` are persistent and empty.
        """

    @abc.abstractmethod
    def ensure_path(self, path: str, data: bytes = b"") -> None:
        """Create the persistent znode ``path`` with ``data`` (and its missing parents, empty)
        unless a znode is there already, whatever its data or kind.

        Retried across a connection loss or a new session: an attempt that was applied but
        unanswered is found by the next one as an existing znode. Raises StoreUnavailableError
        when ZooKeeper does not come back in time (see the backend), NoChildrenForEphemeralsError.
        """

    @abc.abstractmethod
    def create_checked_ephemeral(self, path: str, data: bytes = b"") -> int:
        """Create the ephemeral znode ``path``, or accept the one this session already holds,
        and return its creation id (`creation_id`; Kafka's broker epoch for a registration).

        Retried across a connection loss or a new session. A znode already at ``path`` counts
        as created if it is an ephemeral of this store's current session (an earlier attempt
        that was applied but unanswered, or an earlier call: its data is then left as it is);
        any other znode there (another session's, or a persistent one) raises
        NodeExistsError. Also raises NoNodeError (no parent), StoreUnavailableError when
        ZooKeeper does not come back in time.
        """

    @abc.abstractmethod
    def get(self, path: str) -> tuple[bytes, int]:
        """Return ``(data, version)``; raises NoNodeError."""

    @abc.abstractmethod
    def set(self, path: str, data: bytes, version: int = -1) -> int:
        """Replace the data and return the new version; raises NoNodeError, BadVersionError."""

    @abc.abstractmethod
    def delete(self, path: str, version: int = -1, recursive: bool = False) -> None:
        """Delete a znode; raises NoNodeError, BadVersionError, NotEmptyError.

        With ``recursive`` the whole subtree goes (children first); ``version`` then applies to
        ``path`` itself.
        """

    @abc.abstractmethod
    def exists(self, path: str) -> int | None:
        """Return the znode's version, or None if there is no znode at ``path``."""

    @abc.abstractmethod
    def creation_id(self, path: str) -> int:
        """An id of the znode's creation that a later creation at the same path exceeds
        (ZooKeeper's ``czxid``; Kafka's broker epoch is that of ``/brokers/ids/<id>``).
        Raises NoNodeError."""

    @abc.abstractmethod
    def children(self, path: str) -> list[str]:
        """Return the names (not paths) of the children, sorted; raises NoNodeError."""

    def get_many(self, paths: Sequence[str]) -> list[tuple[bytes, int] | None]:
        """`get` of every path, in order: ``(data, version)``, or None where there is no znode.

        Not atomic: each read sees the tree at some moment of the call. ZooKeeper's store
        pipelines the reads (thousands in flight on one connection instead of one round trip
        each), so a controller reads 30,000 partition states in well under a second; this
        default reads one by one."""
        out: list[tuple[bytes, int] | None] = []
        for path in paths:
            try:
                out.append(self.get(path))
            except NoNodeError:
                out.append(None)
        return out

    def children_many(self, paths: Sequence[str]) -> list[list[str] | None]:
        """`children` of every path, in order (sorted names), or None where there is no
        znode; pipelined like `get_many`."""
        out: list[list[str] | None] = []
        for path in paths:
            try:
                out.append(self.children(path))
            except NoNodeError:
                out.append(None)
        return out

    @abc.abstractmethod
    def multi(self, ops: Sequence[Op]) -> list[str | int | None]:
        """Apply ``ops`` atomically and return one result per op (see the op classes).

        On failure nothing is applied and the first failing op's error is raised.
        """

    def multi_many(self, multis: Sequence[Sequence[Op]]) -> list[list | Exception]:
        """`multi` of each op list, in order, each atomic on its own (not all together): per
        multi its results, or the error it failed with (a `StoreError`, or the ``OSError`` of
        the embedded store's disk). ZooKeeper's store sends them all before it waits for the
        first answer (ZooKeeper applies one session's requests in order, so they are applied
        in this order); this default applies them one by one."""
        out: list[list | Exception] = []
        for ops in multis:
            try:
                out.append(self.multi(ops))
            except (StoreError, OSError) as e:
                out.append(e)
        return out

    @abc.abstractmethod
    def watch_data(self, path: str, callback: WatchCallback) -> WatchHandle:
        """Call ``callback(path)`` after each creation, change or deletion of ``path``."""

    def watch_data_many(self, watches: Sequence[tuple[str, WatchCallback]]) -> list[WatchHandle]:
        """`watch_data` for every ``(path, callback)``, in order: ZooKeeper's store sets them
        with pipelined requests (a broker watching the states of 10,000 new partitions),
        this default one by one."""
        return [self.watch_data(path, callback) for path, callback in watches]

    @abc.abstractmethod
    def watch_children(self, path: str, callback: WatchCallback) -> WatchHandle:
        """Call ``callback(path)`` after the children of ``path`` change."""

    def add_session_listener(self, callback: Callable[[], None]) -> None:  # noqa: B027
        """Call ``callback()`` after the store opened a new session (ephemerals were lost).

        The embedded store never loses its session, so by default this does nothing.
        """

    def add_session_lost_listener(self, callback: Callable[[], None]) -> None:  # noqa: B027
        """Call ``callback()`` as soon as the store learns that its session expired (before
        it reconnects with a new one, re-arms its watches and calls the session listeners).
        Called on the store's own thread: the callback must not block or use the store.

        The embedded store never loses its session, so by default this does nothing.
        """

    @property
    def connected(self) -> bool:
        """Whether the store reaches its servers now: while False, reads and writes may fail
        with StoreUnavailableError, watches report nothing, and what this session holds
        (``/controller`` among it) may already be another's. The embedded store is always
        connected; ZooKeeper's is not while kazoo is SUSPENDED or LOST."""
        return True

    @abc.abstractmethod
    def close(self) -> None:
        """End the session: ephemeral znodes vanish, watches stop. Idempotent."""

    def __enter__(self) -> MetadataStore:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


def validate_path(path: str) -> str:
    """Return ``path`` if it is a valid znode path, else raise InvalidPathError."""
    if not isinstance(path, str) or not path.startswith("/"):
        raise InvalidPathError(f"znode path must be an absolute str: {path!r}")
    if path == "/":
        return path
    parts = path[1:].split("/")
    for part in parts:
        if part in ("", ".", "..") or "\x00" in part:
            raise InvalidPathError(f"invalid znode path: {path!r}")
    return path


def parent_path(path: str) -> str:
    """The parent of a valid, non-root path: ``/a/b`` -> ``/a``, ``/a`` -> ``/``."""
    cut = path.rindex("/")
    return path[:cut] if cut > 0 else "/"


def join_path(parent: str, name: str) -> str:
    """``join_path('/a', 'b') == '/a/b'``, ``join_path('/', 'b') == '/b'``."""
    return parent + name if parent == "/" else f"{parent}/{name}"


def sequence_name(path: str, counter: int) -> str:
    """Append ZooKeeper's sequence suffix: 10 digits of the (32-bit signed) counter."""
    return f"{path}{counter:010d}"
