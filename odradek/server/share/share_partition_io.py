"""The async edge of a SharePartition: read the persisted state, write updates, then answer.

``share_partition.py`` is sans-I/O; these coroutines do the one await each operation needs
(Kafka's SharePartition.maybeInitialize and writeShareGroupState with a Persister,
``odradek/coordinator/share/persister.py``):

- ``initialize``: ReadShareGroupState with the partition's leader epoch, then
  ``SharePartition.initialize``;
- ``acknowledge`` / ``release_acquired_records``: stage the transitions, write them, report
  the write's result, and only then return the code to answer the member with;
- ``write_expired``: write what a lock expiry changed (best effort: the records are already
  AVAILABLE/ARCHIVED; only a fencing error matters).

Writes of one share partition should be sent in the order their updates were made, each once
the one before completed: the start offset and delivery complete count a write carries are
computed as it is sent (``SharePartition.persisted_view``), so the start offset only grows;
the persister's own errors come back as codes.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from odradek.coordinator.share.persister import Persister
from odradek.protocol.generated.error_codes import ErrorCode
from odradek.server.share.share_partition import SharePartition
from odradek.server.share.share_types import AcknowledgementBatch
from odradek.server.share.state_update import StateUpdate

__all__ = ["initialize", "acknowledge", "release_acquired_records", "write_update",
           "write_expired"]


async def initialize(sp: SharePartition, persister: Persister, *, log_start_offset: int,
                     high_watermark: int,
                     offset_for_timestamp: Callable[[int], int | None] | None = None) -> ErrorCode:
    sp.mark_initializing()
    read = await persister.read_state(sp.group_id, sp.topic_id, sp.partition, sp.leader_epoch)
    return sp.initialize(read, log_start_offset=log_start_offset, high_watermark=high_watermark,
                         offset_for_timestamp=offset_for_timestamp)


async def write_update(sp: SharePartition, persister: Persister, update: StateUpdate) -> ErrorCode:
    """Write ``update`` if it has anything to write, report the result, return the answer."""
    if update.error is not ErrorCode.NONE:
        return update.error
    error = ErrorCode.NONE
    if update.needs_write:
        start_offset, delivery_complete_count = sp.persisted_view(update)
        error = await persister.write_state(sp.group_id, sp.topic_id, sp.partition,
                                            update.state_epoch, update.leader_epoch,
                                            start_offset, update.batches,
                                            delivery_complete_count=delivery_complete_count)
    return sp.complete_update(update, error)


async def acknowledge(sp: SharePartition, persister: Persister, member_id: str,
                      batches: Sequence[AcknowledgementBatch]) -> ErrorCode:
    return await write_update(sp, persister, sp.acknowledge(member_id, batches))


async def release_acquired_records(sp: SharePartition, persister: Persister,
                                   member_id: str) -> ErrorCode:
    return await write_update(sp, persister, sp.release_acquired_records(member_id))


async def write_expired(sp: SharePartition, persister: Persister,
                        update: StateUpdate | None) -> ErrorCode:
    """Write what a popped lock timer returned (``None``: nothing expired)."""
    return ErrorCode.NONE if update is None else await write_update(sp, persister, update)
