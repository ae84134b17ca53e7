"""What `ControllerService`'s event thread takes from its queue (Kafka's ``QueuedEvent`` of
``ControllerEventManager``), and how a queued broker request is answered when this broker is
not, or stops being, the controller."""

from __future__ import annotations

import concurrent.futures
from dataclasses import dataclass, field

from odradek.controller import events as ev
from odradek.controller.commands import (
    AlterPartitionReply,
    ControlledShutdownReply,
    ElectLeadersReply,
    Reply,
)
from odradek.controller.reassignment import not_controller_reassignment_reply
from odradek.protocol.generated.error_codes import ErrorCode

RETRIED = frozenset({"elect", "reelect", "watch"})
"""Kinds re-queued when the store is unreachable: they read the store afresh when retried.
Events from brokers are answered NOT_CONTROLLER instead (their senders retry)."""


@dataclass
class QueuedItem:
    """One item: ``kind`` is "event" (``payload`` a `events.ControllerEvent`), "elect",
    "reelect", "watch" (``payload`` the watch's key), "rebalance" or "stop"; ``future`` gets
    the answer; ``sent`` collects the futures of requests to this broker itself (an election's
    caller waits for them)."""

    kind: str
    payload: object = None
    future: concurrent.futures.Future | None = None
    sent: list = field(default_factory=list)


def resolve(future: concurrent.futures.Future | None, value) -> None:
    """Set ``future``'s result unless it is done (answered, or cancelled by its waiter)."""
    if future is None or future.done():
        return
    # only the event thread resolves; a waiter may still cancel until the future is running
    if future.set_running_or_notify_cancel():
        future.set_result(value)


def not_controller_reply(event: ev.ControllerEvent) -> Reply | None:
    """The answer to a broker's request when this broker is not the controller."""
    if isinstance(event, ev.AlterPartition):
        return AlterPartitionReply(event.broker_id, ErrorCode.NOT_CONTROLLER)
    if isinstance(event, ev.ControlledShutdown):
        return ControlledShutdownReply(event.broker_id, ErrorCode.NOT_CONTROLLER)
    if isinstance(event, ev.ElectLeaders):
        return ElectLeadersReply(-1, ErrorCode.NOT_CONTROLLER)
    return not_controller_reassignment_reply(event)
