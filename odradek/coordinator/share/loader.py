"""Loading a share coordinator shard: replay a ``__share_group_state`` partition.

As the group coordinator's loader (``coordinator/group/loader.py``): whole batches from the log
start to its end (``coordinator.log_replay``), each record decoded and replayed into a shard no
request can see yet; a record that does not decode is logged and skipped; control batches
(none are written here) are ignored. Plain synchronous code, run in a worker thread.
"""

from __future__ import annotations

import logging

from odradek.coordinator.log_replay import READ_BYTES, LoadStats, replay_log
from odradek.coordinator.share.share_coordinator_record import ShareRecordError, decode_record

log = logging.getLogger("odradek.coordinator.share")


def load_shard(shard, plog, end_offset: int | None = None) -> LoadStats:
    """Replay ``plog`` up to ``end_offset`` (default: its end) into ``shard``."""

    def replay_record(batch, record) -> bool:
        try:
            decoded = decode_record(record.key, record.value)
        except ShareRecordError as e:
            log.warning("partition %d: skipping record at offset %d: %s", shard.partition, record.offset, e)
            return False
        if decoded is None:
            return False
        shard.replay(decoded)
        return True

    return replay_log(plog, replay_record, None, end_offset, READ_BYTES)
