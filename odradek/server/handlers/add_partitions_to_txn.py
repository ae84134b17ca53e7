"""AddPartitionsToTxn (key 24): a transactional producer names the partitions it is about to
write in its transaction (v0-v3, the client versions).

Served by the transactional id's coordinator (``TransactionCoordinator.add_partitions``): the
transaction becomes (or stays) Ongoing with these partitions, written to
``__transaction_state`` before the answer. Every partition gets the same error. Partitions of
topics that do not exist answer UNKNOWN_TOPIC_OR_PARTITION and the others
OPERATION_NOT_ATTEMPTED, nothing added, as Kafka does. PRODUCER_FENCED is
INVALID_PRODUCER_EPOCH before v2. v4+ (brokers verifying a transaction, KIP-890) is not
served: odradek's partition leaders do not verify (``api_keys`` narrows the range).
"""

from __future__ import annotations

from odradek.protocol.generated.add_partitions_to_txn_response import (
    AddPartitionsToTxnPartitionResult,
    AddPartitionsToTxnResponse,
    AddPartitionsToTxnTopicResult,
)
from odradek.protocol.generated.error_codes import ErrorCode


async def handle(ctx, request):
    partitions = [(t.name, p) for t in request.v3_and_below_topics for p in t.partitions]
    image = ctx.broker.metadata_image()
    unknown = {tp for tp in partitions if _unknown(image, tp)}
    coordinator = ctx.broker.txn_coordinator
    if unknown:
        errors = {tp: ErrorCode.UNKNOWN_TOPIC_OR_PARTITION if tp in unknown else ErrorCode.OPERATION_NOT_ATTEMPTED
                  for tp in partitions}
    else:
        if coordinator is None:
            error = ErrorCode.COORDINATOR_NOT_AVAILABLE
        else:
            error = await coordinator.add_partitions(request.v3_and_below_transactional_id,
                                                     request.v3_and_below_producer_id,
                                                     request.v3_and_below_producer_epoch, partitions)
        if error == ErrorCode.PRODUCER_FENCED and ctx.api_version < 2:
            error = ErrorCode.INVALID_PRODUCER_EPOCH
        errors = dict.fromkeys(partitions, error)
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
