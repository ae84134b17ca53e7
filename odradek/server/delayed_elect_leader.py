"""Waiting for elected leaders to show (Kafka's ``DelayedElectLeader``).

The controller answers an election once its writes are durable; the broker's answer waits,
up to the request's ``timeout_ms``, until this broker's metadata image (the state znodes,
watched) shows each elected partition led by the broker the controller chose, so a client
that reads the metadata after the answer sees the new leaders. A partition whose leader is
not there by then is answered REQUEST_TIMED_OUT (it may still get that leader later); the
other outcomes are kept as the controller gave them.
"""

from __future__ import annotations

from dataclasses import replace

from odradek.controller.commands import ElectionOutcome
from odradek.protocol.generated.error_codes import ErrorCode
from odradek.server.delayed_topic_operations import poll_until


async def await_elected_leaders(
    broker, outcomes: list[ElectionOutcome], timeout_ms: int
) -> list[ElectionOutcome]:
    """``outcomes`` once every elected leader shows in ``broker``'s metadata image, or with
    REQUEST_TIMED_OUT for those that do not within ``timeout_ms``."""
    waiting = {(o.topic, o.partition): o.leader for o in outcomes if o.error == ErrorCode.NONE}

    def done() -> bool:
        image = broker.metadata_image()
        for tp, leader in list(waiting.items()):
            state = image.partition_state(*tp)
            if state is not None and state.leader == leader:
                del waiting[tp]
        return not waiting

    if waiting:
        await poll_until(done, max(timeout_ms, 0))
    return [
        replace(o, error=ErrorCode.REQUEST_TIMED_OUT, leader=-1)
        if (o.topic, o.partition) in waiting else o
        for o in outcomes
    ]
