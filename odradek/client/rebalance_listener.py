"""Telling the application which partitions it gains and loses when its group rebalances.

A ``listener`` given to ``subscribe`` is any object with some of these methods (a
``ConsumerRebalanceListener`` subclass, or anything duck-typed); each takes a set of
``TopicPartition``s and may be a plain function or a coroutine function:

- ``on_partitions_revoked(revoked)``: the consumer is about to give these up, after it stopped
  returning their records and (with ``enable_auto_commit``) committed what it returned. The
  place to commit or flush by hand. Called at the start of every rebalance except the first
  (range and roundrobin are *eager*: every member gives up everything before rejoining), on
  ``unsubscribe()`` and on ``close()``.
- ``on_partitions_assigned(assigned)``: the consumer now owns these (possibly none); called at
  the end of every rebalance, before the first records of the new assignment are returned.
  The place to ``seek`` somewhere else than the committed offset.
- ``on_partitions_lost(lost)``: the consumer found it was no longer a member (its session
  expired, it was fenced) so the partitions may already be someone else's and committing is
  pointless. Defaults to ``on_partitions_revoked``.

Callbacks run inside ``poll`` (or ``close``/``unsubscribe``), on the caller's thread with the
synchronous ``Consumer``, so they may call the consumer. An exception from one is raised by
that ``poll`` (or ``unsubscribe``) once the rebalance step it belongs to is complete; ``close``
logs it and closes anyway.
"""

from __future__ import annotations

import inspect
import logging

__all__ = ["ConsumerRebalanceListener", "invoke_listener"]

_log = logging.getLogger("odradek.client.consumer")


class ConsumerRebalanceListener:
    """A listener that does nothing; override what you need."""

    def on_partitions_revoked(self, revoked: set) -> None:
        pass

    def on_partitions_assigned(self, assigned: set) -> None:
        pass

    def on_partitions_lost(self, lost: set):
        return self.on_partitions_revoked(lost)


async def invoke_listener(listener, method: str, partitions) -> Exception | None:
    """Call ``listener.<method>(set(partitions))`` (awaiting it when it is a coroutine); return
    the exception it raised, if any, for the caller to raise when its step is done."""
    if listener is None:
        return None
    fn = getattr(listener, method, None)
    if fn is None and method == "on_partitions_lost":
        fn = getattr(listener, "on_partitions_revoked", None)
    if fn is None:
        return None
    try:
        result = fn(set(partitions))
        if inspect.isawaitable(result):
            await result
    except Exception as e:  # noqa: BLE001 - the application's error, raised by poll later
        _log.error("rebalance listener %s(%s) failed: %r", method, sorted(partitions), e)
        return e
    return None
