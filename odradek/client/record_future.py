"""``RecordFuture``: a ``concurrent.futures.Future`` that makes its Condition only if needed.

The synchronous producer returns one future per record. A plain ``concurrent.futures.Future``
builds a ``threading.Condition`` (and its RLock) in ``__init__`` and notifies it on
completion, a few microseconds per record, mostly for futures nobody ever waits on. This
subclass keeps the whole ``Future`` API and behaviour but creates the Condition the first
time anything asks for it (``result``, ``done``, ``add_done_callback``, ``wait`` and
``as_completed`` all do), under one module-wide lock.

Completion is where the saving is: ``set_result``/``set_exception`` take the module lock; if
no Condition exists yet, no thread can be waiting or holding it (making one needs the same
lock), so the state is set directly, with no notify and no callbacks to run. Otherwise the
base class completes it as usual. This relies on ``Future``'s documented-by-source fields
(``_condition``, ``_state``, ``_result``, ``_exception``, ``_waiters``, ``_done_callbacks``),
unchanged since Python 3.2.
"""

from __future__ import annotations

import threading
from concurrent.futures import Future, InvalidStateError
from concurrent.futures._base import (
    CANCELLED,
    CANCELLED_AND_NOTIFIED,
    FINISHED,
    PENDING,
)

_lock = threading.Lock()
_DONE = frozenset({CANCELLED, CANCELLED_AND_NOTIFIED, FINISHED})


class RecordFuture(Future):
    def __init__(self) -> None:  # no super().__init__: it would make the Condition
        self._state = PENDING
        self._result = None
        self._exception = None
        self._waiters = []
        self._done_callbacks = []

    @property
    def _condition(self) -> threading.Condition:
        condition = self.__dict__.get("_cond")
        if condition is None:
            with _lock:
                condition = self.__dict__.get("_cond")
                if condition is None:
                    condition = self.__dict__["_cond"] = threading.Condition()
        return condition

    def set_result(self, result) -> None:
        with _lock:
            if "_cond" not in self.__dict__:
                if self._state in _DONE:
                    raise InvalidStateError(f"{self._state}: {self!r}")
                self._result = result
                self._state = FINISHED
                return
        super().set_result(result)

    def set_exception(self, exception) -> None:
        with _lock:
            if "_cond" not in self.__dict__:
                if self._state in _DONE:
                    raise InvalidStateError(f"{self._state}: {self!r}")
                self._exception = exception
                self._state = FINISHED
                return
        super().set_exception(exception)
