"""``SyncRecordFuture``: the ``concurrent.futures.Future`` the synchronous ``Producer.send``
returns, costing nearly nothing per record until someone waits on it.

The record is handed to the producer's loop thread in a queue; when the loop puts it in a
batch it stores the record's asyncio-side future (``record_future.RecordFuture``) as
``_link``. From then on the outcome is read from the link's batch result, which the loop
settles once per batch: a future nobody waits on is never touched again, neither completed
nor notified.

States, all reached through the link:

- not *materialized* (the common case): no Condition, waiter list or state of its own
  (``Future.__init__`` is never run; the producer makes the object with ``object.__new__``).
  ``done()``/``result()``/``exception()`` answer from a settled link without locking;
- *materialized*: the first use of ``Future``'s own machinery (``result()`` or
  ``exception()`` on an unsettled record, ``add_done_callback``, ``cancel``,
  ``concurrent.futures.wait``/``as_completed``, ``repr``) reaches a missing ``_condition``,
  ``_state``, ... attribute, and ``__getattr__`` builds the ``Future`` fields under one
  module lock: FINISHED at once when the link is settled, else PENDING, and the owner is
  asked (``_owner._watch(future)``) to settle it on the loop when the link settles, through
  ``Future.set_result``/``set_exception``, with the usual notifications and callbacks.

``cancel()`` behaves as before: a pending future becomes cancelled (the record is still
sent, its ``callback=`` still called); a settled one stays as it is.

``_owner`` is a class attribute of a per-producer subclass, so making a future sets nothing.
"""

from __future__ import annotations

import threading
from concurrent.futures import Future, InvalidStateError
from concurrent.futures._base import FINISHED, PENDING

_lock = threading.Lock()
_FIELDS = frozenset({"_condition", "_state", "_result", "_exception", "_waiters", "_done_callbacks"})
new_future = object.__new__  # how the producer makes one: without Future.__init__


class SyncRecordFuture(Future):
    _link = None  # the RecordFuture of the placed record, set on the loop thread
    _owner = None  # has _watch(future): settle it on the loop once the link settles

    def __getattr__(self, name: str):
        # Only for attributes not set yet: the Future fields of an unmaterialized future.
        if name in _FIELDS:
            self._materialize()
            return self.__dict__[name]
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")

    def _settled_link(self):
        """The link, when this future is unmaterialized and its record settled; else None."""
        if "_state" in self.__dict__:
            return None
        link = self._link
        return link if link is not None and link[0].done else None

    def done(self) -> bool:
        if "_state" in self.__dict__:
            return Future.done(self)
        link = self._link
        return link is not None and link[0].done

    def cancelled(self) -> bool:
        return "_state" in self.__dict__ and Future.cancelled(self)

    def running(self) -> bool:
        return False  # never RUNNING: a record goes from pending to settled

    def result(self, timeout: float | None = None):
        link = self._settled_link()
        if link is not None:
            return link.result()
        return Future.result(self, timeout)

    def exception(self, timeout: float | None = None):
        link = self._settled_link()
        if link is not None:
            return link[0].error
        return Future.exception(self, timeout)

    def _materialize(self) -> None:
        with _lock:
            fields = self.__dict__
            if "_state" in fields:
                return
            fields["_condition"] = threading.Condition()
            fields["_waiters"] = []
            fields["_done_callbacks"] = []
            link = self._link
            if link is not None and link[0].done:
                result = link[0]
                fields["_exception"] = result.error
                fields["_result"] = None if result.error is not None else result.metadata(link[1])
                fields["_state"] = FINISHED  # last: its presence says "materialized"
                return
            fields["_result"] = fields["_exception"] = None
            fields["_state"] = PENDING
        self._owner._watch(self)

    def settle_from(self, link) -> None:
        """On the loop: take the settled link's outcome (nothing if cancelled meanwhile)."""
        error = link[0].error
        try:
            if error is not None:
                Future.set_exception(self, error)
            else:
                Future.set_result(self, link.result())
        except InvalidStateError:
            pass  # cancelled by its owner: the record was sent all the same
