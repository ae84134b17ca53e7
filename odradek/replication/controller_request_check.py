"""The checks every controller request (LeaderAndIsr, StopReplica, UpdateMetadata) passes on
this broker before anything of it is carried out (``replication/state_change.py``): the
broker epoch it was sent for, and its controller epoch against the highest seen and, when
newer, against ``/controller_epoch`` in the store (off the event loop).
"""

from __future__ import annotations

import asyncio
import logging

from odradek.metadata.errors import MetadataError, StoreError
from odradek.protocol.generated.error_codes import ErrorCode
from odradek.replication.role_change import NO_BROKER_EPOCH, ControlHeader, check_control_request

log = logging.getLogger("odradek.state.change")  # state_change.py's: the same log lines as before


async def check_controller_request(broker, name: str, header: ControlHeader) -> ErrorCode:
    """The whole-request checks of the controller request ``name`` (LeaderAndIsr, StopReplica,
    UpdateMetadata): STALE_BROKER_EPOCH and STALE_CONTROLLER_EPOCH
    (``role_change.check_control_request``); on success the request's controller epoch is the
    highest seen.

    A controller epoch newer than any seen is first checked against ``/controller_epoch``
    (once per epoch: at each controller change): a controller writes it before it sends
    anything, so a newer epoch than the store holds comes from no controller, but from a
    stray client, and taking it would make every later request of the real controller look
    stale. It is refused as STALE_CONTROLLER_EPOCH (Kafka's ControllerMovedException: the
    sender is not the controller). Kafka trusts any sender there (CLUSTER_ACTION rights)."""
    rm = broker.replica_manager
    broker_epoch = getattr(broker, "broker_epoch", NO_BROKER_EPOCH)
    error = check_control_request(header, rm.controller_epoch, broker_epoch)
    if error == ErrorCode.NONE and header.controller_epoch > rm.controller_epoch:
        stored = await _stored_controller_epoch(broker, header.controller_epoch)
        if stored is not None and header.controller_epoch > stored:
            log.warning("ignoring %s of broker %d: its controller epoch %d is newer than the cluster's, %d: "
                        "not from a controller", name, header.controller_id, header.controller_epoch, stored)
            return ErrorCode.STALE_CONTROLLER_EPOCH
    if error == ErrorCode.STALE_BROKER_EPOCH:
        log.info("ignoring %s of controller %d: broker epoch %d older than ours, %d", name,
                 header.controller_id, header.broker_epoch, broker_epoch)
    elif error == ErrorCode.STALE_CONTROLLER_EPOCH:
        log.warning("ignoring %s of controller %d: controller epoch %d older than the latest known, %d",
                    name, header.controller_id, header.controller_epoch, rm.controller_epoch)
    else:
        rm.controller_epoch = header.controller_epoch
    return error


# A ZooKeeper server may serve a read a moment behind the write the controller just made
# (reads are not linearizable across sessions): a lower epoch is read again after these
# pauses before the request is refused; a follower server is normally milliseconds behind.
_EPOCH_REREADS_S = (0.05, 0.25)


async def _stored_controller_epoch(broker, wanted: int) -> int | None:
    """The epoch in ``/controller_epoch`` (read off the loop), read again while it is below
    ``wanted``; None when it cannot be read (then the request is not refused for it)."""
    loop = asyncio.get_running_loop()
    stored = None
    for pause in (0.0,) + _EPOCH_REREADS_S:
        if pause:
            await asyncio.sleep(pause)
        try:
            stored, _ = await loop.run_in_executor(None, broker.metadata.controller_epoch)
        except (OSError, StoreError, MetadataError) as e:  # a store that cannot answer now: no refusal
            log.warning("cannot read /controller_epoch to check a controller request: %s", e)
            return None
        if stored >= wanted:
            break
    return stored
