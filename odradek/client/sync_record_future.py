"""``SyncRecordFuture``: the ``concurrent.futures.Future`` the synchronous ``Producer.send``
returns, costing nearly nothing per record until someone waits on it.

Like ``record_future.RecordFuture`` it is a ``(ProduceRequestResult, index)`` tuple, and
a ``concurrent.futures.Future`` by class: ``send`` makes it in the caller's thread as the
batch appends the record (``ProducerBatch.append(..., future_type=cls)``, one tuple
construction), or around the single-record result of a record that is held or refused. The
outcome is read from the batch result, which the loop settles once per batch: a future
nobody waits on is never touched again, neither completed nor notified.

States:

- not *materialized* (the common case): no Condition, waiter list or state of its own
  (``Future.__init__`` is never run: ``__init__`` is ``object``'s).
  ``done()``/``result()``/``exception()`` answer from a settled result without locking;
- *materialized*: the first use of ``Future``'s own machinery (``result()`` or
  ``exception()`` on an unsettled record, ``add_done_callback``, ``cancel``,
  ``concurrent.futures.wait``/``as_completed``, ``repr``) reaches a missing ``_condition``,
  ``_state``, ... attribute, and ``__getattr__`` builds the ``Future`` fields under one
  module lock: FINISHED at once when the result is settled, else PENDING, and the owner is
  asked (``_owner._watch(future)``) to settle it on the loop when the result settles,
  through ``Future.set_result``/``set_exception``, with the usual notifications and callbacks.

``cancel()`` behaves as before: a pending future becomes cancelled (the record is still
sent, its ``callback=`` still called); a settled one stays as it is. Equality and hashing are
by identity; being a tuple shows only in ``len``/indexing; it cannot be weakly referenced.

``_owner`` is a class attribute of a per-producer subclass, so making a future sets nothing.
"""

from __future__ import annotations

import threading
from concurrent.futures import Future, InvalidStateError
from concurrent.futures._base import FINISHED, PENDING

_lock = threading.Lock()
_FIELDS = frozenset({"_condition", "_state", "_result", "_exception", "_waiters", "_done_callbacks"})


class SyncRecordFuture(tuple, Future):
    # Made as ``cls((result, index))``: tuple's __new__, and no Future.__init__.
    __init__ = object.__init__
    __hash__ = object.__hash__
    __eq__ = object.__eq__
    __ne__ = object.__ne__
    __repr__ = Future.__repr__
    _owner = None  # has _watch(future): settle it on the loop once the result settles

    def __getattr__(self, name: str):
        # Only for attributes not set yet: the Future fields of an unmaterialized future.
        if name in _FIELDS:
            self._materialize()
            return self.__dict__[name]
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")

    def _settled(self) -> bool:
        """Whether this future is unmaterialized and its record settled."""
        return self[0].done and "_state" not in self.__dict__

    def done(self) -> bool:
        if "_state" in self.__dict__:
            return Future.done(self)
        return self[0].done

    def cancelled(self) -> bool:
        return "_state" in self.__dict__ and Future.cancelled(self)

    def running(self) -> bool:
        return False  # never RUNNING: a record goes from pending to settled

    def result(self, timeout: float | None = None):
        if self._settled():
            result = self[0]
            if result.error is not None:
                raise result.error.with_traceback(result.error_tb)
            return result.metadata(self[1])
        return Future.result(self, timeout)

    def exception(self, timeout: float | None = None):
        if self._settled():
            return self[0].error
        return Future.exception(self, timeout)

    def _materialize(self) -> None:
        with _lock:
            fields = self.__dict__
            if "_state" in fields:
                return
            fields["_condition"] = threading.Condition()
            fields["_waiters"] = []
            fields["_done_callbacks"] = []
            result = self[0]
            if result.done:
                fields["_exception"] = result.error
                fields["_result"] = None if result.error is not None else result.metadata(self[1])
                fields["_state"] = FINISHED  # last: its presence says "materialized"
                return
            fields["_result"] = fields["_exception"] = None
            fields["_state"] = PENDING
        self._owner._watch(self)

    def settle(self, _=None) -> None:
        """On the loop: take the settled result's outcome (nothing if cancelled meanwhile)."""
        result = self[0]
        try:
            if result.error is not None:
                Future.set_exception(self, result.error)
            else:
                Future.set_result(self, result.metadata(self[1]))
        except InvalidStateError:
            pass  # cancelled by its owner: the record was sent all the same

    def settle_when_done(self) -> None:
        """On the loop: ``settle`` now if the result is settled, else once it is."""
        result = self[0]
        if result.done:
            self.settle()
        else:
            result.add_callback(self[1], self.settle, self, None)
