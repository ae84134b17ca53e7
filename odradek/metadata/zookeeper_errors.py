"""How kazoo's exceptions become the metadata store's (`odradek.metadata.errors`), at the
ZooKeeper store's boundary: callers see the same errors on ZooKeeper as on the embedded store.
A kazoo exception with no counterpart passes through unchanged."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from kazoo import exceptions as kz
from kazoo.handlers.threading import KazooTimeoutError
from kazoo.retry import RetryFailedError

from odradek.metadata import errors

_TRANSLATION: tuple[tuple[type[Exception], type[errors.StoreError]], ...] = (
    (kz.NoNodeError, errors.NoNodeError),
    (kz.NodeExistsError, errors.NodeExistsError),
    (kz.BadVersionError, errors.BadVersionError),
    (kz.NotEmptyError, errors.NotEmptyError),
    (kz.NoChildrenForEphemeralsError, errors.NoChildrenForEphemeralsError),
    (kz.BadArgumentsError, errors.InvalidPathError),
    (kz.ConnectionClosedError, errors.StoreUnavailableError),
    (kz.ConnectionLoss, errors.StoreUnavailableError),
    (kz.SessionExpiredError, errors.StoreUnavailableError),
    (kz.OperationTimeoutError, errors.StoreUnavailableError),
    (KazooTimeoutError, errors.StoreUnavailableError),
    (RetryFailedError, errors.StoreUnavailableError),  # a read's retries all failed
)
def translate(exc: Exception) -> Exception:
    """The odradek error for a kazoo exception (the exception itself if unknown)."""
    for source, target in _TRANSLATION:
        if isinstance(exc, source):
            return target(str(exc) or type(exc).__name__)
    return exc


@contextlib.contextmanager
def translated() -> Iterator[None]:
    """Raise the store's error for a kazoo exception raised inside the block."""
    try:
        yield
    except errors.StoreError:
        raise
    except Exception as exc:
        mapped = translate(exc)
        if mapped is exc:
            raise
        raise mapped from exc
