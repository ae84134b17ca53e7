"""``RecordFuture``: the future ``AsyncProducer.send`` returns, one ``(result, index)`` pair.

A ``RecordFuture`` is a tuple ``(ProduceRequestResult, index of the record in its batch)``,
Java's ``FutureRecordMetadata``: making one is a single C-level tuple construction (no Python
``__init__``, about a third of an ``asyncio.Future``'s cost), and completing a batch completes
all of its records at once (see ``produce_request_result``); the ``RecordMetadata`` is built
when ``result()`` asks for it.

It is an asyncio future by duck typing (``asyncio.isfuture`` is true), on the loop of the
producer that made it, and behaves as one:

- ``await future`` gives the RecordMetadata or raises the batch's error;
- ``result()``, ``exception()``, ``done()``, ``cancelled()``, ``get_loop()``,
  ``add_done_callback(fn, context=...)`` (``fn(future)`` is scheduled on the loop) and
  ``remove_done_callback(fn)``;
- ``cancel(msg)`` cancels the future, not the record: the record is still delivered (and its
  ``callback=`` still called), as when a plain asyncio future was cancelled. Cancelling a task
  that awaits the future cancels the future, as with asyncio;
- ``asyncio.gather``, ``wait_for``, ``wait``, ``as_completed``, ``shield`` and
  ``loop.run_until_complete`` accept it (they use only the methods above).

Not supported: ``set_result``/``set_exception`` (the producer settles it), and use from
another thread than the loop's (as with asyncio futures). Equality and hashing are by
identity, not by the tuple's items; being a tuple otherwise shows only in ``len``/indexing.
"""

from __future__ import annotations

import contextvars
from asyncio import InvalidStateError

from odradek.client.produce_request_result import ProduceRequestResult


class RecordFuture(tuple):
    # No __slots__: a task awaiting the future sets _asyncio_future_blocking on the instance
    # (its __dict__ is made only then).
    _asyncio_future_blocking = False
    __hash__ = object.__hash__
    __eq__ = object.__eq__
    __ne__ = object.__ne__

    @classmethod
    def standalone(cls, topic: str, timestamp: int, loop) -> RecordFuture:
        """The future of a record that has no batch yet (see ``ProduceRequestResult``)."""
        return cls((ProduceRequestResult.standalone(topic, timestamp, loop), 0))

    def __repr__(self) -> str:
        result, index = self[0], self[1]
        if result.is_cancelled(index):
            state = "cancelled"
        elif not result.done:
            state = "pending"
        elif result.error is not None:
            state = f"exception={result.error!r}"
        else:
            state = f"result={result.metadata(index)!r}"
        return f"<RecordFuture {state}>"

    def get_loop(self):
        return self[0].loop

    def done(self) -> bool:
        result = self[0]
        return result.done or (result.cancelled is not None and self[1] in result.cancelled)

    def cancelled(self) -> bool:
        cancelled = self[0].cancelled
        return cancelled is not None and self[1] in cancelled

    def result(self):
        result, index = self[0], self[1]
        if result.cancelled is not None and index in result.cancelled:
            raise result.cancelled_error(index)
        if not result.done:
            raise InvalidStateError("Result is not set.")
        if result.error is not None:
            raise result.error.with_traceback(result.error_tb)
        return result.metadata(index)

    def exception(self) -> BaseException | None:
        result, index = self[0], self[1]
        if result.cancelled is not None and index in result.cancelled:
            raise result.cancelled_error(index)
        if not result.done:
            raise InvalidStateError("Exception is not set.")
        return result.error

    def add_done_callback(self, fn, *, context=None) -> None:
        if context is None:
            context = contextvars.copy_context()
        if self.done():
            self[0].loop.call_soon(fn, self, context=context)
        else:
            self[0].add_callback(self[1], fn, self, context)

    def remove_done_callback(self, fn) -> int:
        return self[0].remove_callback(self[1], fn)

    def cancel(self, msg=None) -> bool:
        return self[0].cancel(self[1], msg)

    def _make_cancelled_error(self):  # asyncio.gather calls it on a cancelled child
        return self[0].cancelled_error(self[1])

    def __await__(self):
        if not self.done():
            self._asyncio_future_blocking = True
            yield self  # the task adds its wake-up with add_done_callback
        if not self.done():
            raise RuntimeError("await wasn't used with future")
        return self.result()

    __iter__ = __await__  # as asyncio.Future: 'yield from future' in generator coroutines
