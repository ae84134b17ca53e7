"""Writing transaction markers to the partitions this broker leads: the one implementation
behind the WriteTxnMarkers handler (markers from any coordinator, over the wire) and behind
the transaction coordinator's markers for its own broker's partitions (in-process,
``coordinator/transaction/marker_channel``, through ``broker.write_txn_markers``:
``server/broker_services.py``).

``write_markers(broker, writes)`` takes ``MarkerWrite``s (one partition's COMMIT or ABORT
marker for one producer, ``coordinator/transaction/marker_write.py``) and sets each one's
``error``, independently (one failing partition does not stop the others):

- not hosted here as leader → NOT_LEADER_OR_FOLLOWER; no such topic or partition →
  UNKNOWN_TOPIC_OR_PARTITION; fewer in-sync replicas than ``min.insync.replicas`` →
  NOT_ENOUGH_REPLICAS (nothing appended; the coordinator retries);
- the marker's coordinator epoch below the producer's newest → TRANSACTION_COORDINATOR_FENCED;
  its producer epoch below the producer's → INVALID_PRODUCER_EPOCH
  (``replication/transactions.write_marker``);
- otherwise the control batch is appended, which ends the producer's open transaction (an
  ABORT records it in the segment's ``.txnindex``), and the write is done once the marker is
  replicated to the ISR (as acks=all, Kafka appending markers with ``requiredAcks = -1``:
  ``ReplicaManager.replication_error``; NOT_LEADER_OR_FOLLOWER when leadership moved
  meanwhile, NOT_ENOUGH_REPLICAS_AFTER_APPEND when the ISR shrank below
  ``min.insync.replicas`` before the high watermark passed the marker, REQUEST_TIMED_OUT
  after ``MARKER_REPLICATION_TIMEOUT_S``). WriteTxnMarkers answers these codes as they are,
  as Kafka does; the coordinator retries them all (``marker_channel``, Kafka's
  ``TransactionMarkerRequestCompletionHandler``), and offsets are completed only by a
  marker answered NONE.

A ``__consumer_offsets`` partition's marker, once replicated, makes the producer's pending
transactional offsets there committed or dropped:
``broker.group_coordinator.complete_transaction(partition, producer_id, commit)``.
"""

from __future__ import annotations

from odradek.coordinator.transaction.marker_write import MarkerWrite
from odradek.protocol.generated.error_codes import ErrorCode
from odradek.replication.produce_validation import ProduceError
from odradek.replication.transactions import write_marker

OFFSETS_TOPIC = "__consumer_offsets"
# How long a marker waits for the ISR (Kafka uses request.timeout.ms, 30 s by default).
MARKER_REPLICATION_TIMEOUT_S = 30.0


async def write_markers(broker, writes: list[MarkerWrite]) -> None:
    """Append each marker, wait for the ISR to have the appended ones, complete the
    transactional offsets of those on ``__consumer_offsets``; each write's ``error`` set."""
    now_ms = broker.clock.milliseconds()
    appended = []
    for write in writes:
        write.error, write.offset = _write_one(broker, write, now_ms)
        if write.error == ErrorCode.NONE:
            appended.append(write)
    if appended:
        await _await_replication(broker, appended)
        _complete_offsets(broker, appended)


def _write_one(broker, write: MarkerWrite, now_ms: int) -> tuple[ErrorCode, int]:
    """Append one marker; ``(error, marker offset)``."""
    topic, index = write.topic, write.index
    part, error = broker.leader_partition(topic, index)
    if part is None:
        return error, -1
    min_isr = broker.topics.min_insync_replicas(topic)
    if len(part.isr) < min_isr:
        return ErrorCode.NOT_ENOUGH_REPLICAS, -1
    try:
        result = write_marker(part, write.producer_id, write.producer_epoch, write.coordinator_epoch,
                              write.commit, now_ms)
    except ProduceError as e:
        if e.error == ErrorCode.KAFKA_STORAGE_ERROR:
            broker.log_storage_error(e)
        else:
            broker.log_bad_input(f"transaction marker for {topic}-{index} refused: {e.error.name}: {e}")
        return e.error, -1
    broker.replica_manager.notify(part.key)
    return ErrorCode.NONE, result.last_offset


async def _await_replication(broker, appended: list[MarkerWrite]) -> None:
    replica_manager = broker.replica_manager
    waits = [(w.topic, w.index, w.offset, w) for w in appended]
    if not replica_manager.all_replicated(waits):
        await replica_manager.wait_for_replication(waits, MARKER_REPLICATION_TIMEOUT_S)
    for topic, index, offset, write in waits:
        error = replica_manager.replication_error(topic, index, offset)
        write.error = ErrorCode.REQUEST_TIMED_OUT if error is None else error


def _complete_offsets(broker, appended: list[MarkerWrite]) -> None:
    """The group coordinator's part, for the ``__consumer_offsets`` markers that landed."""
    coordinator = getattr(broker, "group_coordinator", None)
    complete = getattr(coordinator, "complete_transaction", None)
    if complete is None:
        return
    for write in appended:
        if write.topic == OFFSETS_TOPIC and write.error == ErrorCode.NONE:
            complete(write.index, write.producer_id, write.commit)
