"""What a coordinator operation hands back: a response and the records to write.

An operation on a shard never writes by itself. It returns a ``CoordinatorResult``: the
response (or None when the answer goes out later through a waiting request's callback) and
zero or more ``Write``s, each a list of records that the runtime appends to the shard's
``__consumer_offsets`` partition as one batch, in order. Then, for each write:

- ``replay``: the runtime replays the records into the shard once they are appended. This is
  how committed offsets and deletions change state: only by replaying records, exactly as a
  restarted coordinator replays its partition. Group membership records are written with
  ``replay=False``: the membership they describe is already in memory (Kafka's classic groups
  work the same way) and the records are replayed only when loading.
- ``on_written(error)``: called once the records are appended and replicated (``error`` is
  ``ErrorCode.NONE``), or when that failed; it may return another result to apply.
- ``producer_id``/``producer_epoch`` (TxnOffsetCommit): the batch is a transactional batch of
  that producer (base sequence -1); replayed, its offsets stay pending until the marker.
  -1 (the default): an ordinary batch without producer.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from odradek.protocol.generated.error_codes import ErrorCode as E


@dataclass(slots=True)
class Write:
    records: list
    replay: bool = True
    on_written: Callable | None = None
    producer_id: int = -1
    producer_epoch: int = -1


@dataclass(slots=True)
class CoordinatorResult:
    response: Any = None
    writes: list[Write] = field(default_factory=list)

    def then(self, other: CoordinatorResult | None) -> CoordinatorResult:
        """This result's writes followed by ``other``'s (this response is kept)."""
        if other is not None:
            self.writes.extend(other.writes)
        return self


def group_write_error(error):
    """The error a member sees when group metadata could not be written (Kafka's mapping)."""
    if error in (E.UNKNOWN_TOPIC_OR_PARTITION, E.NOT_ENOUGH_REPLICAS, E.NOT_ENOUGH_REPLICAS_AFTER_APPEND):
        return E.COORDINATOR_NOT_AVAILABLE
    if error in (E.NOT_LEADER_OR_FOLLOWER, E.KAFKA_STORAGE_ERROR):
        return E.NOT_COORDINATOR
    if error == E.REQUEST_TIMED_OUT:
        return E.REBALANCE_IN_PROGRESS
    if error in (E.MESSAGE_TOO_LARGE, E.RECORD_LIST_TOO_LARGE, E.INVALID_FETCH_SIZE):
        return E.UNKNOWN_SERVER_ERROR
    return error


def offset_write_error(error):
    """The error a committer sees when its offsets could not be written (Kafka's mapping)."""
    if error in (E.UNKNOWN_TOPIC_OR_PARTITION, E.NOT_ENOUGH_REPLICAS, E.NOT_ENOUGH_REPLICAS_AFTER_APPEND):
        return E.COORDINATOR_NOT_AVAILABLE
    if error in (E.NOT_LEADER_OR_FOLLOWER, E.KAFKA_STORAGE_ERROR):
        return E.NOT_COORDINATOR
    if error in (E.MESSAGE_TOO_LARGE, E.RECORD_LIST_TOO_LARGE, E.INVALID_FETCH_SIZE):
        return E.INVALID_COMMIT_OFFSET_SIZE
    return error
