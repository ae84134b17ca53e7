"""AddPartitionsToTxn (key 24): a transactional producer names the partitions it is about to
write in its transaction (v0-v3, the client versions).

Served by the transactional id's coordinator (``TransactionCoordinator.add_partitions``): the
transaction becomes (or stays) Ongoing with these partitions, written to
``__transaction_state`` before the answer. Every partition gets the same error. Partitions of
topics that do not exist answer UNKNOWN_TOPIC_OR_PARTITION and the others
OPERATION_NOT_ATTEMPTED, nothing added, as Kafka does. PRODUCER_FENCED is
INVALID_PRODUCER_EPOCH before v2. v4+ (brokers verifying a transaction, KIP-890) is not
served yet: a partition leader verifies in-process when the transaction's coordinator is on
its own broker (``server/txn_verification.py``); ``api_keys`` narrows the range.
"""

from __future__ import annotations

from odradek.coordinator.transaction.transaction_coordinator import answer_now
from odradek.protocol.generated.add_partitions_to_txn_response import (
    AddPartitionsToTxnPartitionResult,
    AddPartitionsToTxnResponse,
    AddPartitionsToTxnTopicResult,
)
from odradek.protocol.generated.error_codes import ErrorCode
from odradek.protocol import acl_binding as acl
from odradek.server import authorize


def handle(ctx, request):
    """The response, or a coroutine of it while the coordinator's write is replicated. The
    coordinator writes (or prepares) the transit here, before the connection reads the next
    request: a Produce pipelined behind this request finds the partitions added, or being
    added, and its verification waits for them (KIP-890)."""
    partitions = [(t.name, p) for t in request.v3_and_below_topics for p in t.partitions]
    image = ctx.broker.metadata_image()
    unknown = {tp for tp in partitions if _unknown(image, tp)}
    coordinator = ctx.broker.txn_coordinator
    # Kafka: WRITE on the transactional id, then WRITE on each topic (the others not attempted)
    if not authorize.allowed(ctx, acl.WRITE, acl.TRANSACTIONAL_ID, request.v3_and_below_transactional_id):
        return _respond(ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, partitions)
    denied = {tp for tp in partitions if not authorize.allowed(ctx, acl.WRITE, acl.TOPIC, tp[0])}
    if denied:
        return _respond({tp: ErrorCode.TOPIC_AUTHORIZATION_FAILED if tp in denied else ErrorCode.OPERATION_NOT_ATTEMPTED
                         for tp in partitions})
    if unknown:
        errors = {tp: ErrorCode.UNKNOWN_TOPIC_OR_PARTITION if tp in unknown else ErrorCode.OPERATION_NOT_ATTEMPTED
                  for tp in partitions}
        return _respond(errors)
    if coordinator is None:
        return _respond(dict.fromkeys(partitions, ErrorCode.COORDINATOR_NOT_AVAILABLE))
    added = coordinator.add_partitions(request.v3_and_below_transactional_id, request.v3_and_below_producer_id,
                                       request.v3_and_below_producer_epoch, partitions)
    error = answer_now(added)
    if error is None:
        return _answer(added, partitions, ctx.api_version)
    return _respond(_per_version(error, ctx.api_version), partitions)


async def _answer(added, partitions, version: int) -> AddPartitionsToTxnResponse:
    return _respond(_per_version(await added, version), partitions)


def _per_version(error: ErrorCode, version: int) -> ErrorCode:
    return ErrorCode.INVALID_PRODUCER_EPOCH if error == ErrorCode.PRODUCER_FENCED and version < 2 else error


def _respond(error: ErrorCode | dict, partitions=()) -> AddPartitionsToTxnResponse:
    """The response: ``error`` for every partition, or per partition (a dict)."""
    errors = error if isinstance(error, dict) else dict.fromkeys(partitions, error)
    return AddPartitionsToTxnResponse(throttle_time_ms=0, results_by_topic_v3_and_below=_by_topic(errors))


def _unknown(image, tp) -> bool:
    topic = image.topic(tp[0])
    return topic is None or not 0 <= tp[1] < len(topic.partitions)


def _by_topic(errors: dict) -> list[AddPartitionsToTxnTopicResult]:
    topics: dict[str, AddPartitionsToTxnTopicResult] = {}
    for (topic, p), error in errors.items():
        result = topics.setdefault(topic, AddPartitionsToTxnTopicResult(name=topic, results_by_partition=[]))
        result.results_by_partition.append(AddPartitionsToTxnPartitionResult(partition_index=p,
                                                                             partition_error_code=error))
    return list(topics.values())
