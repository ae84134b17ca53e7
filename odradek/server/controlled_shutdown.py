"""Controlled shutdown (Kafka's ``KafkaServer.controlledShutdown``): before a broker stops, it
asks the controller to move the leadership of its partitions to other replicas, so clients
fail over at once instead of after the ZooKeeper session expires.

The broker sends ControlledShutdown (key 7: its id and broker epoch) to the controller
through ``broker.broker_to_controller`` and repeats it, ``controlled.shutdown.retry.backoff.ms``
apart, up to ``controlled.shutdown.max.retries`` times, until the controller answers NONE with
no partition remaining (a partition whose only live replica is this broker is not counted by
the controller: it cannot move). Each try is bounded by ``controller.socket.timeout.ms``.
Whatever the outcome, the broker then stops: the controller treats it as failed when its
registration goes.
"""

from __future__ import annotations

import asyncio
import logging

from odradek.protocol.api_keys import ApiKey
from odradek.protocol.generated.controlled_shutdown_request import ControlledShutdownRequest
from odradek.protocol.generated.error_codes import ErrorCode

log = logging.getLogger("odradek.broker")


async def controlled_shutdown(broker) -> bool:
    """Ask the controller to move this broker's leaderships away; True when it did."""
    config = broker.config
    tries = config["controlled.shutdown.max.retries"]
    backoff_s = config["controlled.shutdown.retry.backoff.ms"] / 1000
    timeout_s = config["controller.socket.timeout.ms"] / 1000
    for attempt in range(1, tries + 1):
        request = ControlledShutdownRequest(broker_id=broker.broker_id, broker_epoch=broker.broker_epoch)
        try:
            response = await asyncio.wait_for(
                broker.broker_to_controller.send(ApiKey.CONTROLLED_SHUTDOWN, request), timeout_s)
        except Exception as e:  # no controller reachable in time, or the channel gave up
            log.warning("controlled shutdown of broker %d, try %d of %d: %s", broker.broker_id, attempt, tries,
                        e or type(e).__name__)
        else:
            remaining = [f"{p.topic_name}-{p.partition_index}" for p in response.remaining_partitions]
            if response.error_code == ErrorCode.NONE and not remaining:
                log.info("controlled shutdown of broker %d succeeded", broker.broker_id)
                return True
            log.info("controlled shutdown of broker %d, try %d of %d: %s, %d partitions still led here%s",
                     broker.broker_id, attempt, tries, ErrorCode(response.error_code).name, len(remaining),
                     f" ({', '.join(remaining[:10])})" if remaining else "")
        if attempt < tries:
            await asyncio.sleep(backoff_s)
    log.warning("controlled shutdown of broker %d did not succeed; stopping anyway", broker.broker_id)
    return False
