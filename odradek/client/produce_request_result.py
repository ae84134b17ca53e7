"""``ProduceRequestResult``: the one completion shared by every record of a producer batch.

Like the Java producer's ``ProduceRequestResult``, a batch has a single result object and its
records' futures (``record_future.RecordFuture``) are only ``(result, index)`` pairs: nothing
is created or completed per record when the broker answers. Record ``index`` of a batch
appended at ``base_offset`` landed at ``base_offset + index`` (-1 when unknown, as with
acks=0); its timestamp is the broker's append time when the topic uses LogAppendTime
(``log_append_time`` >= 0), else its create time, ``timestamps[index]`` (the batch's own list,
shared, not copied). ``RecordMetadata`` is built only when someone asks for it.

What stays per record is only what a user asked for, kept here until the result settles:

- ``callbacks``: ``[index, fn, future, context]`` entries from ``add_done_callback``; on
  completion each is scheduled with ``loop.call_soon(fn, future, context=context)``, as an
  asyncio future does;
- ``cancelled``: ``{index: message}`` of records whose future was cancelled before the batch
  settled. The record is still sent (it is in the batch's bytes already); only its future
  reports CancelledError, exactly as when a plain asyncio future was cancelled;
- ``forwards``: ``(index, target)`` pairs completed with the record's outcome: a record that
  was given a future of its own (a held record's single-record result, or any future-like
  object with ``done``/``set_result``/``set_exception`` passed as ``send(future=...)``).

A single-record result (``standalone``) serves a record that has no batch yet (held until
its topic's metadata arrives) or never gets one (refused before appending); the batch it
ends up in forwards its outcome with ``settle``.

Thread-safety: owned by the producer's event loop; other threads may read ``done`` (a plain
attribute set last, after the outcome fields) but change nothing.
"""

from __future__ import annotations

from asyncio import CancelledError
from typing import NamedTuple


class RecordMetadata(NamedTuple):
    """Where a produced record landed."""

    topic: str
    partition: int
    offset: int
    timestamp: int


_new_metadata = tuple.__new__


class ProduceRequestResult:
    __slots__ = ("base_offset", "callbacks", "cancelled", "done", "error", "error_tb", "forwards",
                 "log_append_time", "loop", "partition", "timestamps", "topic")

    def __init__(self, topic: str, partition: int, timestamps: list, loop) -> None:
        self.topic = topic
        self.partition = partition
        self.timestamps = timestamps  # the batch's list: one create time per record
        self.loop = loop
        self.base_offset = -1
        self.log_append_time = -1
        self.error: BaseException | None = None
        self.error_tb = None
        self.callbacks: list | None = None
        self.cancelled: dict | None = None
        self.forwards: list | None = None
        self.done = False

    @classmethod
    def standalone(cls, topic: str, timestamp: int, loop) -> ProduceRequestResult:
        """The result of one record that is not (yet) in a batch."""
        return cls(topic, -1, [timestamp], loop)

    def __repr__(self) -> str:
        state = "pending" if not self.done else "failed" if self.error is not None else "done"
        return f"ProduceRequestResult({self.topic}-{self.partition}, {state})"

    def metadata(self, index: int) -> RecordMetadata:
        base = self.base_offset
        ts = self.log_append_time
        return _new_metadata(RecordMetadata, (self.topic, self.partition, base + index if base >= 0 else -1,
                                              ts if ts >= 0 else self.timestamps[index]))

    # --- settling ------------------------------------------------------------------------
    def complete(self, base_offset: int, log_append_time: int = -1) -> None:
        """Every record succeeded; does nothing once settled."""
        if self.done:
            return
        self.base_offset = base_offset
        self.log_append_time = log_append_time
        self.done = True
        self._fire()

    def fail(self, error: BaseException) -> None:
        """Every record failed with ``error``; does nothing once settled."""
        if self.done:
            return
        self.error = error
        self.error_tb = error.__traceback__
        self.done = True
        self._fire()

    def settle(self, metadata: RecordMetadata | None, error: BaseException | None) -> None:
        """Settle a standalone result with its record's outcome in the batch it went to."""
        if error is not None:
            self.fail(error)
        else:
            self.partition = metadata.partition
            self.timestamps[0] = metadata.timestamp
            self.complete(metadata.offset)

    def _fire(self) -> None:
        callbacks, self.callbacks = self.callbacks, None
        if callbacks:
            schedule = self.loop.call_soon
            for _, fn, future, context in callbacks:
                schedule(fn, future, context=context)
        forwards, self.forwards = self.forwards, None
        if forwards:
            error = self.error
            for index, target in forwards:
                forward(target, None if error is not None else self.metadata(index), error)

    # --- per-record requests -------------------------------------------------------------
    def add_callback(self, index: int, fn, future, context) -> None:
        if self.callbacks is None:
            self.callbacks = []
        self.callbacks.append([index, fn, future, context])

    def remove_callback(self, index: int, fn) -> int:
        if not self.callbacks:
            return 0
        kept = [c for c in self.callbacks if c[0] != index or c[1] != fn]
        removed = len(self.callbacks) - len(kept)
        self.callbacks = kept
        return removed

    def add_forward(self, index: int, target) -> None:
        if self.forwards is None:
            self.forwards = []
        self.forwards.append((index, target))

    def is_cancelled(self, index: int) -> bool:
        return self.cancelled is not None and index in self.cancelled

    def cancel(self, index: int, msg=None) -> bool:
        """Cancel record ``index``'s future (not the record): False once it is done."""
        if self.done or self.is_cancelled(index):
            return False
        if self.cancelled is None:
            self.cancelled = {}
        self.cancelled[index] = msg
        if self.callbacks:
            mine = [c for c in self.callbacks if c[0] == index]
            if mine:
                self.callbacks = [c for c in self.callbacks if c[0] != index]
                for _, fn, future, context in mine:
                    self.loop.call_soon(fn, future, context=context)
        return True

    def cancelled_error(self, index: int) -> CancelledError:
        msg = self.cancelled[index]
        return CancelledError() if msg is None else CancelledError(msg)


def forward(target, metadata: RecordMetadata | None, error: BaseException | None) -> None:
    """Give one record's outcome to ``target``: a standalone ``ProduceRequestResult``, or a
    future-like object (left alone when it is done already, e.g. cancelled by its owner)."""
    if type(target) is ProduceRequestResult:
        target.settle(metadata, error)
    elif not target.done():
        if error is not None:
            target.set_exception(error)
            target.exception()  # fire-and-forget sends must not warn "never retrieved"
        else:
            target.set_result(metadata)
